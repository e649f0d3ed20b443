"""A buyer's VAST carrying an XHTML `<script>` (and an image) in an Extension is served on adslot's origin
without running it: the inline VAST of a programmatic win answers `nosniff` and a CSP that forbids script
and loads, Chromium opening it runs nothing (a callback server on loopback hears nothing, while the same
XML served without those headers calls it at once), and players keep their CORS."""

from __future__ import annotations

from collections.abc import Iterator, MutableMapping
from typing import Any

import httpx
import msgspec
import pytest

from adslot.demand.bidder import AUCTION_PATH, BidderSettings, build_bid_response
from adslot.demand.openrtb import BidRequest
from tests.conftest import LiveServer, drop_schemas, eventually, free_port, play_time, start_server
from tests.loopback import on_loopback
from tests.playground.test_playground_browser import CHROMIUM, CHROMIUM_ARGS, require_browser

Scope = MutableMapping[str, Any]
NO_SCRIPT = "sandbox; default-src 'none'"
EMPTY_VENUE = "venue-empty"


class Callback:
    """Records every request it gets; at `/control.xml` serves the hostile VAST with no protective header, to
    show that Chromium would run its script."""

    def __init__(self) -> None:
        self.hits: list[str] = []
        self.control = b""

    async def __call__(self, scope: Scope, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return
        if scope["path"] == "/control.xml":
            await _answer(send, self.control, b"application/xml")
            return
        self.hits.append(scope["path"])
        await _answer(send, b"", b"text/plain")


class HostilePartner:
    """A demand partner that bids the test bidder's VAST with an XHTML script and image in an Extension."""

    def __init__(self, base_url: str, extension: str) -> None:
        self.settings = BidderSettings(base_url=base_url, no_bid_rate=0, delay_ms=0)
        self.extension = extension
        self.serial = 0

    async def __call__(self, scope: Scope, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return
        body, more = b"", True
        while more:
            message = await receive()
            body += message.get("body", b"")
            more = message.get("more_body", False)
        self.serial += 1
        response = build_bid_response(msgspec.json.decode(body, type=BidRequest), self.settings, self.serial)
        bid = response.seatbid[0].bid[0]
        assert bid.adm is not None
        bid.adm = hostile(bid.adm, self.extension)
        await _answer(send, msgspec.json.encode(response), b"application/json")


def hostile(vast: str, extension: str) -> str:
    assert "</InLine>" in vast
    return vast.replace("</InLine>", f"<Extensions>{extension}</Extensions></InLine>")


def extension_calling(callback: str) -> str:
    return (
        '<Extension type="hostile">'
        f'<script xmlns="http://www.w3.org/1999/xhtml">fetch("{callback}/script-ran")</script>'
        f'<img xmlns="http://www.w3.org/1999/xhtml" src="{callback}/image-loaded"/>'
        "</Extension>"
    )


async def _answer(send: Any, body: bytes, content_type: bytes) -> None:
    headers = [(b"content-type", content_type), (b"content-length", b"%d" % len(body))]
    await send({"type": "http.response.start", "status": 200, "headers": headers})
    await send({"type": "http.response.body", "body": body})


@pytest.fixture(scope="module")
def callback() -> Iterator[tuple[Callback, str]]:
    app = Callback()
    with on_loopback(app, "the callback server") as url:
        yield app, url


@pytest.fixture(scope="module")
def exchange(
    backend: str, tmp_path_factory: pytest.TempPathFactory, callback: tuple[Callback, str]
) -> Iterator[LiveServer]:
    """adslot whose only demand partner bids hostile markup on the venue no campaign fills."""
    partner_port = free_port()
    partner = HostilePartner(f"http://127.0.0.1:{partner_port}", extension_calling(callback[1]))
    with on_loopback(partner, "the hostile partner", partner_port) as partner_url:
        server, schemas = start_server(tmp_path_factory.mktemp("adslot"), backend)
        made = httpx.post(
            f"{server.url}/api/v1/demand/partners",
            headers={"Ssp-Key": server.keys.production_admin},
            json={
                "name": "hostile",
                "endpoint": f"{partner_url}{AUCTION_PATH}",
                "timeout_ms": 500,
                "venues": [EMPTY_VENUE],
                "auto_approve": True,
            },
        )
        assert made.status_code == 201, made.text
        yield server
        server.stop()
        if schemas:
            drop_schemas(schemas)


def won_vast_url(server: LiveServer) -> str:
    answer = httpx.post(
        f"{server.url}/api/v1/ad/request",
        headers={"Ssp-Key": server.keys.production},
        json={"venue_id": EMPTY_VENUE, "play_time": play_time()},
        timeout=10,
    )
    assert answer.status_code == 200, answer.text
    return f"{server.url}/api/v1/ad/vast/{answer.json()['data']['ad_request_uuid']}"


def test_the_inline_vast_of_a_bid_answers_nosniff_a_no_script_csp_and_cors(
    exchange: LiveServer, callback: tuple[Callback, str]
) -> None:
    url = won_vast_url(exchange)
    for origin in (None, "https://player.example.test"):
        answer = httpx.get(url, headers={"Origin": origin} if origin else {})
        assert answer.status_code == 200
        assert "<script" in answer.text  # the buyer's markup is served as bid: the headers keep it inert
        assert answer.headers["content-type"] == "application/xml; charset=utf-8"
        assert answer.headers["x-content-type-options"] == "nosniff"
        assert answer.headers["content-security-policy"] == NO_SCRIPT
        assert answer.headers["cache-control"] == "no-store"
        if origin:
            assert answer.headers["access-control-allow-origin"] == "*"
            assert "X-Adslot-Error" in answer.headers["access-control-expose-headers"]
    preflight = httpx.options(
        url, headers={"Origin": "https://player.example.test", "Access-Control-Request-Method": "GET"}
    )
    assert preflight.status_code == 204 and preflight.headers["access-control-allow-origin"] == "*"


def test_a_campaigns_inline_vast_answers_the_same_headers(exchange: LiveServer) -> None:
    answer = httpx.post(
        f"{exchange.url}/api/v1/ad/request",
        headers={"Ssp-Key": exchange.keys.production},
        json={"venue_id": "venue-1", "play_time": play_time()},
    )
    assert answer.status_code == 200, answer.text
    vast = httpx.get(f"{exchange.url}/api/v1/ad/vast/{answer.json()['data']['ad_request_uuid']}")
    assert vast.status_code == 200
    assert vast.headers["x-content-type-options"] == "nosniff"
    assert vast.headers["content-security-policy"] == NO_SCRIPT


@pytest.mark.browser
def test_chromium_opening_the_inline_vast_of_a_hostile_bid_runs_no_script_and_loads_nothing(
    exchange: LiveServer, callback: tuple[Callback, str]
) -> None:
    require_browser()
    from playwright.sync_api import sync_playwright

    app, callback_url = callback
    url = won_vast_url(exchange)
    app.control = httpx.get(url).content
    app.hits.clear()
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS, headless=True)
        try:
            page = browser.new_page()
            page.goto(url, wait_until="load")
            page.wait_for_timeout(1500)
            assert app.hits == []
            assert page.evaluate("() => typeof document.title") == "string"  # the page did open
            # The same bytes without adslot's headers: Chromium runs the script and loads the image.
            page.goto(f"{callback_url}/control.xml", wait_until="load")
            assert eventually(lambda: {"/script-ran", "/image-loaded"} <= set(app.hits)), app.hits
        finally:
            browser.close()
