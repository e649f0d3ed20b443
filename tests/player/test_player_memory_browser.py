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


SAMPLES = 5
"""Samples a measure takes, 150 ms apart over most of a 1 s slot: a slot's change of creative holds a
second document and its nodes for a moment, which a single sample can land on (seen: 1 → 3 documents);
what a leak keeps is in every sample, so the least of each figure is what the player retains."""


def measure(page: Any, cdp: Any) -> dict[str, float]:
    taken: list[dict[str, float]] = []
    for _ in range(SAMPLES):
        cdp.send("HeapProfiler.collectGarbage")
        metrics = {m["name"]: m["value"] for m in cdp.send("Performance.getMetrics")["metrics"]}
        taken.append(
            {name: metrics[name] for name in ("JSHeapUsedSize", "Nodes", "JSEventListeners", "Documents")}
        )
        page.wait_for_timeout(150)
    return {name: min(sample[name] for sample in taken) for name in taken[0]}


def test_the_heap_and_the_dom_stay_flat_over_many_slots(quick_screen: Screen) -> None:
    quick_screen.server.start()
    with chromium() as browser:
        page = browser.new_page()
        page.set_default_timeout(WAIT_MS)
        cdp = page.context.new_cdp_session(page)
        cdp.send("Performance.enable")
        page.goto(quick_screen.player_url(slot=1, lead=2, debug=1))
        start = wait_for(page, lambda s: s["adsPlayed"] >= WARM_UP, timeout=40)
        before = measure(page, cdp)
        end = wait_for(page, lambda s: s["adsPlayed"] >= start["adsPlayed"] + RUN, timeout=RUN * 3)
        after = measure(page, cdp)
    print(f"after {WARM_UP} slots: {before}; after {RUN} more: {after}")
    assert end["errors"] == 0, end["lastError"]
    assert after["Nodes"] <= before["Nodes"] + 5, (before, after)
    assert after["JSEventListeners"] <= before["JSEventListeners"] + 2, (before, after)
    assert after["Documents"] <= before["Documents"], (before, after)
    # Flat, not merely slow: less than 8 KB a slot, where keeping one creative's blob, a closure per fire or
    # an unbounded log would each show.
    assert after["JSHeapUsedSize"] - before["JSHeapUsedSize"] < RUN * 8192, (before, after)
