"""A screen runs for weeks: over many slots at accelerated time (1 s creatives in 1 s slots), the player's
JS heap and DOM stay flat, read through the Chrome DevTools Protocol after a forced garbage collection."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.player.screens import WAIT_MS, Screen, chromium, screen_setup, wait_for

pytestmark = [pytest.mark.browser, pytest.mark.slow("browser")]
WARM_UP = 6
RUN = 20


@pytest.fixture
def quick_screen(tmp_path: Path) -> Iterator[Screen]:
    yield from screen_setup(tmp_path, "sqlite", creative_seconds=1)


def measure(cdp: Any) -> dict[str, float]:
    cdp.send("HeapProfiler.collectGarbage")
    metrics = {m["name"]: m["value"] for m in cdp.send("Performance.getMetrics")["metrics"]}
    return {name: metrics[name] for name in ("JSHeapUsedSize", "Nodes", "JSEventListeners", "Documents")}


def test_the_heap_and_the_dom_stay_flat_over_many_slots(quick_screen: Screen) -> None:
    quick_screen.server.start()
    with chromium() as browser:
        page = browser.new_page()
        page.set_default_timeout(WAIT_MS)
        cdp = page.context.new_cdp_session(page)
        cdp.send("Performance.enable")
        page.goto(quick_screen.player_url(slot=1, lead=2, debug=1))
        start = wait_for(page, lambda s: s["adsPlayed"] >= WARM_UP, timeout=40)
        before = measure(cdp)
        end = wait_for(page, lambda s: s["adsPlayed"] >= start["adsPlayed"] + RUN, timeout=RUN * 3)
        after = measure(cdp)
    print(f"after {WARM_UP} slots: {before}; after {RUN} more: {after}")
    assert end["errors"] == 0, end["lastError"]
    assert after["Nodes"] <= before["Nodes"] + 5, (before, after)
    assert after["JSEventListeners"] <= before["JSEventListeners"] + 2, (before, after)
    assert after["Documents"] <= before["Documents"], (before, after)
    # Flat, not merely slow: less than 8 KB a slot, where keeping one creative's blob, a closure per fire or
    # an unbounded log would each show.
    assert after["JSHeapUsedSize"] - before["JSHeapUsedSize"] < RUN * 8192, (before, after)
