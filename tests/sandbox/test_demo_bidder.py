"""The built-in demo bidder: the test bidder served by adslot itself under `{sandbox}/demo-bidder`, through
the same port and protocol as everything else (the hot lane declines its paths), and never on production."""

from __future__ import annotations

import re

import httpx

from adslot.demand.auction import Asked, check_response
from adslot.demand.bidder import AUCTION_PATH, MEDIA_PATH
from adslot.demand.macros import MacroValues, substitute
from adslot.demand.repository import get_partner
from adslot.sandbox.demo_bidder import LOG_ENTRIES, Mounted, build_demo_bidder
from adslot.sandbox.seed import DEMO_PARTNER, PROGRAMMATIC_VENUE, seed_sandbox
from adslot.storage.database import make_engine, write_transaction
from tests.conftest import LiveServer
from tests.demand.test_bidder import REQUEST_ID, TERMS, bid_request, only_bid

VENUE = PROGRAMMATIC_VENUE.venue_id


def test_the_sandbox_answers_a_dooh_bid_request_with_a_bid_whose_links_are_under_its_demo_bidder(
    live: LiveServer, http: httpx.Client
) -> None:
    base = f"{live.sandbox_url}/demo-bidder"
    response = http.post(f"{base}{AUCTION_PATH}", content=bid_request(venue_id=VENUE))
    bid = only_bid(response)
    (valid,) = check_response(Asked(TERMS, REQUEST_ID), response.content).bids
    assert valid.price_micros > 0
    assert bid["nurl"].startswith(f"{base}/win?") and bid["burl"].startswith(f"{base}/bill?")
    assert bid["lurl"].startswith(f"{base}/loss?")
    assert f"<![CDATA[{base}{MEDIA_PATH}]]>" in bid["adm"]
    pixels = re.findall(r"<!\[CDATA\[([^\]]*/pixel/[^\]]*)\]\]>", bid["adm"])
    assert pixels and all(url.startswith(f"{base}/pixel/") for url in pixels)


def test_its_media_pixels_and_notices_are_served_and_its_log_shows_what_it_received(
    live: LiveServer, http: httpx.Client
) -> None:
    base = f"{live.sandbox_url}/demo-bidder"
    bid = only_bid(http.post(f"{base}{AUCTION_PATH}", content=bid_request(venue_id=VENUE)))
    media = http.get(f"{base}{MEDIA_PATH}")
    assert (media.status_code, media.headers["content-type"]) == (200, "video/mp4")
    pixel = http.get(substitute(f"{base}/pixel/impression?auction=${{AUCTION_ID}}", MacroValues(REQUEST_ID)))
    assert (pixel.status_code, pixel.headers["content-type"]) == (200, "image/gif")
    win = http.get(substitute(bid["nurl"], MacroValues(auction_id=REQUEST_ID, price_micros=1_000_000)))
    assert win.status_code == 204
    log = http.get(f"{base}/log").json()
    kinds = [entry["kind"] for entry in log]
    assert kinds[-5:] == ["request", "bid", "media", "pixel", "win"]
    assert log[-5]["dooh_id"] == VENUE
    assert [entry["kind"] for entry in http.get(f"{base}/log", params={"kind": "win"}).json()][-1:] == ["win"]


def test_every_answer_of_the_demo_bidder_forbids_script_and_sniffing_on_adslots_origin(
    live: LiveServer, http: httpx.Client
) -> None:
    """Its bids carry VAST markup and it is served on adslot's origin: none of its answers runs as a page."""
    base = f"{live.sandbox_url}/demo-bidder"
    answers = [
        http.post(f"{base}{AUCTION_PATH}", content=bid_request(venue_id=VENUE)),
        http.post(f"{base}{AUCTION_PATH}", content=b"[" * 1000 + b"]" * 1000),
        http.get(f"{base}{MEDIA_PATH}"),
        http.get(f"{base}/pixel/impression"),
        http.get(f"{base}/log"),
        http.get(f"{base}/nowhere"),
    ]
    assert [a.status_code for a in answers] == [200, 400, 200, 200, 200, 404]
    for answer in answers:
        assert answer.headers["x-content-type-options"] == "nosniff"
        assert answer.headers["content-security-policy"] == "sandbox; default-src 'none'"


def test_the_partners_stored_endpoint_reaches_the_mounted_bidder(
    live: LiveServer, http: httpx.Client
) -> None:
    engine = make_engine(live.settings.environment("sandbox"))
    try:
        with write_transaction(engine) as conn:
            seed_sandbox(conn, live.sandbox_url)
            endpoint = get_partner(conn, DEMO_PARTNER).endpoint
    finally:
        engine.dispose()
    assert endpoint == f"{live.sandbox_url}/demo-bidder{AUCTION_PATH}"
    assert only_bid(http.post(endpoint, content=bid_request(venue_id=VENUE)))["price"] > 0


def test_production_has_no_demo_bidder(live: LiveServer, http: httpx.Client) -> None:
    auction = http.post(f"{live.url}/demo-bidder{AUCTION_PATH}", content=bid_request(venue_id=VENUE))
    assert auction.status_code == 404
    assert "seatbid" not in auction.text
    assert http.get(f"{live.url}/demo-bidder/log").status_code == 404
    assert http.get(f"{live.url}/demo-bidder{MEDIA_PATH}").status_code == 404


def test_a_path_that_only_starts_like_the_demo_bidder_is_the_sandboxs_own() -> None:
    """`/sandbox/demo-bidderx` is not under the mount; the sandbox's app answers it (404), not the bidder."""
    mounted = Mounted("/sandbox/demo-bidder", build_demo_bidder("http://x.test/sandbox"))
    assert mounted.matches("/sandbox/demo-bidder/log") and mounted.matches("/sandbox/demo-bidder")
    assert not mounted.matches("/sandbox/demo-bidderx") and not mounted.matches("/demo-bidder/log")


def test_its_log_keeps_the_last_thousand_entries_in_memory() -> None:
    bidder = build_demo_bidder("http://x.test/sandbox")
    for number in range(LOG_ENTRIES + 5):
        bidder.log.add("pixel", event="start", n=number)
    kept = bidder.log.entries()
    assert len(kept) == LOG_ENTRIES == 1000
    assert kept[0]["n"] == 5
    assert bidder.settings.base_url == "http://x.test/sandbox/demo-bidder"
    assert bidder.settings.no_bid_rate == 0
