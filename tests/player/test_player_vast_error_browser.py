"""The reference player fires a VAST's Error URLs when its media fails, then gives the ad request back.

adslot's own VAST carries no <Error>, so the ad comes from a programmatic partner: a loopback bidder (the
venue's only demand; the direct campaign is paused) whose markup is a VAST Wrapper with an <Error> URL,
pointing at an InLine on the same loopback server with an <Error> URL of its own and media that 404s. The
player, in Debian's Chromium, resolves adslot's wrapper -> adslot's inline layer (the bidder's Wrapper) ->
the bidder's InLine, fails to play the media, fires each layer's Error URL once with [ERRORCODE] replaced by
the VAST 2.0 code for media that cannot be displayed (405), and releases the ad request.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs

import httpx
import msgspec
import pytest

from adslot.campaigns.repository import update_campaign
from adslot.campaigns.schemas import CampaignPatch
from adslot.demand import openrtb
from adslot.demand.bidder import BidderSettings, build_bid_response
from tests.loopback import on_loopback
from tests.player.screens import VENUE, Screen, chromium, screen_setup, wait_for
from tests.player.test_player_browser import eventually_released, open_player

pytestmark = [pytest.mark.browser, pytest.mark.slow("browser")]
MEDIA_404 = "/missing.mp4"


@dataclass
class Receiver:
    """The bidder's side: what it was asked and which Error URLs (path, query) reached it."""

    base_url: str = ""
    auctions: int = 0
    errors: list[tuple[str, dict[str, list[str]]]] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)


def inline_vast(base: str) -> str:
    """The bidder's InLine: an Error URL and media that 404s."""
    return (
        '<?xml version="1.0" encoding="UTF-8"?><VAST version="2.0"><Ad id="b-inline"><InLine>'
        "<AdSystem>loopback bidder</AdSystem><AdTitle>broken media</AdTitle>"
        f"<Error><![CDATA[{base}/error/inline?code=[ERRORCODE]]]></Error>"
        f"<Impression><![CDATA[{base}/pixel/impression]]></Impression>"
        "<Creatives><Creative><Linear><Duration>00:00:02</Duration><MediaFiles>"
        f'<MediaFile delivery="progressive" type="video/mp4" width="640" height="360">'
        f"<![CDATA[{base}{MEDIA_404}]]></MediaFile>"
        "</MediaFiles></Linear></Creative></Creatives></InLine></Ad></VAST>"
    )


def wrapper_vast(base: str) -> str:
    """The bid's markup: a Wrapper with its own Error URL (the auction id substituted by adslot) around the
    InLine."""
    return (
        '<?xml version="1.0" encoding="UTF-8"?><VAST version="2.0"><Ad id="b-wrapper"><Wrapper>'
        "<AdSystem>loopback bidder</AdSystem>"
        f"<VASTAdTagURI><![CDATA[{base}/vast/inline]]></VASTAdTagURI>"
        f"<Error><![CDATA[{base}/error/wrapper?code=[ERRORCODE]&auction=${{AUCTION_ID}}]]></Error>"
        f"<Impression><![CDATA[{base}/pixel/wrapper-impression]]></Impression>"
        "</Wrapper></Ad></VAST>"
    )


def bidder_app(receiver: Receiver) -> Any:
    """An ASGI bidder that bids once (the Wrapper above), answers no-bid after, and serves the rest."""

    async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
        assert scope["type"] == "http"
        path, query = scope["path"], parse_qs(scope["query_string"].decode())
        body = b""
        while True:
            message = await receive()
            body += message.get("body", b"")
            if not message.get("more_body"):
                break
        status, headers, content = 200, [(b"content-type", b"text/plain")], b"ok"
        if path == "/openrtb2/auction":
            with receiver.lock:
                receiver.auctions += 1
                first = receiver.auctions == 1
            if first:
                request = msgspec.json.decode(body, type=openrtb.BidRequest)
                settings = BidderSettings(base_url=receiver.base_url, no_bid_rate=0, delay_ms=0)
                response = build_bid_response(request, settings, 1)
                response.seatbid[0].bid[0].adm = wrapper_vast(receiver.base_url)  # type: ignore[index]
                headers, content = [(b"content-type", b"application/json")], msgspec.json.encode(response)
            else:
                status, content = 204, b""
        elif path == "/vast/inline":
            headers = [(b"content-type", b"text/xml"), (b"access-control-allow-origin", b"*")]
            content = inline_vast(receiver.base_url).encode()
        elif path == MEDIA_404:
            status, content = 404, b"not here"
        elif path.startswith("/error/"):
            with receiver.lock:
                receiver.errors.append((path, query))
        await send({"type": "http.response.start", "status": status, "headers": headers})
        await send({"type": "http.response.body", "body": content})

    return app


@pytest.fixture
def sqlite_screen(tmp_path: Path) -> Iterator[Screen]:
    yield from screen_setup(tmp_path, "sqlite")


def test_media_that_404s_fires_each_vast_layers_error_url_once_then_releases_the_ad_request(
    sqlite_screen: Screen,
) -> None:
    screen = sqlite_screen
    receiver = Receiver()
    with on_loopback(bidder_app(receiver), "the loopback bidder") as base:
        receiver.base_url = base
        # The direct campaign paused: the partner's bid is the only ad this venue gets.
        screen.change(
            lambda c: update_campaign(c, screen.campaign_id, CampaignPatch(status="paused"))  # type: ignore[arg-type]
        )
        screen.server.start()
        partner = httpx.post(
            f"{screen.server.url}/api/v1/demand/partners",
            headers={"Ssp-Key": screen.admin_key},
            json={
                "name": "loopback-bidder",
                "endpoint": f"{base}/openrtb2/auction",
                "timeout_ms": 500,
                "venues": [VENUE],
                "auto_approve": True,
            },
            timeout=10,
        )
        assert partner.status_code == 201, partner.text
        with chromium() as browser:
            _, page, errors = open_player(browser, screen, slot=2, lead=3)
            failed_ad = wait_for(page, lambda s: any(p["kind"] == "failed" for p in s["plays"]), timeout=30)
            (failed,) = [p for p in failed_ad["plays"] if p["kind"] == "failed"]
            assert eventually_released(screen, failed["uuid"])
            # Later slots (no bid: no fill) play the fallback; by the second of them every fire the failure
            # made has long arrived, and no other ad could have fired one.
            wait_for(
                page,
                lambda s: (
                    len([p for p in s["plays"] if p["kind"] == "fallback" and p["at"] > failed["at"]]) >= 2
                ),
                timeout=30,
            )
            assert not errors, errors
    record = screen.record(failed["uuid"])
    assert record["campaign_id"] is None and record["plays"] == 0, record
    by_layer = {path: query for path, query in receiver.errors}
    assert sorted(path for path, _ in receiver.errors) == ["/error/inline", "/error/wrapper"], receiver.errors
    assert by_layer["/error/inline"]["code"] == ["405"]
    assert by_layer["/error/wrapper"]["code"] == ["405"]
    (auction,) = by_layer["/error/wrapper"]["auction"]
    assert auction and "AUCTION_ID" not in auction, by_layer  # adslot substituted the partner's macro
