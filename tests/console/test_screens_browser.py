"""The Screens view and the Alerts page in Debian's Chromium: a silent screen listed first with its
"silent since", each screen's chart drawn, the counts and the dashboard's dark screens figure.

Screenshots go where test_console_browser's `shots` says (docs/console to refresh the documentation's).
"""

from __future__ import annotations

import re
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.conftest import PROD_VENUE, LiveServer, drop_schemas, eventually
from tests.console.conftest import start_console_server
from tests.console.test_console_browser import TIMEOUT_MS, Browser
from tests.playground.test_playground_browser import require_browser

pytestmark = pytest.mark.browser
SILENT = 2


@pytest.fixture(scope="module")
def live(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    require_browser()
    server, schemas = start_console_server(
        tmp_path_factory.mktemp("screens-browser"),
        "sqlite",
        ADSLOT_SCREEN_SILENT_SECONDS=str(SILENT),
        ADSLOT_SCREEN_CHECK_MS="200",
    )
    yield server
    server.stop()
    if schemas:
        drop_schemas(schemas)


@pytest.fixture()
def browser(live: LiveServer) -> Iterator[Browser]:
    from playwright.sync_api import expect, sync_playwright

    expect.set_options(timeout=TIMEOUT_MS)
    with sync_playwright() as playwright:
        made = Browser(playwright, live)
        try:
            yield made
            made.assert_clean()
        finally:
            made.close()


def ask(live: LiveServer, screen: str) -> None:
    assert live.keys is not None
    answer = httpx.post(
        f"{live.url}/api/v1/ad/request?format=json",
        json={"venue_id": PROD_VENUE, "screen_id": screen, "play_time": int(time.time()) + 30},
        headers={"Ssp-Key": live.keys.production},
    )
    assert answer.status_code in (200, 204), answer.text


def test_a_silent_screen_is_listed_first_with_its_silent_since_and_every_screen_has_its_chart(
    browser: Browser, live: LiveServer, shots: Path
) -> None:
    from playwright.sync_api import expect

    assert live.keys is not None
    admin = {"Ssp-Key": live.keys.production_admin_only}
    for screen in ("entrance", "escalator", "food-court"):
        made = httpx.post(
            f"{live.url}/api/v1/venues/{PROD_VENUE}/screens", json={"screen_id": screen}, headers=admin
        )
        assert made.status_code == 201, made.text
    ask(live, "escalator")

    def silent() -> bool:
        listed = httpx.get(f"{live.url}/api/v1/screens", params={"status": "silent"}, headers=admin).json()
        return [s["screen_id"] for s in listed["screens"]] == ["escalator"]

    assert eventually(silent, timeout=SILENT + 5)
    for _ in range(3):
        ask(live, "entrance")

    browser.sign_in("admin")
    page = browser.go("/console/production/screens")
    rows = page.locator("table.screens tbody tr")
    expect(rows.first).to_have_attribute("data-screen", f"{PROD_VENUE}/escalator")
    expect(rows.first).to_have_attribute("data-status", "silent")
    expect(rows.first.locator(".badge")).to_contain_text("silent since")
    expect(page.locator('tr[data-screen$="/entrance"]')).to_have_attribute("data-status", "online")
    expect(page.locator('tr[data-screen$="/food-court"]')).to_have_attribute("data-status", "never_seen")
    expect(page.locator('[data-figure="silent"]')).to_have_attribute("data-value", "1")
    expect(page.locator('[data-figure="never_seen"]')).to_have_attribute("data-value", "1")
    # Each row's last 24 hours is drawn: the entrance's line rises at its last hour (three requests).
    charts = page.locator("table.screens svg.sparkline polyline")
    assert charts.count() == rows.count() == 3
    points = page.locator('tr[data-screen$="/entrance"] svg.sparkline polyline').get_attribute("points")
    assert points is not None
    heights = [float(p.split(",")[1]) for p in points.split()]
    assert len(heights) == 24 and heights[-1] < heights[0], "the last hour stands above the baseline"
    box = charts.first.bounding_box()
    assert box is not None and box["width"] > 50
    page.screenshot(path=str(shots / "screens.png"), full_page=True)

    page.select_option("select[name=status]", "silent")
    page.click("form.filters button")
    page.wait_for_load_state()
    statuses = page.locator("table.screens tbody tr").evaluate_all("rows => rows.map(r => r.dataset.status)")
    assert statuses and set(statuses) == {"silent"}, statuses  # the entrance may have fallen silent since

    page = browser.go("/console/production/")
    dark = page.locator('[data-figure="dark_screens"]').get_attribute("data-value")
    assert dark == str(len(statuses)), (dark, statuses)

    page = browser.go("/console/production/alerts")
    page.fill("input[name=url]", "https://alerts.example.test/hook")
    page.click("text=Add webhook")
    expect(page.locator("#new-secret")).to_have_text(re.compile(r"^[0-9a-f]{64}$"))
    page.screenshot(path=str(shots / "alerts.png"), full_page=True)
