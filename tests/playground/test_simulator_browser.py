"""The sandbox playground's screen simulator in Chromium: the reference player plays the demo creative in a
small frame, and each event appears on the page once the server has counted it."""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.conftest import LiveServer, start_server
from tests.player.screens import BROWSER_ARGS
from tests.playground.test_playground_browser import CHROMIUM, TIMEOUT_MS, require_browser

pytestmark = pytest.mark.browser
SCREENSHOT = Path(os.environ.get("ADSLOT_SIMULATOR_SCREENSHOT", "/tmp/simulator.png"))


@pytest.fixture(scope="module")
def sandbox_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    require_browser()
    server, _ = start_server(tmp_path_factory.mktemp("simulator"), "sqlite")
    yield server
    server.stop()


def test_the_simulator_shows_each_event_of_the_demo_slot_as_the_server_counts_it(
    sandbox_server: LiveServer,
) -> None:
    from playwright.sync_api import expect, sync_playwright

    expect.set_options(timeout=TIMEOUT_MS)
    assert sandbox_server.keys is not None
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=str(CHROMIUM), args=BROWSER_ARGS)
        try:
            page = browser.new_page(viewport={"width": 1280, "height": 900})
            page.set_default_timeout(TIMEOUT_MS)
            page.goto(f"{sandbox_server.sandbox_url}/playground")
            first = page.locator("#simulator-events li[data-event=impression]").first
            expect(first).to_be_visible()
            uuid = first.get_attribute("data-uuid")
            assert uuid is not None
            mine = page.locator(f'#simulator-events li[data-uuid="{uuid}"]')
            expect(mine).to_have_count(6, timeout=20_000)  # impression and the five quartiles, each once
            shown = {item.get_attribute("data-event"): item.inner_text() for item in mine.all()}
            page.locator("#simulator").screenshot(path=str(SCREENSHOT))
        finally:
            browser.close()
    # Each line is what the server holds: the ad request's record has every event it shows, at that time.
    record = httpx.get(
        f"{sandbox_server.sandbox_url}/api/v1/ad/request/{uuid}",
        headers={"Ssp-Key": sandbox_server.keys.sandbox},
    ).json()["data"]
    assert set(shown) == set(record["events"])
    for event, line in shown.items():
        at = record["events"][event]
        assert line.startswith(time.strftime("%H:%M:%S", time.gmtime(at)) + f" {event} counted"), (line, at)
