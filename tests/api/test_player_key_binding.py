"""A player-link key asks for its own screen only: an ad request (both paths, JSON and XML), the player's
config, its status report and the creative manifest for any other venue or screen is refused with 403
key_not_for_screen naming the field, and nothing of it is counted; another screen's record reads as unknown.
It acts on its own screen's ad requests only: releasing, or uploading Proof of Play for, an ad request its
account asked for another screen is refused with 403 key_not_for_screen, and that ad request is untouched.
The binding is read with the key (auth/repository.py), so it holds both for a key the worker looked up on its
first request and for one in its catalog's key table."""

from __future__ import annotations

import json
import shutil
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import httpx
import pytest
import sqlalchemy as sa

from adslot.auth.keys import LIVE_PREFIX, hash_key
from adslot.auth.repository import active_keys, create_key, keys_by_hash
from adslot.catalog import bump_version
from adslot.inventory.repository import add_screen
from adslot.inventory.schemas import ScreenIn
from adslot.player import links
from adslot.storage.database import make_engine
from adslot.storage.tables import key_stats, player_status
from tests.conftest import PROD_VENUE, LiveServer, play_time

SCREEN = "door"
OTHER_SCREEN = "window"
PATHS = ("/api/v1/ad/request", "/ad/request")


@dataclass(frozen=True)
class Link:
    key: str
    key_id: int


@pytest.fixture(scope="module")
def link(live: LiveServer) -> Iterator[Link]:
    """A player link for PROD_VENUE's screen SCREEN (the venue also has OTHER_SCREEN), made after the server
    loaded its catalog, as the console makes one."""
    engine = make_engine(live.settings.environment("production"))
    with engine.begin() as conn:
        for screen in (SCREEN, OTHER_SCREEN):
            add_screen(conn, PROD_VENUE, ScreenIn(screen_id=screen))
        made = links.create_link(
            conn, base_url=live.url, prefix=LIVE_PREFIX, venue_id=PROD_VENUE, screen_id=SCREEN
        )
        bump_version(conn)
    engine.dispose()
    key = made.url.split("#key=", 1)[1].split("&", 1)[0]
    yield Link(key, made.key_id)


@pytest.fixture(scope="module")
def same_account(live: LiveServer, link: Link) -> str:
    """A key of the player link's account bound to no screen, as an account's own integration holds."""
    engine = make_engine(live.settings.environment("production"))
    with engine.begin() as conn:
        key = create_key(conn, account=links.ACCOUNT, prefix=LIVE_PREFIX, scopes="ad_request")[0]
        bump_version(conn)
    engine.dispose()
    return key


def _counted(live: LiveServer, key_id: int) -> int:
    engine = make_engine(live.settings.environment("production"))
    with engine.connect() as conn:
        total = conn.execute(
            sa.select(sa.func.coalesce(sa.func.sum(key_stats.c.requests), 0)).where(
                key_stats.c.key_id == key_id
            )
        ).scalar()
    engine.dispose()
    return int(total or 0)


def _ask(
    http: httpx.Client, live: LiveServer, key: str, path: str, fmt: str, **body: object
) -> httpx.Response:
    return http.post(
        f"{live.url}{path}",
        params={"format": fmt},
        headers={"Ssp-Key": key},
        json={"play_time": play_time(), **body},
    )


def _refused(answer: httpx.Response, field: str) -> None:
    assert answer.status_code == 403, answer.text
    assert answer.headers["content-type"].startswith("application/json")
    error = answer.json()["error"]
    assert (error["code"], error["field"]) == ("key_not_for_screen", field), error


def test_the_key_carries_its_screen_from_both_key_reads(live: LiveServer, link: Link) -> None:
    engine = make_engine(live.settings.environment("production"))
    with engine.connect() as conn:
        snapshot = active_keys(conn)[hash_key(link.key)]
        looked_up = keys_by_hash(conn, [hash_key(link.key)])[hash_key(link.key)]
        assert live.keys is not None
        unbound = active_keys(conn)[hash_key(live.keys.production)]
    engine.dispose()
    assert snapshot.screen == looked_up.screen == (PROD_VENUE, SCREEN)
    assert unbound.screen is None


@pytest.mark.parametrize("fmt", ["json", "xml"])
@pytest.mark.parametrize("path", PATHS)
def test_a_player_key_asking_for_another_venue_or_screen_is_refused_and_not_counted(
    live: LiveServer, http: httpx.Client, link: Link, path: str, fmt: str
) -> None:
    before = _counted(live, link.key_id)
    _refused(_ask(http, live, link.key, path, fmt, venue_id="venue-empty", screen_id=SCREEN), "venue_id")
    _refused(_ask(http, live, link.key, path, fmt, venue_id="nowhere", screen_id=SCREEN), "venue_id")
    _refused(_ask(http, live, link.key, path, fmt, venue_id=PROD_VENUE, screen_id=OTHER_SCREEN), "screen_id")
    _refused(_ask(http, live, link.key, path, fmt, venue_id=PROD_VENUE), "screen_id")
    own = _ask(http, live, link.key, path, fmt, venue_id=PROD_VENUE, screen_id=SCREEN)
    assert own.status_code == 200, own.text
    # An answered ad request is durable, its count with it (key_stats, in the same batch): the own screen's
    # is counted, and the four refused before it never reached the ledger.
    assert _counted(live, link.key_id) == before + 1


def test_a_key_bound_to_no_screen_still_asks_for_any(live: LiveServer, http: httpx.Client) -> None:
    assert live.keys is not None
    for screen in (SCREEN, OTHER_SCREEN, None):
        answer = _ask(
            http, live, live.keys.production, PATHS[0], "json", venue_id=PROD_VENUE, screen_id=screen
        )
        assert answer.status_code == 200, answer.text


def test_the_players_config_and_status_are_refused_for_another_venue_or_screen(
    live: LiveServer, http: httpx.Client, link: Link
) -> None:
    headers = {"Ssp-Key": link.key}
    config = f"{live.url}/api/v1/player/config"
    _refused(http.get(config, params={"venue_id": "venue-empty"}, headers=headers), "venue_id")
    assert http.get(config, params={"venue_id": PROD_VENUE}, headers=headers).status_code == 200
    status = f"{live.url}/api/v1/player/status"
    report = {"venue_id": PROD_VENUE, "screen_id": SCREEN, "version": "1.0.0"}
    _refused(http.post(status, json={**report, "venue_id": "venue-empty"}, headers=headers), "venue_id")
    _refused(http.post(status, json={**report, "screen_id": OTHER_SCREEN}, headers=headers), "screen_id")
    _refused(http.post(status, json={**report, "screen_id": None}, headers=headers), "screen_id")
    assert http.post(status, json=report, headers=headers).status_code == 200
    engine = make_engine(live.settings.environment("production"))
    with engine.connect() as conn:
        rows = conn.execute(sa.select(player_status.c.venue_id, player_status.c.screen_id)).all()
    engine.dispose()
    assert (PROD_VENUE, SCREEN) in rows
    assert (PROD_VENUE, OTHER_SCREEN) not in rows and not any(r[0] == "venue-empty" for r in rows)


def test_the_manifest_and_records_of_another_screen_are_not_the_player_keys(
    live: LiveServer, http: httpx.Client, link: Link, same_account: str
) -> None:
    headers = {"Ssp-Key": link.key}
    manifest = f"{live.url}/api/v1/ad/manifest"
    _refused(
        http.get(manifest, params={"venue_id": "venue-empty", "screen_id": SCREEN}, headers=headers),
        "venue_id",
    )
    _refused(
        http.get(manifest, params={"venue_id": PROD_VENUE, "screen_id": OTHER_SCREEN}, headers=headers),
        "screen_id",
    )
    own = http.get(manifest, params={"venue_id": PROD_VENUE, "screen_id": SCREEN}, headers=headers)
    assert own.status_code == 200, own.text
    # Another screen's ad request, asked for with a key of the same account: the player key cannot read it.
    uuids = {}
    for screen in (SCREEN, OTHER_SCREEN):
        asked = _ask(http, live, same_account, PATHS[0], "json", venue_id=PROD_VENUE, screen_id=screen)
        assert asked.status_code == 200, asked.text
        uuids[screen] = asked.json()["data"]["ad_request_uuid"]
    record = f"{live.url}/api/v1/ad/request/{{}}"
    assert http.get(record.format(uuids[SCREEN]), headers=headers).status_code == 200
    other = http.get(record.format(uuids[OTHER_SCREEN]), headers=headers)
    assert other.status_code == 404 and other.json()["error"]["code"] == "unknown_ad_request", other.text
    assert http.get(record.format(uuids[OTHER_SCREEN]), headers={"Ssp-Key": same_account}).status_code == 200


def _issued(http: httpx.Client, live: LiveServer, key: str, screen: str) -> str:
    """A filled ad request for PROD_VENUE's `screen`, playing now, asked for with `key`."""
    asked = _ask(
        http, live, key, PATHS[0], "json", venue_id=PROD_VENUE, screen_id=screen, play_time=int(time.time())
    )
    assert asked.status_code == 200, asked.text
    return str(asked.json()["data"]["ad_request_uuid"])


def _record(http: httpx.Client, live: LiveServer, key: str, uuid: str) -> dict[str, Any]:
    answer = http.get(f"{live.url}/api/v1/ad/request/{uuid}", headers={"Ssp-Key": key})
    assert answer.status_code == 200, answer.text
    data: dict[str, Any] = answer.json()["data"]
    return data


def _release(http: httpx.Client, live: LiveServer, key: str, uuid: str) -> httpx.Response:
    return http.post(f"{live.url}/api/v1/ad/request/{uuid}/release", headers={"Ssp-Key": key})


def _upload(http: httpx.Client, live: LiveServer, key: str, fires: list[dict[str, Any]]) -> httpx.Response:
    return http.post(f"{live.url}/api/v1/ad/pop/batch", json={"fires": fires}, headers={"Ssp-Key": key})


def _results(answer: httpx.Response) -> list[str]:
    assert answer.status_code == 200, answer.text
    return [item["result"] for item in answer.json()["data"]["results"]]


def test_a_player_key_releasing_another_screens_ad_request_is_refused_and_it_stays_releasable(
    live: LiveServer, http: httpx.Client, link: Link, same_account: str
) -> None:
    other = _issued(http, live, same_account, OTHER_SCREEN)
    _refused(_release(http, live, link.key, other), "ad_request_uuid")
    assert _record(http, live, same_account, other)["state"] == "issued"
    # Its rightful key, bound to no screen, still gives it back, once.
    released = _release(http, live, same_account, other)
    assert released.status_code == 200 and released.json()["data"]["result"] == "released", released.text
    assert _record(http, live, same_account, other)["state"] == "released"
    # A player key never learns more of another screen's ad request by releasing it again.
    _refused(_release(http, live, link.key, other), "ad_request_uuid")


def test_a_player_key_releases_its_own_screens_ad_requests_whoever_asked_for_them(
    live: LiveServer, http: httpx.Client, link: Link, same_account: str
) -> None:
    for asker in (link.key, same_account):
        own = _issued(http, live, asker, SCREEN)
        answer = _release(http, live, link.key, own)
        assert answer.status_code == 200 and answer.json()["data"]["result"] == "released", answer.text
        again = _release(http, live, link.key, own)
        assert again.json()["data"]["result"] == "already_released", again.text


def test_an_account_key_bound_to_no_screen_releases_any_screens_ad_request(
    live: LiveServer, http: httpx.Client, link: Link, same_account: str
) -> None:
    for screen in (SCREEN, OTHER_SCREEN):
        uuid = _issued(http, live, same_account, screen)
        answer = _release(http, live, same_account, uuid)
        assert answer.status_code == 200 and answer.json()["data"]["result"] == "released", answer.text


def test_another_accounts_ad_request_stays_unknown_to_a_player_key_on_release_and_in_a_batch(
    live: LiveServer, http: httpx.Client, link: Link
) -> None:
    assert live.keys is not None
    foreign = _issued(http, live, live.keys.production, SCREEN)
    answer = _release(http, live, link.key, foreign)
    assert answer.status_code == 404 and answer.json()["error"]["code"] == "unknown_ad_request", answer.text
    fires = [{"ad_request_uuid": foreign, "event": "impression", "played_at": int(time.time())}]
    assert _results(_upload(http, live, link.key, fires)) == ["unknown"]


def test_a_player_keys_batch_naming_another_screens_ad_request_is_refused_whole_and_nothing_moves(
    live: LiveServer, http: httpx.Client, link: Link, same_account: str
) -> None:
    now = int(time.time())
    own = _issued(http, live, link.key, SCREEN)
    other = _issued(http, live, same_account, OTHER_SCREEN)
    first = [{"ad_request_uuid": own, "event": "impression", "played_at": now}]
    assert _results(_upload(http, live, link.key, first)) == ["counted"]
    mixed = [
        *first,
        {"ad_request_uuid": own, "event": "start", "played_at": now},
        {"ad_request_uuid": other, "event": "impression", "played_at": now},
        {"ad_request_uuid": other, "event": "start", "played_at": now},
    ]
    refused = _upload(http, live, link.key, mixed)
    _refused(refused, "fires[2].ad_request_uuid")
    # Nothing of the refused batch is stored: the own fire counted before stays counted once, with no
    # duplicate added; the own start and the other screen's fires are not recorded.
    mine = _record(http, live, same_account, own)
    assert (mine["plays"], mine["duplicate_count"], mine["events"]["start"]) == (1, 0, None), mine
    theirs = _record(http, live, same_account, other)
    assert theirs["events"]["impression"] is None and theirs["plays"] == 0, theirs
    # The player's own fires, sent again without the other screen's, are handled as ever, each counted once.
    assert _results(_upload(http, live, link.key, mixed[:2])) == ["duplicate", "counted"]
    # The other screen's fires still count once, by the account's key bound to no screen.
    assert _results(_upload(http, live, same_account, mixed[2:])) == ["counted", "counted"]
    assert _results(_upload(http, live, same_account, mixed)) == ["duplicate"] * 4
    theirs = _record(http, live, same_account, other)
    assert theirs["plays"] == 1 and theirs["events"]["impression"] == now, theirs


def _curl(url: str, key: str, body: str | None = None) -> tuple[str, dict[str, Any]]:
    """curl's status line and JSON answer to a POST (with a JSON body if given)."""
    command = ["curl", "-sS", "-X", "POST", url, "-H", f"Ssp-Key: {key}", "-w", "\n%{http_code}"]
    if body is not None:
        command += ["-H", "Content-Type: application/json", "-d", body]
    run = subprocess.run(command, capture_output=True, text=True, timeout=30, check=True)
    answer, _, status = run.stdout.rpartition("\n")
    return status, json.loads(answer)


@pytest.mark.skipif(shutil.which("curl") is None, reason="curl is not installed")
def test_curl_with_a_player_key_releasing_or_reporting_another_screens_ad_request_gets_the_403(
    live: LiveServer, http: httpx.Client, link: Link, same_account: str
) -> None:
    other = _issued(http, live, same_account, OTHER_SCREEN)
    expected = {
        "code": "key_not_for_screen",
        "message": (
            f"this ad request is not for this player key's screen ({SCREEN!r} of venue {PROD_VENUE!r})"
        ),
    }
    status, answer = _curl(f"{live.url}/api/v1/ad/request/{other}/release", link.key)
    assert status == "403" and answer["error"] == {**expected, "field": "ad_request_uuid"}, answer
    fire = {"ad_request_uuid": other, "event": "impression", "played_at": int(time.time())}
    status, answer = _curl(f"{live.url}/api/v1/ad/pop/batch", link.key, json.dumps({"fires": [fire]}))
    assert status == "403" and answer["error"] == {**expected, "field": "fires[0].ad_request_uuid"}, answer
    record = _record(http, live, same_account, other)
    assert record["state"] == "issued" and record["events"]["impression"] is None, record


@pytest.mark.skipif(shutil.which("curl") is None, reason="curl is not installed")
def test_curl_with_a_player_key_for_another_screen_gets_the_403_naming_the_field(
    live: LiveServer, link: Link
) -> None:
    body = json.dumps({"venue_id": PROD_VENUE, "screen_id": OTHER_SCREEN, "play_time": play_time()})
    run = subprocess.run(
        [
            "curl",
            "-sS",
            "-X",
            "POST",
            f"{live.url}/ad/request?format=xml",
            "-H",
            f"Ssp-Key: {link.key}",
            "-H",
            "Content-Type: application/json",
            "-d",
            body,
            "-w",
            "\n%{http_code}",
        ],
        capture_output=True,
        text=True,
        timeout=30,
        check=True,
    )
    answer, _, status = run.stdout.rpartition("\n")
    assert status == "403", run.stdout
    assert json.loads(answer)["error"] == {
        "code": "key_not_for_screen",
        "message": f"this player key is for screen {SCREEN!r} of venue {PROD_VENUE!r} only",
        "field": "screen_id",
    }
