"""The console's charts and report table as Chromium draws them, from a server seeded with two campaigns'
delivery: whole-number count ticks, no label over another or cut by its chart, coinciding series all visible,
bars for categories and lines for time, a report that fits a 1280 px window, a readable venue search.

Screenshots go where test_console_browser's `shots` says (docs/console to refresh the documentation's).
"""

from __future__ import annotations

import base64
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from adslot.catalog import bump_version
from adslot.console.charts import PALETTE
from adslot.storage.database import make_engine
from tests.conftest import (
    PROD_VENUE,
    LiveServer,
    add_live_campaign,
    drop_schemas,
    free_port,
    make_keys,
    make_settings,
    play_time,
    seed_production,
)
from tests.console.conftest import create_users
from tests.console.test_console_browser import Browser, nav
from tests.playground.test_playground_browser import require_browser

pytestmark = pytest.mark.browser
REQUESTS = 16
SECOND_CAMPAIGN = "Zenith winter"
WHOLE = re.compile(r"^\d{1,3}(,\d{3})*$")

LABEL_BOXES = """(svg) => {
  const box = svg.getBoundingClientRect();
  const texts = [...svg.querySelectorAll("text")].map((t) => {
    const r = t.getBoundingClientRect();
    return {text: t.textContent, left: r.left, right: r.right, top: r.top, bottom: r.bottom};
  });
  return {svg: {left: box.left, right: box.right, top: box.top, bottom: box.bottom}, texts};
}"""

COLOUR_PIXELS = """async ([png, colours]) => {
  const image = new Image();
  image.src = "data:image/png;base64," + png;
  await image.decode();
  const canvas = document.createElement("canvas");
  canvas.width = image.width;
  canvas.height = image.height;
  const context = canvas.getContext("2d");
  context.drawImage(image, 0, 0);
  const data = context.getImageData(0, 0, image.width, image.height).data;
  const wanted = colours.map((c) => [1, 3, 5].map((i) => parseInt(c.slice(i, i + 2), 16)));
  const counts = wanted.map(() => 0);
  for (let p = 0; p < data.length; p += 4) {
    wanted.forEach(([r, g, b], n) => {
      if (Math.abs(data[p] - r) + Math.abs(data[p + 1] - g) + Math.abs(data[p + 2] - b) < 24) counts[n] += 1;
    });
  }
  return counts;
}"""

PLACEHOLDER_ROOM = """(input) => {
  const style = getComputedStyle(input);
  const context = document.createElement("canvas").getContext("2d");
  context.font = `${style.fontStyle} ${style.fontWeight} ${style.fontSize} ${style.fontFamily}`;
  const room = input.clientWidth - parseFloat(style.paddingLeft) - parseFloat(style.paddingRight);
  return [context.measureText(input.placeholder).width, room];
}"""


def seed_second_campaign(live_settings: Any) -> None:
    """A second campaign on the seeded venue, so a report by campaign has two bars to draw."""
    engine = make_engine(live_settings.environment("production"))
    try:
        with engine.begin() as conn:
            add_live_campaign(conn, "Zenith", SECOND_CAMPAIGN, play_time(0))
            bump_version(conn)
    finally:
        engine.dispose()


def play(live: LiveServer, count: int) -> None:
    """Ad requests through the public API, each filled and its impression fired: requests, fills and plays
    are the same counts, the case where one series of the dashboard lies on another."""
    assert live.keys is not None
    with httpx.Client(base_url=live.url, timeout=10) as http:
        for n in range(count):
            answer = http.post(
                "/api/v1/ad/request",
                headers={"Ssp-Key": live.keys.production},
                json={"venue_id": PROD_VENUE, "play_time": play_time(60 + 30 * n)},
            )
            assert answer.status_code == 200, answer.text
            uuid_text = answer.json()["data"]["ad_request_uuid"]
            fired = http.get("/api/v1/ad/callback/", params={"ad_request_uuid": uuid_text})
            assert fired.status_code in (200, 204)


@pytest.fixture(scope="module")
def live(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    require_browser()
    settings, schemas = make_settings(tmp_path_factory.mktemp("console-charts"), "sqlite", free_port())
    keys = make_keys(settings)
    extra = seed_production(settings)
    seed_second_campaign(settings)
    server = LiveServer(settings, seed=1234, keys=keys, extra=extra).start()
    create_users(server)
    play(server, REQUESTS)
    yield server
    server.stop()
    if schemas:
        drop_schemas(schemas)


@pytest.fixture()
def browser(live: LiveServer) -> Iterator[Browser]:
    from playwright.sync_api import expect, sync_playwright

    expect.set_options(timeout=30_000)
    with sync_playwright() as playwright:
        made = Browser(playwright, live)
        try:
            made.sign_in("viewer")
            yield made
            made.assert_clean()
        finally:
            made.close()


def assert_readable(svg: Any) -> None:
    """Count ticks are whole numbers; no text overlaps another; none reaches past the chart's box."""
    ticks = svg.locator("text.tick.value").all_text_contents()
    assert len(ticks) >= 2, ticks
    assert all(WHOLE.match(t) for t in ticks), ticks
    found = svg.evaluate(LABEL_BOXES)
    box, texts = found["svg"], found["texts"]
    for t in texts:
        assert t["left"] >= box["left"] - 0.5 and t["right"] <= box["right"] + 0.5, (t, box)
        assert t["top"] >= box["top"] - 0.5 and t["bottom"] <= box["bottom"] + 0.5, (t, box)
    for i, a in enumerate(texts):
        for b in texts[i + 1 :]:
            apart = (
                a["right"] <= b["left"] + 0.5
                or b["right"] <= a["left"] + 0.5
                or a["bottom"] <= b["top"] + 0.5
                or b["bottom"] <= a["top"] + 0.5
            )
            assert apart, (a, b)


def assert_fits(page: Any) -> None:
    widths = page.evaluate("[document.scrollingElement.scrollWidth, document.scrollingElement.clientWidth]")
    assert widths[0] <= widths[1], widths
    table = page.locator("div.table-fit").evaluate("(d) => [d.firstElementChild.scrollWidth, d.clientWidth]")
    assert table[0] <= table[1], table


def test_the_dashboards_three_coinciding_lines_all_show_with_whole_ticks(
    browser: Browser, shots: Path
) -> None:
    page = browser.page
    svg = page.locator("svg.chart")
    assert svg.count() == 1
    assert_readable(svg)
    page.locator("main").screenshot(path=str(shots / "dashboard.png"))
    plot = svg.locator("rect.plot").bounding_box()
    png = page.screenshot(clip=plot)
    counts = page.evaluate(COLOUR_PIXELS, [base64.b64encode(png).decode(), list(PALETTE[:3])])
    # requests, fills and plays are equal hour by hour: each still shows, none drawn over by the next
    assert min(counts) >= 200, dict(zip(("requests", "fills", "plays"), counts, strict=True))


def test_a_report_by_campaign_is_bars_in_a_table_that_fits_the_page(browser: Browser, shots: Path) -> None:
    from playwright.sync_api import expect

    page = browser.page
    nav(page, "Reports")
    page.check("input[name=by_campaign]")
    page.get_by_role("button", name="Show report").click()
    expect(page.get_by_role("cell", name=SECOND_CAMPAIGN, exact=True)).to_be_visible()
    svg = page.locator("svg.chart")
    assert svg.count() == 1
    assert svg.locator("rect.bar").count() == 4  # two campaigns, fills and plays each
    assert svg.locator("polyline").count() == 0
    assert_readable(svg)
    headers = page.locator("table.report th").all_inner_texts()
    assert headers[:4] == ["Campaign", "Ad requests", "Fills", "Fill rate (%)"], headers
    assert not [h for h in headers if "_" in h or h.isupper()], headers
    expect(page.get_by_text("The CSV download has every column")).to_be_visible()
    assert_fits(page)
    page.locator("main").screenshot(path=str(shots / "reports.png"))


def test_a_report_by_every_dimension_still_fits_a_1280_px_window(browser: Browser) -> None:
    page = browser.page
    nav(page, "Reports")
    for dimension in ("campaign", "creative", "venue", "screen", "day", "hour"):
        page.check(f"input[name=by_{dimension}]")
    page.get_by_role("button", name="Show report").click()
    page.locator("table.report tbody tr").first.wait_for()
    assert page.viewport_size == {"width": 1280, "height": 900}
    assert_fits(page)
    svg = page.locator("svg.chart")
    assert svg.locator("polyline, circle").count() >= 1  # grouped by hour: a line over time
    assert_readable(svg)


def test_a_report_by_day_is_a_line_over_time(browser: Browser, shots: Path) -> None:
    page = browser.page
    nav(page, "Reports")
    page.check("input[name=by_day]")
    page.check("input[name=by_campaign]")
    page.get_by_role("button", name="Show report").click()
    svg = page.locator("svg.chart")
    svg.wait_for()
    assert svg.locator("rect.bar").count() == 0
    assert svg.locator("polyline, circle").count() >= 1
    assert_readable(svg)
    assert_fits(page)
    svg.screenshot(path=str(shots / "reports-by-day.png"))


def test_the_forecast_shows_its_cut_last_day_as_partial(browser: Browser, shots: Path) -> None:
    from playwright.sync_api import expect

    page = browser.page
    nav(page, "Forecast")
    form = page.locator("form", has=page.get_by_role("button", name="Run forecast"))
    form.locator("select[name=campaign_id]").select_option(label=f"{SECOND_CAMPAIGN} (active)")
    form.locator("input[name=hours]").fill("80")
    form.get_by_role("button", name="Run forecast").click()
    result = page.get_by_role("region", name="Forecast result")
    expect(result).to_be_visible(timeout=60_000)  # the job's page reloads until done
    svg = result.locator("svg.chart")
    assert_readable(svg)
    labels = svg.locator("text.tick:not(.value)").all_text_contents()
    # 80 hours from a whole hour: the first or the last day (or both) is cut, and says so
    assert any(label.endswith(" h)") for label in labels), labels
    assert svg.locator("circle.partial").count() >= 2  # its two series' last points, hollow
    assert svg.locator("polyline.partial").count() >= 2
    expect(result.get_by_text("Days the forecast covers only in part are dotted")).to_be_visible()
    result.screenshot(path=str(shots / "forecast.png"))


def test_the_venue_search_shows_its_whole_placeholder(browser: Browser, shots: Path) -> None:
    page = browser.page
    nav(page, "Venues")
    needed, room = page.locator("input[name=q]").evaluate(PLACEHOLDER_ROOM)
    assert needed <= room, (needed, room)


def test_a_forecast_shows_its_progress_and_its_result_on_return(browser: Browser, shots: Path) -> None:
    """A week of one-minute slots: long enough to watch the bar move, which the page reloads to follow."""
    from playwright.sync_api import expect

    page = browser.page
    nav(page, "Forecast")
    form = page.locator("form", has=page.get_by_role("button", name="Run forecast"))
    form.locator("select[name=campaign_id]").select_option(label=f"{SECOND_CAMPAIGN} (active)")
    form.locator("input[name=hours]").fill("168")
    form.locator("input[name=slot_seconds]").fill("60")
    form.get_by_role("button", name="Run forecast").click()
    running = page.get_by_role("region", name="Forecast running")
    expect(running).to_be_visible()
    job_url = page.url
    assert "/forecast/jobs/" in job_url
    seen: set[float] = set()
    while page.get_by_role("region", name="Forecast running").count():
        value = page.locator("section.forecast-job progress").get_attribute("value")
        if value is not None:
            seen.add(float(value))
        if len(seen) >= 2 and max(seen) > 0:
            break
        page.wait_for_timeout(100)
        page.reload()  # as the page does itself every second, a little more often
    assert len(seen) >= 2 and 0 < max(seen) < 1, f"the bar moved: {sorted(seen)}"
    running.screenshot(path=str(shots / "forecast-running.png"))

    nav(page, "Health")  # leave it running, then come back
    page.goto(job_url)
    result = page.get_by_role("region", name="Forecast result")
    expect(result).to_be_visible(timeout=120_000)
    expect(result.locator(".metric", has_text="Slots targeted").locator("strong")).not_to_have_text("0")
    nav(page, "Forecast")
    expect(page.locator("details", has_text="Recent forecasts").get_by_text("done").first).to_be_attached()
