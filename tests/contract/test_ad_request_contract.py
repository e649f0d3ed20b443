"""The spec's ad request operation (sections 2.1, 2.2, 4.1, 4.3): fields, formats, both paths, 204."""

from __future__ import annotations

import time
import uuid
import xml.etree.ElementTree as ET

import httpx
import pytest
import sqlalchemy as sa

from adslot.storage.tables import ad_requests
from tests.conftest import PROD_VENUE, LiveServer, play_time
from tests.contract.support import (
    ENVIRONMENTS,
    PATHS,
    base_of,
    count_rows,
    key_of,
    record_of,
    request_ad,
    stored_row,
    venue_of,
)

RESULT_FIELDS = {"vast_tag", "ad_request_uuid", "ad_request_expired_at", "venue_id", "screen_id"}


@pytest.mark.parametrize("path", PATHS)
def test_json_answer_wraps_the_result_fields_in_status_and_data(
    live: LiveServer, http: httpx.Client, path: str
) -> None:
    assert live.keys
    when = play_time()
    response = http.post(
        f"{live.url}{path}?format=json",
        headers={"Ssp-Key": live.keys.production},
        json={"venue_id": PROD_VENUE, "screen_id": "s-1", "play_time": when},
    )
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("application/json")
    body = response.json()
    assert set(body) == {"status", "data"}
    assert body["status"] == 200
    data = body["data"]
    assert set(data) == RESULT_FIELDS
    assert data["venue_id"] == PROD_VENUE and data["screen_id"] == "s-1"
    assert data["ad_request_expired_at"] == when + live.settings.play_window_seconds
    assert data["ad_request_expired_at"] > time.time()
    assert f'<Ad id="{data["ad_request_uuid"]}">' in data["vast_tag"]


@pytest.mark.parametrize("env", ENVIRONMENTS)
@pytest.mark.parametrize("path", PATHS)
def test_result_fields_have_the_spec_types_in_both_environments(
    live: LiveServer, http: httpx.Client, env: str, path: str
) -> None:
    when = play_time(300)
    response = request_ad(
        http,
        live,
        env=env,
        path=path,
        fmt="json",
        body={"venue_id": venue_of(env), "screen_id": "s", "play_time": when},
    )
    assert response.status_code == 200, response.text
    data = response.json()["data"]
    assert isinstance(data["vast_tag"], str) and data["vast_tag"].lstrip().startswith("<?xml")
    assert isinstance(data["ad_request_uuid"], str)
    assert str(uuid.UUID(data["ad_request_uuid"])) == data["ad_request_uuid"], "canonical lower-case uuid"
    assert type(data["ad_request_expired_at"]) is int
    assert data["ad_request_expired_at"] == when + live.settings.play_window_seconds
    assert isinstance(data["venue_id"], str) and isinstance(data["screen_id"], str)


@pytest.mark.parametrize("env", ENVIRONMENTS)
def test_absent_format_answers_the_same_json_envelope_as_format_json(
    live: LiveServer, http: httpx.Client, env: str
) -> None:
    when = play_time()
    response = request_ad(http, live, env=env, body={"venue_id": venue_of(env), "play_time": when})
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("application/json")
    body = response.json()
    assert body["status"] == 200 and set(body["data"]) == RESULT_FIELDS
    assert body["data"]["ad_request_expired_at"] == when + live.settings.play_window_seconds


@pytest.mark.parametrize("env", ENVIRONMENTS)
def test_screen_id_is_optional_and_answered_as_null_when_not_sent(
    live: LiveServer, http: httpx.Client, env: str
) -> None:
    response = request_ad(http, live, env=env, body={"venue_id": venue_of(env), "play_time": play_time()})
    assert response.status_code == 200
    data = response.json()["data"]
    assert "screen_id" in data and data["screen_id"] is None
    assert data["venue_id"] == venue_of(env)


def test_screen_id_null_is_the_same_as_not_sending_it(live: LiveServer, http: httpx.Client) -> None:
    response = request_ad(
        http, live, body={"venue_id": PROD_VENUE, "screen_id": None, "play_time": play_time()}
    )
    assert response.status_code == 200
    assert response.json()["data"]["screen_id"] is None


@pytest.mark.parametrize("env", ENVIRONMENTS)
def test_venue_id_and_screen_id_are_echoed_exactly(live: LiveServer, http: httpx.Client, env: str) -> None:
    screen = "Lobby screen #3 - größer ✓"
    venue = venue_of(env) if env == "production" else 'Café <Nord> & "Süd"'
    response = request_ad(
        http, live, env=env, body={"venue_id": venue, "screen_id": screen, "play_time": play_time()}
    )
    assert response.status_code == 200
    data = response.json()["data"]
    assert (data["venue_id"], data["screen_id"]) == (venue, screen)


def test_expiry_lies_in_the_future_even_for_a_play_time_within_the_clock_skew_tolerance(
    live: LiveServer, http: httpx.Client
) -> None:
    when = int(time.time()) - live.settings.play_time_skew_seconds // 2
    before = time.time()
    response = request_ad(http, live, body={"venue_id": PROD_VENUE, "play_time": when})
    assert response.status_code == 200, response.text
    expired_at = response.json()["data"]["ad_request_expired_at"]
    assert expired_at == when + live.settings.play_window_seconds
    assert expired_at > before


def test_play_time_at_the_furthest_allowed_lead_is_accepted(live: LiveServer, http: httpx.Client) -> None:
    when = int(time.time()) + live.settings.play_time_max_lead_seconds - 5
    response = request_ad(http, live, body={"venue_id": PROD_VENUE, "play_time": when})
    assert response.status_code == 200, response.text
    assert response.json()["data"]["ad_request_expired_at"] == when + live.settings.play_window_seconds


def test_every_ad_request_gets_a_new_uuid_and_a_stored_record(
    live: LiveServer, http: httpx.Client, dbs: dict[str, sa.Engine]
) -> None:
    when = play_time()
    body = {"venue_id": PROD_VENUE, "screen_id": "s-9", "play_time": when}
    first = request_ad(http, live, body=body).json()["data"]
    second = request_ad(http, live, body=body).json()["data"]
    assert first["ad_request_uuid"] != second["ad_request_uuid"]
    for data in (first, second):
        row = stored_row(dbs["production"], uuid.UUID(data["ad_request_uuid"]))
        assert row is not None
        assert (row["venue_id"], row["screen_id"], row["play_time"], row["expires_at"]) == (
            PROD_VENUE,
            "s-9",
            when,
            data["ad_request_expired_at"],
        )
        record = record_of(http, live, data["ad_request_uuid"])
        assert record["state"] == "issued"
        assert record["ad_request_expired_at"] == data["ad_request_expired_at"]
        assert record["campaign_id"] == live.extra["campaign_id"]
        assert record["creative_id"] == live.extra["creative_id"]


@pytest.mark.parametrize("env", ENVIRONMENTS)
@pytest.mark.parametrize("path", PATHS)
def test_format_xml_answers_the_vast_document_itself_with_uuid_and_expiry_headers(
    live: LiveServer, http: httpx.Client, env: str, path: str
) -> None:
    when = play_time()
    response = request_ad(
        http,
        live,
        env=env,
        path=path,
        fmt="xml",
        body={"venue_id": venue_of(env), "screen_id": "x", "play_time": when},
    )
    assert response.status_code == 200, response.text
    assert response.headers["content-type"].startswith("application/xml")
    uuid_text = response.headers["x-ad-request-uuid"]
    assert str(uuid.UUID(uuid_text)) == uuid_text
    assert int(response.headers["x-ad-request-expired-at"]) == when + live.settings.play_window_seconds
    assert response.text.startswith('<?xml version="1.0" encoding="UTF-8"?>')
    root = ET.fromstring(response.content)
    assert root.tag == "VAST" and root.get("version") == "2.0"
    ad = root.find("Ad")
    assert ad is not None and ad.get("id") == uuid_text
    wrapper_uri = root.findtext("Ad/Wrapper/VASTAdTagURI")
    assert wrapper_uri == f"{base_of(live, env)}/api/v1/ad/vast/{uuid_text}"
    assert (
        record_of(http, live, uuid_text, env)["ad_request_expired_at"]
        == when + live.settings.play_window_seconds
    )


def test_xml_document_is_the_same_vast_tag_the_json_answer_carries(
    live: LiveServer, http: httpx.Client
) -> None:
    as_json = request_ad(
        http, live, body={"venue_id": PROD_VENUE, "screen_id": "a", "play_time": play_time()}
    )
    as_xml = request_ad(
        http, live, fmt="xml", body={"venue_id": PROD_VENUE, "screen_id": "a", "play_time": play_time()}
    )
    json_uuid = as_json.json()["data"]["ad_request_uuid"]
    xml_uuid = as_xml.headers["x-ad-request-uuid"]
    assert as_json.json()["data"]["vast_tag"].replace(json_uuid, "UUID") == as_xml.text.replace(
        xml_uuid, "UUID"
    )


NO_FILL = [
    pytest.param("sandbox", "sandbox-no-fill", id="sandbox-magic-no-fill-venue"),
    pytest.param("production", "venue-empty", id="production-venue-without-campaign"),
]


@pytest.mark.parametrize(("env", "venue"), NO_FILL)
@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("fmt", [None, "json", "xml"])
def test_no_ad_answers_204_with_no_body_and_stores_nothing(
    live: LiveServer,
    http: httpx.Client,
    dbs: dict[str, sa.Engine],
    env: str,
    venue: str,
    path: str,
    fmt: str | None,
) -> None:
    before = count_rows(dbs[env], ad_requests)
    response = request_ad(
        http,
        live,
        env=env,
        path=path,
        fmt=fmt,
        body={"venue_id": venue, "screen_id": "s", "play_time": play_time()},
    )
    assert response.status_code == 204
    assert response.content == b""
    assert "content-type" not in response.headers
    assert "content-length" not in response.headers, "RFC 9110 8.6: no Content-Length in a 204"
    assert "x-ad-request-uuid" not in response.headers
    assert count_rows(dbs[env], ad_requests) == before


def test_sandbox_fills_any_venue_id_without_registration(live: LiveServer, http: httpx.Client) -> None:
    for venue in ("never-registered-1", "another venue", "9"):
        response = request_ad(http, live, env="sandbox", body={"venue_id": venue, "play_time": play_time()})
        assert response.status_code == 200, response.text
        assert response.json()["data"]["venue_id"] == venue


def test_ad_requests_of_each_environment_are_stored_only_in_its_own_database(
    live: LiveServer, http: httpx.Client, dbs: dict[str, sa.Engine]
) -> None:
    for env in ENVIRONMENTS:
        other = "sandbox" if env == "production" else "production"
        data = request_ad(http, live, env=env).json()["data"]
        ad_request_id = uuid.UUID(data["ad_request_uuid"])
        assert stored_row(dbs[env], ad_request_id) is not None
        assert stored_row(dbs[other], ad_request_id) is None
        lookup = http.get(
            f"{base_of(live, other)}/api/v1/ad/request/{data['ad_request_uuid']}",
            headers={"Ssp-Key": key_of(live, other)},
        )
        assert lookup.status_code == 404
