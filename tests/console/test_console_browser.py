"""The console in Debian's Chromium, driven by Playwright: each role through each page, from sign-in to a
key used and revoked, every request on loopback, no console error, a screenshot of every page.

Screenshots go to ADSLOT_CONSOLE_SCREENSHOTS (docs/console to refresh the documentation's), else to a
temporary folder; those of the dashboard, reports and forecast are test_charts_browser's.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httpx
import pytest

from tests.conftest import LiveServer, drop_schemas
from tests.console.conftest import PASSWORD, ROLE_EMAILS, start_console_server
from tests.playground.test_playground_browser import CHROMIUM, CHROMIUM_ARGS, LOOPBACK, require_browser

pytestmark = pytest.mark.browser
TIMEOUT_MS = 30_000
VENUE = "console-lobby"
CSV_WITH_A_BAD_LINE = (
    "venue_id,name,timezone,country,screen_id,width,height\n"
    "csv-one,CSV one,Europe/Berlin,DE,s1,1920,1080\n"
    "csv-two,CSV two,Not/AZone,DE,s1,1920,1080\n"
    "csv-three,CSV three,UTC,XX,s1,wide,1080\n"
)


@pytest.fixture(scope="module")
def live(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    """The pages do not depend on the database backend (test_console_http runs both): SQLite here."""
    require_browser()
    server, schemas = start_console_server(tmp_path_factory.mktemp("console-browser"), "sqlite")
    yield server
    server.stop()
    if schemas:
        drop_schemas(schemas)


class Browser:
    """One signed-out browser context that records every request and every console message."""

    def __init__(self, playwright: Any, live: LiveServer) -> None:
        self.browser = playwright.chromium.launch(
            executable_path=str(CHROMIUM), args=CHROMIUM_ARGS, headless=True
        )
        self.context = self.browser.new_context(viewport={"width": 1280, "height": 900})
        self.context.grant_permissions(["clipboard-read", "clipboard-write"], origin=live.url)
        self.requested: list[str] = []
        self.problems: list[str] = []
        self.context.on("request", lambda request: self.requested.append(request.url))
        self.page = self.context.new_page()
        self.page.set_default_timeout(TIMEOUT_MS)
        self.page.on("console", lambda m: self.problems.append(m.text) if m.type == "error" else None)
        self.page.on("pageerror", lambda e: self.problems.append(str(e)))
        self.live = live

    def go(self, path: str) -> Any:
        self.page.goto(f"{self.live.url}{path}")
        return self.page

    def sign_in(self, role: str) -> None:
        page = self.go("/console")
        assert "/console/sign-in" in page.url
        page.fill("input[name=email]", ROLE_EMAILS[role])
        page.fill("input[name=password]", PASSWORD)
        page.click("button[type=submit]")
        page.wait_for_url("**/console/production/")

    def close(self) -> None:
        self.browser.close()

    def assert_clean(self) -> None:
        hosts = {urlsplit(u).hostname for u in self.requested if not u.startswith(("data:", "blob:"))}
        assert hosts <= LOOPBACK, hosts
        assert not self.problems, self.problems


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


def nav(page: Any, label: str) -> None:
    page.get_by_role("navigation", name="Pages").get_by_role("link", name=label, exact=True).click()
    page.wait_for_load_state()


def test_an_admin_runs_the_business_from_the_console(browser: Browser, live: LiveServer, shots: Path) -> None:
    from playwright.sync_api import expect

    page = browser.go("/console")
    page.screenshot(path=str(shots / "sign-in.png"))
    browser.sign_in("admin")
    expect(page.get_by_role("heading", name="Dashboard")).to_be_visible()

    # Add a venue with a screen.
    nav(page, "Venues")
    page.get_by_role("link", name="Add a venue").click()
    page.fill("input[name=venue_id]", VENUE)
    page.fill("input[name=name]", "Console lobby")
    page.fill("input[name=timezone]", "Europe/Berlin")
    page.fill("input[name=country]", "DE")
    page.fill("input[name=tags]", "lobby, indoor")
    page.get_by_role("button", name="Add venue").click()
    expect(page.get_by_role("heading", name=f"Venue {VENUE}")).to_be_visible()
    page.fill("form[action$='/screens'] input[name=screen_id]", "s1")
    page.fill("form[action$='/screens'] input[name=width]", "1920")
    page.fill("form[action$='/screens'] input[name=height]", "1080")
    page.fill("form[action$='/screens'] input[name=mime_types]", "video/mp4")
    page.get_by_role("button", name="Add screen").click()
    expect(page.get_by_role("link", name="s1", exact=True)).to_be_visible()
    page.screenshot(path=str(shots / "venue.png"), full_page=True)
    page.get_by_role("link", name="s1", exact=True).click()
    page.fill("input[name=max_duration_seconds]", "abc")
    page.get_by_role("button", name="Save screen").click()
    expect(
        page.locator("label.invalid", has=page.locator("input[name=max_duration_seconds]"))
    ).to_be_visible()
    page.fill("input[name=max_duration_seconds]", "30")
    page.get_by_role("button", name="Save screen").click()
    expect(page.get_by_role("row", name="s1")).to_contain_text("30 s")

    # A CSV with bad lines: each problem shown by line, nothing stored.
    nav(page, "Venues")
    page.get_by_role("link", name="Import CSV").click()
    page.set_input_files(
        "input[name=file]",
        files=[{"name": "venues.csv", "mimeType": "text/csv", "buffer": CSV_WITH_A_BAD_LINE.encode()}],
    )
    page.get_by_role("button", name="Import").click()
    problems = page.locator("table.problems tbody tr")
    expect(problems.first).to_be_visible()
    lines = problems.locator("td:first-child").all_inner_texts()
    assert "3" in lines and "4" in lines and "2" not in lines
    expect(page.get_by_text("Nothing was stored. Fix these lines")).to_be_visible()
    page.screenshot(path=str(shots / "venue-import.png"), full_page=True)
    nav(page, "Venues")
    expect(page.get_by_role("link", name="csv-one")).to_have_count(0)
    page.fill("input[name=q]", "console")
    page.get_by_role("button", name="Search").click()
    expect(page.get_by_role("link", name=VENUE)).to_be_visible()
    page.screenshot(path=str(shots / "venues.png"), full_page=True)

    # An advertiser, then a campaign with dayparts and a cap; a bad cap first, shown next to its row.
    nav(page, "Campaigns")
    page.fill("form[action$='/advertisers'] input[name=name]", "Console Co")
    page.get_by_role("button", name="Add advertiser").click()
    page.select_option("select[name=advertiser_id]", label="Console Co")
    page.fill("input[name=name]", "Console launch")
    page.select_option("select[name=tier]", "sponsorship")
    page.fill("textarea[name=venue_ids]", VENUE)
    for day in ("mon", "tue", "wed", "thu", "fri", "sat", "sun"):
        page.check(f"input[name='dayparts[0].days.{day}']")
    page.fill("input[name='dayparts[0].start_hour']", "0")
    page.fill("input[name='dayparts[0].end_hour']", "24")
    page.select_option("select[name='caps[0].metric']", "plays")
    page.fill("input[name='caps[0].limit']", "0")
    page.get_by_role("button", name="Create campaign").click()
    expect(page.locator(".field-error").first).to_contain_text(">= 1")
    page.fill("input[name='caps[0].limit']", "500")
    page.get_by_role("button", name="Create campaign").click()
    expect(page.get_by_role("heading", name="Console launch")).to_be_visible()
    campaign_url = page.url
    page.get_by_role("button", name="Pause").click()
    expect(page.locator("h1 .badge")).to_have_text("paused")
    page.get_by_role("button", name="Resume").click()
    expect(page.locator("h1 .badge")).to_have_text("active")
    page.get_by_role("link", name="Edit rules").click()
    assert page.is_checked("input[name='dayparts[0].days.sun']")
    assert page.input_value("input[name='caps[0].limit']") == "500"
    page.fill("input[name='frequency.per_hour']", "12")
    page.get_by_role("button", name="Save campaign").click()
    expect(page.get_by_role("row", name="Frequency, separation")).to_contain_text("12/h")

    # A creative, with its preview.
    page.fill("form[action$='/creatives'] input[name=name]", "Launch 10s")
    page.fill("form[action$='/creatives'] input[name=media_url]", "/media/demo.mp4")
    page.fill("form[action$='/creatives'] input[name=width]", "1920")
    page.fill("form[action$='/creatives'] input[name=height]", "1080")
    page.fill("form[action$='/creatives'] input[name=duration_seconds]", "10")
    page.get_by_role("button", name="Add creative").click()
    expect(page.locator("video.preview")).to_have_attribute("src", "/media/demo.mp4")

    # An ad request and its impression, through the public API with a key made here, used at once.
    nav(page, "Keys")
    page.fill("input[name=account]", "lobby-players")
    page.fill("input[name=label]", "console test")
    page.get_by_role("button", name="Create key").click()
    key = page.locator("#new-key").inner_text().strip()
    assert key.startswith("ssp_live_")
    page.get_by_role("button", name="Copy").click()
    expect(page.get_by_role("button", name="Copied")).to_be_visible()
    assert page.evaluate("navigator.clipboard.readText()") == key
    page.screenshot(path=str(shots / "keys.png"), full_page=True)
    with httpx.Client(base_url=live.url, timeout=10) as http:
        answer = http.post(
            "/api/v1/ad/request",
            headers={"Ssp-Key": key},
            json={"venue_id": VENUE, "screen_id": "s1", "play_time": int(time.time()) + 60},
        )
        assert answer.status_code == 200, answer.text
        uuid_text = answer.json()["data"]["ad_request_uuid"]
        assert http.get("/api/v1/ad/callback/", params={"ad_request_uuid": uuid_text}).status_code in (
            200,
            204,
        )

    page.goto(campaign_url)
    expect(page.locator(".metric", has_text="Plays").locator("strong")).to_have_text("1")
    page.screenshot(path=str(shots / "campaign.png"), full_page=True)
    nav(page, "Dashboard")
    today = page.locator(".metrics[data-range=today]")
    expect(today.locator(".metric", has_text="Plays").locator("strong")).to_have_text("1")
    expect(today.locator(".metric", has_text="Fills").locator("strong")).to_have_text("1")

    nav(page, "Reports")
    page.check("input[name=by_campaign]")
    page.get_by_role("button", name="Show report").click()
    row = page.locator(
        "table.report tbody tr", has=page.get_by_role("cell", name="Console launch", exact=True)
    )
    expect(row).to_be_visible()
    assert page.locator("svg.chart").count() == 1
    with page.expect_download() as download:
        page.get_by_role("link", name="Download CSV").click()
    csv_text = Path(download.value.path()).read_text()
    assert csv_text.startswith("campaign_id,") and "\n" in csv_text

    nav(page, "Play log")
    page.fill("input[name=venue_id]", VENUE)
    page.get_by_role("button", name="Show plays").click()
    expect(page.get_by_text(uuid_text)).to_be_visible()
    page.screenshot(path=str(shots / "play-log.png"), full_page=True)

    # Revoke the key: refused within a second.
    nav(page, "Keys")
    page.get_by_role("button", name=f"Revoke key {key[:13]}").click()
    revoked_at = time.monotonic()
    with httpx.Client(base_url=live.url, timeout=10) as http:
        while True:
            answer = http.post(
                "/api/v1/ad/request",
                headers={"Ssp-Key": key},
                json={"venue_id": VENUE, "play_time": int(time.time()) + 60},
            )
            if answer.status_code == 401:
                break
            assert time.monotonic() - revoked_at < 1.0, "the revoked key was still served after a second"
            time.sleep(0.05)
    assert answer.json()["error"]["code"] == "invalid_api_key"

    nav(page, "Health")
    integration = page.locator("section.integration", has_text="console test")
    expect(integration).to_be_visible()
    expect(integration.locator("tr", has_text="Ads played")).to_contain_text("1 / 1")
    page.screenshot(path=str(shots / "health.png"), full_page=True)

    # A forecast of the campaign just made, against the real inventory: a day of 5-minute slots on s1.
    nav(page, "Forecast")
    form = page.locator("form", has=page.get_by_role("button", name="Run forecast"))
    form.locator("select[name=campaign_id]").select_option(label="Console launch (active)")
    form.locator("input[name=hours]").fill("24")
    form.get_by_role("button", name="Run forecast").click()
    result = page.get_by_role("region", name="Forecast result")
    expect(result).to_be_visible(timeout=60_000)  # the job's page reloads until done
    expect(result.locator(".metric", has_text="Slots targeted").locator("strong")).to_have_text("288")

    nav(page, "Users")
    expect(page.get_by_role("cell", name=ROLE_EMAILS["viewer"], exact=True)).to_be_visible()
    page.screenshot(path=str(shots / "users.png"), full_page=True)

    nav(page, "Audit")
    for action in (
        "venue.create",
        "screen.create",
        "campaign.create",
        "creative.create",
        "key.create",
        "key.revoke",
    ):
        expect(page.get_by_text(action, exact=True).first).to_be_visible()
    page.screenshot(path=str(shots / "audit.png"), full_page=True)

    # The switch: the same page of the sandbox, marked as such.
    page.get_by_role("navigation", name="Environment").get_by_role("link", name="Sandbox").click()
    expect(page.locator(".sandbox-banner")).to_be_visible()
    assert "/console/sandbox/audit" in page.url
    nav(page, "Campaigns")
    page.screenshot(path=str(shots / "sandbox-campaigns.png"), full_page=True)


def test_a_viewer_reads_every_page_but_finds_nothing_to_change(browser: Browser) -> None:
    from playwright.sync_api import expect

    browser.sign_in("viewer")
    page = browser.page
    for label in ("Venues", "Campaigns", "Keys", "Users"):
        nav(page, label)
        expect(page.get_by_role("heading", level=1)).to_be_visible()
        for action in ("Add a venue", "New campaign", "Create key", "Add user", "Revoke", "Disable"):
            expect(page.get_by_role("button", name=action)).to_have_count(0)
            expect(page.get_by_role("link", name=action)).to_have_count(0)
    # Even a hand-made form with a valid token is refused.
    token = page.locator("input[name=csrf_token]").first.get_attribute("value")
    answer = page.request.post(
        f"{browser.live.url}/console/production/venues/new",
        form={"csrf_token": token or "", "venue_id": "viewer-venue", "name": "No"},
    )
    assert answer.status == 403


def test_a_trafficker_adds_venues_but_cannot_make_keys(browser: Browser) -> None:
    from playwright.sync_api import expect

    browser.sign_in("trafficker")
    page = browser.page
    nav(page, "Venues")
    expect(page.get_by_role("link", name="Add a venue")).to_be_visible()
    nav(page, "Keys")
    expect(page.get_by_role("button", name="Create key")).to_have_count(0)


def test_a_form_post_without_its_csrf_token_is_refused(browser: Browser) -> None:
    browser.sign_in("admin")
    page = browser.page
    answer = page.request.post(
        f"{browser.live.url}/console/production/venues/new", form={"venue_id": "forged", "name": "Forged"}
    )
    assert answer.status == 403
    assert "security token" in answer.text()
