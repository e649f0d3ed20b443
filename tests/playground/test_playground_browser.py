"""The sandbox playground in a real browser: Swagger UI served from loopback only, the shared testing key
pre-filled, and an ad request sent from the page answered with a VAST wrapper.

Uses the Debian Chromium at /usr/bin/chromium (never a downloaded browser). Without it the test skips, unless
ADSLOT_TEST_REQUIRE_BROWSER=1, where a missing browser is a failure.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from tests.conftest import LiveServer, start_server

CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking"]
LOOPBACK = {"127.0.0.1", "localhost", "::1"}
SCREENSHOT = Path(os.environ.get("ADSLOT_PLAYGROUND_SCREENSHOT", "/tmp/playground.png"))
TIMEOUT_MS = 30_000

pytestmark = pytest.mark.browser


def require_browser() -> None:
    required = os.environ.get("ADSLOT_TEST_REQUIRE_BROWSER") == "1"
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        if required:
            pytest.fail("ADSLOT_TEST_REQUIRE_BROWSER=1 but the playwright package is not installed")
        pytest.skip("browser tests need the playwright package")
    if not CHROMIUM.is_file():
        if required:
            pytest.fail(f"ADSLOT_TEST_REQUIRE_BROWSER=1 but there is no Chromium at {CHROMIUM}")
        pytest.skip(
            f"browser tests need Chromium at {CHROMIUM} (set ADSLOT_TEST_REQUIRE_BROWSER=1 to fail instead)"
        )


@pytest.fixture(scope="module")
def sandbox_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    """The playground does not depend on the database backend: one SQLite server is enough."""
    require_browser()
    server, _ = start_server(tmp_path_factory.mktemp("playground"), "sqlite")
    yield server
    server.stop()


def test_playground_sends_an_ad_request_with_the_prefilled_key_and_shows_the_vast_answer(
    sandbox_server: LiveServer,
) -> None:
    from playwright.sync_api import expect, sync_playwright

    # expect() has its own 5 s default, apart from the page's: give it the same bound as every other wait.
    expect.set_options(timeout=TIMEOUT_MS)

    assert sandbox_server.keys
    sandbox_key = sandbox_server.keys.sandbox
    requested: list[str] = []
    venue_id = "venue-playground"
    when = int(time.time()) + 120

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS, headless=True)
        try:
            context = browser.new_context(viewport={"width": 1280, "height": 1400})
            context.on("request", lambda request: requested.append(request.url))
            page = context.new_page()
            page.set_default_timeout(TIMEOUT_MS)
            page.goto(f"{sandbox_server.sandbox_url}/playground")

            operation = page.locator("#operations-ad_request-createAdRequest")
            expect(operation).to_be_visible()
            expect(operation.locator(".opblock-summary-path")).to_have_text("/api/v1/ad/request")
            operation.locator(".opblock-summary-control").click()
            operation.get_by_role("button", name="Try it out").click()

            body = operation.locator("textarea.body-param__text")
            body.fill(json.dumps({"venue_id": venue_id, "play_time": when}))
            with page.expect_response(
                lambda response: (
                    response.request.method == "POST"
                    and urlsplit(response.url).path.endswith("/sandbox/api/v1/ad/request")
                )
            ) as answer:
                operation.get_by_role("button", name="Execute").click()
            response = answer.value

            # The key came from the page's pre-authorisation: nothing above typed it.
            assert response.request.headers.get("ssp-key") == sandbox_key
            assert response.status == 200
            data = response.json()["data"]
            uuid = data["ad_request_uuid"]

            live = operation.locator(".live-responses-table tr.response")
            expect(live.locator("td.response-col_status")).to_have_text("200")
            shown = live.locator("td.response-col_description .microlight").first
            expect(shown).to_contain_text("<VAST")
            expect(shown).to_contain_text(f'"ad_request_uuid": "{uuid}"')
            expect(shown).to_contain_text(f'"venue_id": "{venue_id}"')
            live.scroll_into_view_if_needed()
            page.screenshot(path=str(SCREENSHOT))
        finally:
            browser.close()

    assert requested, "the page made no requests"
    leaving = [
        url
        for url in requested
        if urlsplit(url).scheme not in ("data", "blob") and urlsplit(url).hostname not in LOOPBACK
    ]
    assert leaving == [], f"requests left loopback: {leaving}"
    assert f"{sandbox_server.sandbox_url}/openapi.json" in requested
