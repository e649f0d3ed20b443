"""The reference player in Debian's Chromium against a real `adslot serve`, at accelerated time (2 s
creatives in 2 s slots): it plays on time and every play's impression and quartiles count once, online,
offline across a reload, across a SIGKILL of the server, and through the bad days (no fill, media that 404s,
a rate limit, a revoked link)."""

from __future__ import annotations

import itertools
import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import sqlalchemy as sa

from adslot.auth.repository import revoke_key
from adslot.campaigns.repository import add_creative, create_advertiser, create_campaign, update_campaign
from adslot.campaigns.schemas import AdvertiserIn, CampaignIn, CampaignPatch, CreativeIn
from adslot.player.status import read_player_states
from tests.conftest import BACKENDS
from tests.contract.support import QUARTILES
from tests.player.screens import VENUE, WAIT_MS, Screen, ads, chromium, player_state, screen_setup, wait_for

pytestmark = [pytest.mark.browser, pytest.mark.slow("browser")]
EVENTS = ("impression", *QUARTILES)


@pytest.fixture(params=BACKENDS)
def screen(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Screen]:
    yield from screen_setup(tmp_path, str(request.param))


@pytest.fixture
def sqlite_screen(tmp_path: Path) -> Iterator[Screen]:
    yield from screen_setup(tmp_path, "sqlite")


@pytest.fixture
def limited_screen(tmp_path: Path) -> Iterator[Screen]:
    """A screen whose key may ask for one ad every 4 s (ADSLOT_RATE_LIMIT_AD_REQUESTS), no burst."""
    yield from screen_setup(
        tmp_path, "sqlite", ADSLOT_RATE_LIMIT_AD_REQUESTS="0.25", ADSLOT_RATE_LIMIT_BURST="1"
    )


def open_player(browser: Any, screen: Screen, **params: object) -> tuple[Any, Any, list[str]]:
    context = browser.new_context()
    page = context.new_page()
    page.set_default_timeout(WAIT_MS)
    errors: list[str] = []
    page.on("pageerror", lambda error: errors.append(str(error)))
    page.goto(screen.player_url(**params))
    return context, page, errors


def assert_counted_once_when_played(
    screen: Screen, play: dict[str, Any], *, resent: bool = False
) -> dict[str, Any]:
    """The play's record: one play, every event counted, no duplicate, the impression at the play's time.
    `resent`: the server was killed while the play's fires were in flight, so a fire it made durable but
    could not acknowledge was sent again: the server must answer it as a duplicate, and count it once."""
    record = screen.record(play["uuid"])
    assert record["plays"] == 1, record
    if not resent:
        assert record["duplicate_count"] == 0, record
    for event in EVENTS:
        assert record["events"][event] is not None, (event, record)
    assert abs(record["events"]["impression"] - play["at"] / 1000) <= 1, (record["events"], play)
    assert 1 <= record["events"]["complete"] - record["events"]["start"] <= 3, record["events"]
    return record


def test_the_player_plays_consecutive_slots_and_each_play_counts_once_at_its_time(screen: Screen) -> None:
    later = f"{screen.server.url}/media/demo.mp4?campaign=later"
    screen.change(lambda c: add_later_campaign(c, "/media/demo.mp4?campaign=later"))
    screen.server.start()
    with chromium() as browser:
        _, page, errors = open_player(browser, screen, slot=2, lead=3)
        state = wait_for(page, lambda s: len(ads(s)) >= 4, timeout=40)
        cached = page.evaluate(
            "caches.open('adslot-media-v1').then((c) => c.keys()).then((keys) => keys.map((r) => r.url))"
        )
        assert not errors, errors
    # Pre-cached from the manifest: a creative that plays only from the next hour is already held.
    assert later in cached, cached
    played = ads(state)[:3]
    starts = [play["at"] for play in played]
    assert all(1500 <= b - a <= 4000 for a, b in itertools.pairwise(starts)), starts
    for play in played:
        assert_counted_once_when_played(screen, play)


def add_later_campaign(conn: sa.Connection, media_url: str) -> None:
    """A campaign on the venue that starts in an hour: in the 24-hour manifest, not yet playable."""
    now = int(time.time())
    advertiser = create_advertiser(conn, AdvertiserIn(name="Later Inc"))
    campaign = create_campaign(
        conn,
        CampaignIn(
            advertiser_id=advertiser.id,
            name="later",
            start_at=now + 3600,
            end_at=now + 7200,
            venue_ids=[VENUE],
        ),
    )
    creative = CreativeIn(
        name="later", media_url=media_url, mime_type="video/mp4", width=640, height=360, duration_seconds=2
    )
    add_creative(conn, campaign.id, creative)


def test_offline_slots_and_a_reload_play_held_ads_and_the_fallback_then_upload_each_fire_once(
    screen: Screen,
) -> None:
    screen.server.start()
    with chromium() as browser:
        context, page, errors = open_player(browser, screen, slot=2, lead=7)
        wait_for(page, lambda s: len(ads(s)) >= 1 and s["held"] >= 3, timeout=40)
        assert page.evaluate("navigator.serviceWorker.ready.then(() => !!navigator.serviceWorker.controller)")
        went_offline = time.time()
        context.set_offline(True)
        # An ad played offline to its end (2 s), then a reload (one cut mid-play would count only its start).
        before = wait_for(
            page, lambda s: any(went_offline < p["at"] / 1000 < time.time() - 2.5 for p in ads(s)), timeout=20
        )
        offline_plays = [p for p in ads(before) if went_offline < p["at"] / 1000 < time.time() - 2.5]
        page.reload()  # served by the service worker: the network is down
        after = wait_for(
            page,
            lambda s: s["fallbacks"] >= 2 and any(p["kind"] == "fallback" for p in s["plays"]) and ads(s),
            timeout=30,
        )
        offline_plays += ads(after)
        assert after["firesQueued"] >= 6 * len(offline_plays)  # two layers: wrapper and inline
        assert not page.locator("#message").is_visible()
        back_online = time.time()
        context.set_offline(False)
        done = wait_for(page, lambda s: s["firesQueued"] == 0 and s["uploaded"] > 0, timeout=30)
        assert not errors, errors
    assert len(offline_plays) >= 2
    assert done["uploaded"] >= 6 * len(ads(after))
    hours: dict[int, int] = {}
    for play in offline_plays:
        record = assert_counted_once_when_played(screen, play)
        assert record["events"]["impression"] < back_online - 1, "counted at its play, not at its upload"
        hours[record["play_time"] // 3600 * 3600] = hours.get(record["play_time"] // 3600 * 3600, 0) + 1
    for hour, plays in hours.items():
        report = httpx.get(
            f"{screen.server.url}/api/v1/reports/delivery",
            params={"from": hour, "to": hour + 3600, "group_by": "hour", "timezone": "UTC"},
            headers={"Ssp-Key": screen.admin_key},
        )
        assert report.status_code == 200, report.text
        rows = report.json()["data"]["rows"]
        assert sum(row["plays"] for row in rows) >= plays, rows


def test_a_sigkilled_server_restarted_mid_run_loses_no_acknowledged_play(screen: Screen) -> None:
    screen.server.start()
    with chromium() as browser:
        _, page, errors = open_player(browser, screen, slot=2, lead=5)
        wait_for(page, lambda s: len(ads(s)) >= 2, timeout=40)
        screen.server.kill()
        killed = time.time()
        wait_for(page, lambda s: any(p["at"] / 1000 > killed + 1 for p in s["plays"]), timeout=20)
        screen.server.start()
        restarted = time.time()
        state = wait_for(
            page,
            lambda s: s["firesQueued"] == 0 and any(p["at"] / 1000 > restarted for p in ads(s)),
            timeout=40,
        )
        assert not errors, errors
    played = ads(state)
    assert any(killed < p["at"] / 1000 < restarted for p in state["plays"]), "it kept playing meanwhile"
    for play in played:
        if play["at"] / 1000 + 2 < time.time():  # finished
            # Its 2 s of fires, with a margin, were in flight when the server was killed.
            in_flight = play["at"] / 1000 - 1 <= killed <= play["at"] / 1000 + 4
            assert_counted_once_when_played(screen, play, resent=in_flight)


def test_no_fill_plays_the_fallback_and_media_that_404s_is_released_while_the_next_slot_plays(
    sqlite_screen: Screen,
) -> None:
    screen = sqlite_screen
    screen.add_creative("broken", "/media/missing.mp4", 2)
    screen.server.start()
    with chromium() as browser:
        _, page, errors = open_player(browser, screen, slot=2, lead=3)
        state = wait_for(
            page,
            lambda s: (
                any(p["kind"] == "failed" for p in s["plays"])
                and any(p["kind"] == "ad" and p["at"] > failed_at(s) for p in s["plays"])
            ),
            timeout=60,
        )
        failed = [p for p in state["plays"] if p["kind"] == "failed"]
        for play in failed:
            assert "404" in play["reason"], play
            assert eventually_released(screen, play["uuid"])
        assert state["errors"] >= len(failed)

        # No campaign running: every ad request is answered 204, and each slot plays the fallback.
        screen.change(
            lambda c: update_campaign(c, screen.campaign_id, CampaignPatch(status="paused"))  # type: ignore[arg-type]
        )
        paused = time.time()
        state = wait_for(
            page,
            lambda s: (
                s["lastAdRequest"]["status"] == 204
                and len([p for p in s["plays"] if p["kind"] == "fallback" and p["at"] / 1000 > paused + 3])
                >= 2
            ),
            timeout=30,
        )
        assert page.locator("#house").evaluate("e => e.classList.contains('on') || e.complete")
        assert not errors, errors


def failed_at(state: dict[str, Any]) -> float:
    failed = [p["at"] for p in state["plays"] if p["kind"] == "failed"]
    return min(failed) if failed else float("inf")


def eventually_released(screen: Screen, uuid: str) -> bool:
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        record = screen.record(uuid)
        if record["state"] == "released":
            return True
        time.sleep(0.1)
    raise AssertionError(f"not released: {json.dumps(record)}")


def eventually_reported(screen: Screen) -> dict[str, Any]:
    deadline = time.monotonic() + 10
    while True:
        states = screen.change(lambda c: read_player_states(c, VENUE))
        if states or time.monotonic() > deadline:
            assert states, "no status report arrived"
            return states[0]
        time.sleep(0.2)


def test_a_rate_limited_player_waits_for_retry_after_before_asking_again(limited_screen: Screen) -> None:
    screen = limited_screen
    screen.server.start()
    asked: list[tuple[float, int, str | None]] = []
    with chromium() as browser:
        context = browser.new_context()
        page = context.new_page()
        page.on(
            "response",
            lambda r: (
                asked.append((time.monotonic(), r.status, r.headers.get("retry-after")))
                if "/api/v1/ad/request" in r.url and r.request.method == "POST"
                else None
            ),
        )
        page.goto(screen.player_url(slot=1, lead=4))
        wait_for(page, lambda s: len([a for a in asked if a[1] == 429]) >= 2 and len(ads(s)) >= 1, timeout=40)
    limited = [i for i, (_, status, _) in enumerate(asked) if status == 429]
    for index in limited:
        if index + 1 < len(asked):
            at, _, retry_after = asked[index]
            assert retry_after is not None
            assert asked[index + 1][0] - at >= int(retry_after) - 0.2, (asked, index)


def test_a_revoked_player_link_stops_the_screen_with_a_message(screen: Screen) -> None:
    screen.server.start()
    with chromium() as browser:
        _, page, _ = open_player(browser, screen, slot=2, lead=3, debug=1, status=1)
        wait_for(page, lambda s: len(ads(s)) >= 1, timeout=40)
        # The player reports what it is doing: the console reads it from player_status.
        report = eventually_reported(screen)
        assert report["version"] == "1.0.0" and report["screen_id"] == "screen-1", report
        assert report["last_ad_request_at"] is not None and report["cache_bytes"] > 0, report
        overlay = page.locator("#overlay")
        assert "adslot player 1.0.0" in overlay.inner_text()
        page.keyboard.press("d")
        assert not overlay.is_visible()
        assert screen.change(lambda c: revoke_key(c, screen.key_id))
        state = wait_for(page, lambda s: s["stopped"] is not None, timeout=20)
        assert "revoked" in state["stopped"]
        assert "revoked" in page.locator("#message").inner_text()
        plays = len(player_state(page)["plays"])
        page.wait_for_timeout(3000)
        assert len(player_state(page)["plays"]) == plays, "a stopped screen plays nothing more"
