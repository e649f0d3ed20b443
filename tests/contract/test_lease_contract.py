"""The lease of an ad request: the player gives an unplayed slot back (release) and lists what may play.

Release is keyed to the account that asked for the ad and frees its reservations at once; the manifest lists
the creatives a venue may play in the next hours, for players to download ahead.
"""

from __future__ import annotations

import hashlib
import re
import time
import uuid
from typing import Any

import httpx
import pytest
import sqlalchemy as sa

from tests.conftest import PROD_VENUE, LiveServer, play_time
from tests.contract.support import (
    ENVIRONMENTS,
    QUARTILES,
    account_id_of_key,
    assert_empty_vast_error,
    assert_error,
    base_of,
    fire,
    insert_expired,
    issue,
    key_of,
    record_of,
    request_ad,
    stored_row,
    wait_until,
)

MANIFEST = "/api/v1/ad/manifest"
CREATIVE_FIELDS = {
    "creative_id",
    "campaign_id",
    "media_url",
    "mime_type",
    "width",
    "height",
    "duration_seconds",
    "size_bytes",
    "sha256",
}


def release(
    http: httpx.Client, live: LiveServer, uuid_text: str, env: str = "production", key: str | None = None
) -> httpx.Response:
    """POST the release of `uuid_text` with the environment's ordinary key, or `key` ("" sends none)."""
    key = key_of(live, env) if key is None else key
    return http.post(
        f"{base_of(live, env)}/api/v1/ad/request/{uuid_text}/release",
        headers={"Ssp-Key": key} if key else {},
    )


def assert_released(response: httpx.Response, uuid_text: str, result: str) -> None:
    assert response.status_code == 200, response.text
    assert response.headers["content-type"].startswith("application/json"), response.headers
    assert response.headers["cache-control"] == "no-store"
    assert response.json() == {"status": 200, "data": {"ad_request_uuid": uuid_text, "result": result}}


def manifest(
    http: httpx.Client, live: LiveServer, env: str = "production", key: str | None = None, **params: str
) -> httpx.Response:
    key = key_of(live, env) if key is None else key
    return http.get(f"{base_of(live, env)}{MANIFEST}", params=params, headers={"Ssp-Key": key} if key else {})


def manifest_data(
    http: httpx.Client, live: LiveServer, env: str = "production", **params: str
) -> dict[str, Any]:
    response = manifest(http, live, env, **params)
    assert response.status_code == 200, response.text
    body = response.json()
    assert set(body) == {"status", "data"} and body["status"] == 200, body
    data: dict[str, Any] = body["data"]
    return data


# --- release ------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("env", ENVIRONMENTS)
def test_release_of_an_unplayed_ad_request_answers_released_then_already_released(
    live: LiveServer, http: httpx.Client, env: str
) -> None:
    uuid_text = issue(http, live, env)["ad_request_uuid"]
    before = int(time.time())
    assert_released(release(http, live, uuid_text, env), uuid_text, "released")
    after = int(time.time())
    settled_at = record_of(http, live, uuid_text, env)["settled_at"]
    assert before <= settled_at <= after
    assert_released(release(http, live, uuid_text, env), uuid_text, "already_released")
    assert record_of(http, live, uuid_text, env)["settled_at"] == settled_at, (
        "a second release settles nothing"
    )


@pytest.mark.parametrize("env", ENVIRONMENTS)
def test_pixels_of_a_released_ad_request_answer_410_ad_request_released_and_count_only_as_late(
    live: LiveServer, http: httpx.Client, env: str
) -> None:
    base = base_of(live, env)
    uuid_text = issue(http, live, env)["ad_request_uuid"]
    assert_released(release(http, live, uuid_text, env), uuid_text, "released")
    for event in ("impression", *QUARTILES):
        response = fire(http, base, uuid_text, event)
        assert_error(response, 410, "ad_request_released", "ad_request_uuid")
        assert response.headers["cache-control"] == "no-store"
    head = fire(http, base, uuid_text, "impression", method="HEAD")
    assert (head.status_code, head.content) == (410, b"")
    record = record_of(http, live, uuid_text, env)
    assert record["state"] == "released"
    assert record["settle_reason"] == "released"
    assert isinstance(record["settled_at"], int)
    assert (record["plays"], record["impressions"]) == (0, 0)
    assert record["events"] == dict.fromkeys(("impression", *QUARTILES))
    assert (record["late_count"], record["duplicate_count"]) == (1 + len(QUARTILES) + 1, 0)


@pytest.mark.parametrize("env", ENVIRONMENTS)
def test_inline_vast_of_a_released_ad_request_is_410_empty_vast_ad_request_released(
    live: LiveServer, http: httpx.Client, env: str
) -> None:
    uuid_text = issue(http, live, env)["ad_request_uuid"]
    vast_url = f"{base_of(live, env)}/api/v1/ad/vast/{uuid_text}"
    assert http.get(vast_url).status_code == 200
    assert_released(release(http, live, uuid_text, env), uuid_text, "released")
    assert_empty_vast_error(http.get(vast_url), 410, "ad_request_released")
    assert record_of(http, live, uuid_text, env)["late_count"] == 0, "fetching the VAST is not a fire"


def test_releasing_a_played_ad_request_is_409_ad_request_played_and_the_play_still_counts(
    live: LiveServer, http: httpx.Client
) -> None:
    uuid_text = issue(http, live)["ad_request_uuid"]
    assert fire(http, live.url, uuid_text, "impression").json()["data"]["result"] == "counted"
    response = release(http, live, uuid_text)
    assert_error(response, 409, "ad_request_played", "ad_request_uuid")
    assert response.headers["cache-control"] == "no-store"
    record = record_of(http, live, uuid_text)
    assert record["state"] == "played"
    assert record["plays"] == 1 and record["events"]["impression"] is not None
    assert record["settle_reason"] != "released"
    start = fire(http, live.url, uuid_text, "start")
    assert start.status_code == 200 and start.json()["data"]["result"] == "counted", start.text


def test_release_with_another_accounts_key_is_404_unknown_ad_request_and_releases_nothing(
    live: LiveServer, http: httpx.Client
) -> None:
    assert live.keys
    uuid_text = issue(http, live)["ad_request_uuid"]
    response = release(http, live, uuid_text, key=live.keys.other_account)
    assert_error(response, 404, "unknown_ad_request", "ad_request_uuid")
    record = record_of(http, live, uuid_text)
    assert (record["state"], record["settle_reason"], record["settled_at"]) == ("issued", None, None)
    impression = fire(http, live.url, uuid_text, "impression")
    assert impression.status_code == 200 and impression.json()["data"]["result"] == "counted", impression.text
    assert record_of(http, live, uuid_text)["state"] == "played"


@pytest.mark.parametrize("env", ENVIRONMENTS)
def test_release_of_an_unknown_uuid_is_404_unknown_ad_request(
    live: LiveServer, http: httpx.Client, env: str
) -> None:
    assert_error(release(http, live, str(uuid.uuid4()), env), 404, "unknown_ad_request", "ad_request_uuid")


def test_release_of_an_ad_request_of_the_other_environment_is_404_and_releases_nothing(
    live: LiveServer, http: httpx.Client
) -> None:
    uuid_text = issue(http, live, "sandbox")["ad_request_uuid"]
    assert_error(release(http, live, uuid_text, "production"), 404, "unknown_ad_request", "ad_request_uuid")
    assert record_of(http, live, uuid_text, "sandbox")["state"] == "issued"


@pytest.mark.parametrize("malformed", ["not-a-uuid", "1234", "g" * 32])
def test_release_of_a_malformed_uuid_is_400_malformed_ad_request_uuid(
    live: LiveServer, http: httpx.Client, malformed: str
) -> None:
    assert_error(release(http, live, malformed), 400, "malformed_ad_request_uuid", "ad_request_uuid")


def test_release_without_a_key_is_401_missing_api_key_and_releases_nothing(
    live: LiveServer, http: httpx.Client
) -> None:
    uuid_text = issue(http, live)["ad_request_uuid"]
    response = release(http, live, uuid_text, key="")
    assert_error(response, 401, "missing_api_key", "Ssp-Key")
    assert response.headers["www-authenticate"] == 'ApiKey header="Ssp-Key"'
    assert record_of(http, live, uuid_text)["state"] == "issued"


def test_release_with_an_admin_only_key_is_403_insufficient_scope_and_releases_nothing(
    live: LiveServer, http: httpx.Client
) -> None:
    assert live.keys
    uuid_text = issue(http, live)["ad_request_uuid"]
    response = release(http, live, uuid_text, key=live.keys.production_admin_only)
    error = assert_error(response, 403, "insufficient_scope", "Ssp-Key")
    assert "ad_request" in error["message"]
    assert record_of(http, live, uuid_text)["state"] == "issued"


def test_release_with_a_sandbox_key_on_production_is_401_wrong_environment_and_releases_nothing(
    live: LiveServer, http: httpx.Client
) -> None:
    assert live.keys
    uuid_text = issue(http, live)["ad_request_uuid"]
    response = release(http, live, uuid_text, key=live.keys.sandbox)
    error = assert_error(response, 401, "wrong_environment", "Ssp-Key")
    assert live.sandbox_url in error["message"]
    assert record_of(http, live, uuid_text)["state"] == "issued"


def test_releasing_an_expired_ad_request_is_410_ad_request_expired_and_settles_it_as_expired(
    live: LiveServer, http: httpx.Client, dbs: dict[str, sa.Engine]
) -> None:
    engine = dbs["production"]
    account = account_id_of_key(engine, key_of(live, "production"))
    expired = str(insert_expired(engine, live, account_id=account, expired_seconds_ago=120))
    error = assert_error(release(http, live, expired), 410, "ad_request_expired", "ad_request_uuid")
    seconds = int(re.search(r"expired (\d+) seconds ago", error["message"]).group(1))  # type: ignore[union-attr]
    assert 120 <= seconds <= 180
    record = record_of(http, live, expired)
    assert (record["state"], record["settle_reason"]) == ("expired", "expired")
    assert_error(release(http, live, expired), 410, "ad_request_expired", "ad_request_uuid")
    row = stored_row(engine, uuid.UUID(expired))
    assert row is not None and row["late_count"] == 0, "a release is not a fire"


def test_release_frees_a_lifetime_cap_reservation_so_the_next_request_fills_at_once(
    live: LiveServer, http: httpx.Client
) -> None:
    assert live.keys
    admin = {"Ssp-Key": live.keys.production_admin}
    venue_id = f"lease-{uuid.uuid4().hex[:12]}"
    created = http.post(
        f"{live.url}/api/v1/venues", headers=admin, json={"venue_id": venue_id, "name": "Lease"}
    )
    assert created.status_code == 201, created.text
    advertiser = http.post(f"{live.url}/api/v1/advertisers", headers=admin, json={"name": "Lease Co"})
    assert advertiser.status_code == 201, advertiser.text
    now = int(time.time())
    campaign = http.post(
        f"{live.url}/api/v1/campaigns",
        headers=admin,
        json={
            "advertiser_id": advertiser.json()["id"],
            "name": "One play only",
            "start_at": now - 10,
            "end_at": now + 86400,
            "venue_ids": [venue_id],
            "caps": [{"period": "lifetime", "metric": "plays", "limit": 1}],
        },
    )
    assert campaign.status_code == 201, campaign.text
    creative = http.post(
        f"{live.url}/api/v1/campaigns/{campaign.json()['id']}/creatives",
        headers=admin,
        json={
            "name": "Lease 10s",
            "media_url": "https://cdn.example.test/lease.mp4",
            "mime_type": "video/mp4",
            "width": 1920,
            "height": 1080,
            "duration_seconds": 10,
        },
    )
    assert creative.status_code == 201, creative.text
    creative_id = creative.json()["id"]
    # Wait on the manifest, not on ad requests: a filled ad request would take the only play the cap allows.
    wait_until(
        lambda: any(
            c["creative_id"] == creative_id for c in manifest_data(http, live, venue_id=venue_id)["creatives"]
        ),
        what="the new campaign to reach the catalog",
    )
    body = {"venue_id": venue_id, "play_time": play_time()}

    first = request_ad(http, live, body=body)
    assert first.status_code == 200, first.text
    first_uuid = first.json()["data"]["ad_request_uuid"]
    assert record_of(http, live, first_uuid)["creative_id"] == creative_id
    second = request_ad(http, live, body=body)
    assert second.status_code == 204, f"the cap of 1 is reserved by the first request: {second.text}"

    assert_released(release(http, live, first_uuid), first_uuid, "released")
    third = request_ad(http, live, body=body)
    assert third.status_code == 200, f"the release must give the reservation back at once: {third.text}"
    assert record_of(http, live, third.json()["data"]["ad_request_uuid"])["creative_id"] == creative_id


# --- manifest -----------------------------------------------------------------------------------------------


def test_manifest_lists_the_seeded_creative_of_the_venue_with_its_download_fields(
    live: LiveServer, http: httpx.Client
) -> None:
    response = manifest(http, live, venue_id=PROD_VENUE)
    assert response.status_code == 200, response.text
    assert response.headers["content-type"].startswith("application/json")
    assert response.headers["cache-control"] == "private, max-age=300"
    data = response.json()["data"]
    assert (data["venue_id"], data["screen_id"]) == (PROD_VENUE, None)
    assert data["to"] - data["from"] == 24 * 3600, "the default window is 24 hours"
    by_id = {c["creative_id"]: c for c in data["creatives"]}
    assert len(by_id) == len(data["creatives"]), "each creative is listed once"
    creative = by_id[live.extra["creative_id"]]
    assert set(creative) >= CREATIVE_FIELDS, creative
    assert creative["campaign_id"] == live.extra["campaign_id"]
    assert (creative["media_url"], creative["mime_type"]) == (
        "https://cdn.example.test/acme.mp4",
        "video/mp4",
    )
    assert (creative["width"], creative["height"], creative["duration_seconds"]) == (1920, 1080, 15)


@pytest.mark.parametrize("hours", ["1", "72"])
def test_manifest_accepts_hours_from_1_to_72_as_the_window_with_a_screen_id(
    live: LiveServer, http: httpx.Client, hours: str
) -> None:
    data = manifest_data(http, live, venue_id=PROD_VENUE, screen_id="screen-m", hours=hours)
    assert data["to"] - data["from"] == int(hours) * 3600
    assert (data["venue_id"], data["screen_id"]) == (PROD_VENUE, "screen-m")
    assert live.extra["creative_id"] in {c["creative_id"] for c in data["creatives"]}


@pytest.mark.parametrize("hours", ["0", "73", "-1", "x", "1.5", " 1", "\uff11"])
def test_manifest_hours_outside_1_to_72_or_not_an_integer_is_400_invalid_hours(
    live: LiveServer, http: httpx.Client, hours: str
) -> None:
    response = manifest(http, live, venue_id=PROD_VENUE, hours=hours)
    assert_error(response, 400, "invalid_hours", "hours")
    assert response.headers["cache-control"] == "no-store"


@pytest.mark.parametrize("env", ENVIRONMENTS)
def test_manifest_without_venue_id_is_400_missing_field(
    live: LiveServer, http: httpx.Client, env: str
) -> None:
    assert_error(manifest(http, live, env), 400, "missing_field", "venue_id")
    assert_error(manifest(http, live, env, venue_id=""), 400, "missing_field", "venue_id")


@pytest.mark.parametrize("env", ENVIRONMENTS)
def test_manifest_with_an_over_long_venue_id_is_400_too_long(
    live: LiveServer, http: httpx.Client, env: str
) -> None:
    longest = "v" * live.settings.max_id_length
    at_limit = manifest(http, live, env, venue_id=longest)
    if env == "production":  # accepted in length, then refused as unregistered
        assert_error(at_limit, 422, "unknown_venue", "venue_id")
    else:
        assert at_limit.status_code == 200, at_limit.text
    assert_error(manifest(http, live, env, venue_id=longest + "v"), 400, "too_long", "venue_id")


def test_manifest_of_an_unregistered_production_venue_is_422_unknown_venue(
    live: LiveServer, http: httpx.Client
) -> None:
    assert_error(manifest(http, live, venue_id="nowhere-venue"), 422, "unknown_venue", "venue_id")


@pytest.mark.parametrize("venue_id", ["sandbox-venue-42", "any-other-venue"])
def test_sandbox_manifest_lists_the_demo_creative_for_any_venue(
    live: LiveServer, http: httpx.Client, venue_id: str
) -> None:
    data = manifest_data(http, live, "sandbox", venue_id=venue_id)
    assert data["venue_id"] == venue_id
    assert data["creatives"], data
    for creative in data["creatives"]:
        assert set(creative) >= CREATIVE_FIELDS, creative
        assert re.fullmatch(r"[0-9a-f]{64}", creative["sha256"]), creative
        assert isinstance(creative["size_bytes"], int) and creative["size_bytes"] > 0, creative
        assert creative["media_url"].startswith(live.sandbox_url + "/"), creative
        media = http.get(creative["media_url"])
        assert media.status_code == 200 and len(media.content) == creative["size_bytes"]
        assert hashlib.sha256(media.content).hexdigest() == creative["sha256"]


@pytest.mark.parametrize("env", ENVIRONMENTS)
def test_manifest_without_a_key_is_401_missing_api_key(
    live: LiveServer, http: httpx.Client, env: str
) -> None:
    response = manifest(http, live, env, key="", venue_id=PROD_VENUE)
    assert_error(response, 401, "missing_api_key", "Ssp-Key")


def test_manifest_with_an_admin_only_key_is_403_and_a_sandbox_key_on_production_is_401(
    live: LiveServer, http: httpx.Client
) -> None:
    assert live.keys
    assert_error(
        manifest(http, live, key=live.keys.production_admin_only, venue_id=PROD_VENUE),
        403,
        "insufficient_scope",
        "Ssp-Key",
    )
    assert_error(
        manifest(http, live, key=live.keys.sandbox, venue_id=PROD_VENUE), 401, "wrong_environment", "Ssp-Key"
    )
