"""The reference player in Debian's Chromium against a real `adslot serve`, at accelerated time (2 s
creatives in 2 s slots): it plays on time and every play's impression and quartiles count once."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import BACKENDS
from tests.contract.support import QUARTILES
from tests.player.screens import WAIT_MS, Screen, ads, chromium, screen_setup, wait_for

pytestmark = [pytest.mark.browser, pytest.mark.slow("browser")]


@pytest.fixture(params=BACKENDS)
def screen(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Screen]:
    yield from screen_setup(tmp_path, str(request.param))


def test_the_player_plays_consecutive_slots_and_each_play_counts_once_at_its_time(screen: Screen) -> None:
    screen.server.start()
    with chromium() as browser:
        page = browser.new_page()
        page.set_default_timeout(WAIT_MS)
        errors: list[str] = []
        page.on("pageerror", lambda error: errors.append(str(error)))
        page.goto(screen.player_url(slot=2, lead=3))
        state = wait_for(page, lambda s: len(ads(s)) >= 4, timeout=40)
        assert not errors, errors
    played = ads(state)[:3]
    for play in played:
        record = screen.record(play["uuid"])
        assert record["plays"] == 1
        assert record["duplicate_count"] == 0, record
        events = record["events"]
        for event in ("impression", *QUARTILES):
            assert events[event] is not None, (event, record)
        # Counted when played: the impression within a second of the page's own clock at the start.
        assert abs(events["impression"] - play["at"] / 1000) <= 1, (events, play)
        assert events["complete"] - events["start"] in (1, 2, 3), events
