"""Advertiser users and share links in Debian's Chromium: advertiser A's user tries every console page, CSV
and API path with B's campaign (404 or absent), reads their own proof-of-play report with the API's
figures, prints it to PDF (its text read back), and a share link opens signed out, then fails once revoked
and once expired.

Screenshots go where test_console_browser's `shots` says (docs/console to refresh the documentation's).
"""

from __future__ import annotations

import io
import re
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from adslot.console import share_links
from adslot.environment import transact
from adslot.storage.database import make_engine
from tests.conftest import LiveServer, drop_schemas
from tests.console.conftest import PASSWORD
from tests.console.test_advertisers_http import (
    A_PLAYS,
    ADVERTISER_EMAIL,
    B_CAMPAIGN,
    B_VENUE,
    SESSION_ROUTES,
    concrete,
    console_routes,
    start_advertisers_server,
)
from tests.console.test_console_browser import TIMEOUT_MS, Browser
from tests.playground.test_playground_browser import require_browser

pytestmark = pytest.mark.browser


@pytest.fixture(scope="module")
def live(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[LiveServer, dict[str, Any]]]:
    require_browser()
    server, schemas, ids = start_advertisers_server(tmp_path_factory.mktemp("advertisers-browser"), "sqlite")
    yield server, ids
    server.stop()
    if schemas:
        drop_schemas(schemas)


@pytest.fixture()
def browser(live: tuple[LiveServer, dict[str, Any]]) -> Iterator[Browser]:
    from playwright.sync_api import expect, sync_playwright

    expect.set_options(timeout=TIMEOUT_MS)
    with sync_playwright() as playwright:
        made = Browser(playwright, live[0])
        try:
            yield made
            made.assert_clean()
        finally:
            made.close()


def sign_in_as_advertiser(browser: Browser) -> Any:
    page = browser.go("/console")
    page.fill("input[name=email]", ADVERTISER_EMAIL)
    page.fill("input[name=password]", PASSWORD)
    page.click("button[type=submit]")
    page.wait_for_url("**/console/production/campaigns")
    return page


def api_totals(live: LiveServer, campaign_id: int, start: str, end: str) -> dict[str, Any]:
    assert live.keys is not None
    answer = httpx.get(
        f"{live.url}/api/v1/reports/delivery",
        params={"from": start, "to": end, "campaign_id": str(campaign_id)},
        headers={"Ssp-Key": live.keys.production_admin},
    )
    totals: dict[str, Any] = answer.json()["data"]["totals"]
    return totals


def pdf_text(pdf: bytes) -> str:
    from pypdf import PdfReader

    return "\n".join(page.extract_text() or "" for page in PdfReader(io.BytesIO(pdf)).pages)


def test_an_advertiser_in_chromium_finds_nothing_of_b_and_prints_their_proof_with_the_apis_totals(
    browser: Browser, live: tuple[LiveServer, dict[str, Any]], shots: Path
) -> None:
    from playwright.sync_api import expect

    server, ids = live
    page = sign_in_as_advertiser(browser)
    nav = page.get_by_role("navigation", name="Pages").get_by_role("link")
    assert nav.all_inner_texts() == ["Campaigns"]
    assert page.get_by_role("navigation", name="Environment").get_by_role("link").all_inner_texts() == [
        "Production"
    ]
    expect(page.get_by_role("link", name="Acme spring")).to_be_visible()
    assert B_CAMPAIGN not in page.content() and "Zenith" not in page.content()
    page.screenshot(path=str(shots / "advertiser-campaigns.png"), full_page=True)

    # Every console page, with B's campaign, creative, venue and screen, in both environments.
    walked = 0
    for method, template, _ in console_routes(server):
        if (
            method != "GET"
            or template in SESSION_ROUTES
            or template.endswith(("/static/{name:str}", "/campaigns"))
        ):
            continue
        if template == "/console":
            continue
        for env in ("production", "sandbox"):
            url = f"{server.url}{concrete(template, ids, env)}"
            if url.endswith(".csv"):
                answer = browser.context.request.get(url)
                status, body = answer.status, answer.text()
            else:
                response = page.goto(url)
                assert response is not None
                status, body = response.status, page.content()
            assert status == 404, (url, status)
            assert B_CAMPAIGN not in body and B_VENUE not in body
            walked += 1
    assert walked >= 40
    for path in (
        f"/api/v1/reports/delivery?from=0&to=86400&campaign_id={ids['b_campaign_id']}",
        f"/api/v1/reports/playlog?from=0&to=86400&venue_id={B_VENUE}",
        f"/api/v1/campaigns/{ids['b_campaign_id']}",
    ):
        assert browser.context.request.get(f"{server.url}{path}").status == 401, path
    browser.problems[:] = [p for p in browser.problems if "404" not in p and "401" not in p]

    # Their own report: the API's figures on the page, and in the PDF Chromium prints of it.
    page.goto(f"{server.url}/console/production/campaigns")
    page.get_by_role("link", name="Acme spring").click()
    page.get_by_role("link", name="Proof-of-play report").click()
    expect(page.get_by_role("heading", name="Proof of play: Acme spring")).to_be_visible()
    article = page.locator("article.proof")
    start, end = article.get_attribute("data-from"), article.get_attribute("data-to")
    assert start and end
    totals = api_totals(server, ids["a_campaign"], start, end)
    shown = {
        name: float(page.locator(f"[data-figure={name}]").get_attribute("data-value") or "nan")
        for name in ("plays", "impressions", "completes")
    }
    assert shown == {k: float(totals[k]) for k in shown} and totals["plays"] == A_PLAYS
    page.screenshot(path=str(shots / "proof-of-play.png"), full_page=True)
    pdf = page.pdf(format="A4", print_background=True)
    text = pdf_text(pdf)
    assert "Proof of play: Acme spring" in text
    assert re.search(rf"Plays\s+{totals['plays']:,}\b", text), text[:600]
    assert re.search(rf"Impressions\s+{totals['impressions']:,.3f}\b", text), text[:600]
    assert re.search(rf"Completes\s+{totals['completes']:,}\b", text), text[:600]
    assert "Methodology" in text and "Sign out" not in text and "Print or save as PDF" not in text


def test_a_share_link_opens_signed_out_in_chromium_and_fails_once_revoked_or_expired(
    browser: Browser, live: tuple[LiveServer, dict[str, Any]], shots: Path
) -> None:
    from playwright.sync_api import expect

    server, ids = live
    browser.sign_in("trafficker")
    page = browser.go(f"/console/production/campaigns/{ids['a_campaign']}")
    page.fill("input[name=label]", "Acme agency, December")
    page.get_by_role("button", name="Make a share link").click()
    url = (page.locator("#new-link").text_content() or "").strip()
    assert "/console/shared/production/adslot_share_" in url
    page.screenshot(path=str(shots / "share-links.png"), full_page=True)

    outsider = browser.browser.new_context()
    try:
        shared = outsider.new_page()
        opened = shared.goto(url)
        assert opened is not None and opened.status == 200
        expect(shared.get_by_role("heading", name="Proof of play: Acme spring")).to_be_visible()
        assert shared.locator("[data-figure=plays]").get_attribute("data-value") == str(A_PLAYS)
        assert shared.get_by_role("button", name="Sign out").count() == 0
        page.goto(f"{server.url}/console/production/campaigns/{ids['a_campaign']}")
        expect(page.locator("[data-share-links] [data-opens]").first).to_have_text("1")

        page.get_by_role("button", name=re.compile(r"^Revoke link")).first.click()
        page.wait_for_load_state()
        expect(page.locator("[data-share-links] .badge.disabled").first).to_have_text("revoked")
        refused = shared.goto(url)
        assert refused is not None and refused.status == 404
        assert "Acme spring" not in shared.content()

        engine = make_engine(server.settings.environment("production"))
        long_ago = int(time.time()) - 40 * 86400
        try:
            secret, _ = transact(
                engine,
                lambda c: share_links.create_link(c, ids["a_campaign"], actor="t", now=long_ago, days=30),
                write=True,
            )
        finally:
            engine.dispose()
        expired = shared.goto(f"{server.url}{share_links.link_path('production', secret)}")
        assert expired is not None and expired.status == 404
    finally:
        outsider.close()
    browser.problems[:] = [p for p in browser.problems if "404" not in p]
