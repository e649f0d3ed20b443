"""GET {base}/api/v1/screens and each venue's opening hours, against a served adslot on both databases."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from adslot.auth.keys import LIVE_PREFIX
from adslot.auth.repository import revoke_key
from adslot.environment import transact
from adslot.ledger.screen_fold import FOLD_SECONDS
from adslot.player.links import create_link
from adslot.storage.database import make_engine
from tests.conftest import BACKENDS, PROD_VENUE, LiveServer, eventually, live_server
from tests.telemetry.test_metrics import scrape, value

SILENT = 2


@pytest.fixture(scope="module", params=BACKENDS)
def listed(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    """A served adslot whose screens fall silent after two seconds without an ad request."""
    yield from live_server(
        tmp_path_factory.mktemp("screens"),
        str(request.param),
        ADSLOT_SCREEN_SILENT_SECONDS=str(SILENT),
        ADSLOT_SCREEN_CHECK_MS="200",
    )


def admin(live: LiveServer) -> dict[str, str]:
    assert live.keys is not None
    return {"Ssp-Key": live.keys.production_admin_only}


def ask(http: httpx.Client, live: LiveServer, screen: str) -> dict[str, Any]:
    assert live.keys is not None
    answer = http.post(
        f"{live.url}/api/v1/ad/request?format=json",
        json={"venue_id": PROD_VENUE, "screen_id": screen, "play_time": int(time.time()) + 30},
        headers={"Ssp-Key": live.keys.production},
    )
    assert answer.status_code == 200, answer.text
    body: dict[str, Any] = answer.json()["data"]
    return body


def screens(http: httpx.Client, live: LiveServer, **filters: str) -> dict[str, Any]:
    answer = http.get(f"{live.url}/api/v1/screens", params=filters, headers=admin(live))
    assert answer.status_code == 200, answer.text
    body: dict[str, Any] = answer.json()
    return body


def by_id(listing: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {s["screen_id"]: s for s in listing["screens"] if s["venue_id"] == PROD_VENUE}


def test_a_screen_that_asks_is_online_then_silent_since_its_last_request_and_others_are_told_apart(
    http: httpx.Client, listed: LiveServer
) -> None:
    for screen in ("s1", "s2"):
        made = http.post(
            f"{listed.url}/api/v1/venues/{PROD_VENUE}/screens",
            json={"screen_id": screen},
            headers=admin(listed),
        )
        assert made.status_code in (200, 201), made.text
    asked = ask(http, listed, "s1")
    ask(http, listed, "s9")  # not registered
    fired = http.get(
        f"{listed.url}/api/v1/ad/callback/",
        params={"ad_request_uuid": asked["ad_request_uuid"], "layer": "wrapper"},
    )
    assert fired.status_code in (200, 204), fired.text

    # The ledger writer gathers the screens' news and writes it at most FOLD_SECONDS late.
    def told() -> bool:
        found = by_id(screens(http, listed))
        return "s9" in found and found["s1"]["plays_today"] == 1

    assert eventually(told, timeout=FOLD_SECONDS + 5)
    listing = screens(http, listed)
    found = by_id(listing)
    assert found["s1"]["status"] == "online" and found["s1"]["registered"] is True
    assert found["s9"]["status"] == "online" and found["s9"]["registered"] is False
    assert found["s2"]["status"] == "never_seen" and found["s2"]["last_request_at"] is None
    s1 = found["s1"]
    assert (s1["requests_today"], s1["fills_today"], s1["plays_today"], s1["fill_rate"]) == (1, 1, 1, 1.0)
    assert s1["last_play_at"] is not None and len(s1["hourly"]) == 24 and s1["hourly"][-1] == [1, 1, 1]
    assert listing["counts"]["online"] >= 2 and listing["counts"]["unregistered"] >= 1
    assert listing["silent_seconds"] == SILENT

    def gauged() -> bool:  # the fleet watch's counts, as Prometheus gauges by status
        samples = scrape(http, listed.url)
        return all(
            value(samples, "adslot_screens", environment="production", status=status) >= 1
            for status in ("online", "never_seen", "unregistered")
        )

    assert eventually(gauged, timeout=10)

    # The reference player's own report shows with its screen (the player's table, issue 70's).
    assert listed.keys is not None
    report = {"venue_id": PROD_VENUE, "screen_id": "s1", "version": "1.4.2", "fires_queued": 3}
    sent = http.post(
        f"{listed.url}/api/v1/player/status", json=report, headers={"Ssp-Key": listed.keys.production}
    )
    assert sent.status_code == 200, sent.text
    player = by_id(screens(http, listed))["s1"]["player"]
    assert player["version"] == "1.4.2" and player["fires_queued"] == 3

    def silent() -> bool:
        return by_id(screens(http, listed))["s1"]["status"] == "silent"

    assert eventually(silent, timeout=SILENT + 5)
    listing = screens(http, listed, status="silent")
    assert listing["screens"][0]["status"] == "silent"
    s1 = by_id(listing)["s1"]
    assert s1["silent_since"] == s1["last_request_at"]
    assert {s["screen_id"] for s in screens(http, listed, status="unregistered")["screens"]} >= {"s9"}
    assert screens(http, listed, venue_id="venue-empty")["screens"] == []


def test_opening_hours_are_set_checked_and_a_silent_screen_of_a_closed_venue_shows_closed(
    http: httpx.Client, listed: LiveServer
) -> None:
    url = f"{listed.url}/api/v1/venues/{PROD_VENUE}/hours"
    bad = http.post(url, json={"hours": {"mon": ["22:00-08:00"]}}, headers=admin(listed))
    assert bad.status_code == 400 and bad.json()["error"]["field"] == "hours.mon[0]"
    unknown_day = http.post(url, json={"hours": {"funday": []}}, headers=admin(listed))
    assert unknown_day.status_code == 400 and unknown_day.json()["error"]["field"] == "hours.funday"
    missing = http.post(
        f"{listed.url}/api/v1/venues/nowhere/hours", json={"hours": None}, headers=admin(listed)
    )
    assert missing.status_code == 404
    assert http.get(url, headers=admin(listed)).json() == {"venue_id": PROD_VENUE, "hours": None}

    ask(http, listed, "s3")
    assert eventually(lambda: "s3" in by_id(screens(http, listed)), timeout=FOLD_SECONDS + 5)
    closed_all_week: dict[str, list[str]] = {}
    stored = http.post(url, json={"hours": closed_all_week}, headers=admin(listed))
    assert stored.status_code == 200, stored.text
    assert stored.json()["hours"]["mon"] == []
    assert by_id(screens(http, listed))["s3"]["status"] == "online", "online whatever the hours"
    assert eventually(lambda: by_id(screens(http, listed))["s3"]["status"] == "closed", timeout=SILENT + 5)
    assert "s3" in by_id(screens(http, listed, status="closed"))

    always = {day: ["00:00-24:00"] for day in ("mon", "tue", "wed", "thu", "fri", "sat", "sun")}
    assert http.post(url, json={"hours": always}, headers=admin(listed)).json()["hours"] == always
    assert by_id(screens(http, listed))["s3"]["status"] == "silent"
    assert http.post(url, json={"hours": None}, headers=admin(listed)).json()["hours"] is None


def test_the_screens_list_needs_an_admin_key(http: httpx.Client, listed: LiveServer) -> None:
    assert listed.keys is not None
    refused = http.get(f"{listed.url}/api/v1/screens", headers={"Ssp-Key": listed.keys.production})
    assert refused.status_code == 403
    bad = http.get(f"{listed.url}/api/v1/screens", params={"status": "sleepy"}, headers=admin(listed))
    assert bad.status_code == 400


def test_a_screen_whose_player_link_is_revoked_shows_its_player_stopped(
    http: httpx.Client, listed: LiveServer
) -> None:
    made = http.post(
        f"{listed.url}/api/v1/venues/{PROD_VENUE}/screens",
        json={"screen_id": "linked"},
        headers=admin(listed),
    )
    assert made.status_code == 201, made.text
    engine = make_engine(listed.settings.environment("production"))
    try:
        link = transact(
            engine,
            lambda c: create_link(
                c, base_url=listed.url, prefix=LIVE_PREFIX, venue_id=PROD_VENUE, screen_id="linked"
            ),
            write=True,
        )
        assert by_id(screens(http, listed))["linked"]["player"]["link"] == "on"
        transact(engine, lambda c: revoke_key(c, link.key_id), write=True)
    finally:
        engine.dispose()
    assert by_id(screens(http, listed))["linked"]["player"]["link"] == "stopped"
