"""A slot sold to a demand partner, played end to end by a real VAST client in Chromium: the player page asks
adslot for an ad on a venue no direct campaign fills, where the test bidder (the only partner) wins; its
@dailymotion/vast-client resolves adslot's wrapper to adslot's inline layer, which is the bidder's own VAST
with adslot's pixels added, plays the bidder's media file and fires every tracker of both.

Then each side has what it is owed: adslot's record shows the impression and the five quartiles; the
bidder's log shows its own impression and quartile pixels (their macros substituted), one win notice for the
auction and, once adslot counted the impression, exactly one billing notice; the demand report shows one
win, one play, billed.

The page, the VAST client's bundle and the player's origin are test_cross_origin_player.py's.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from adslot.demand.bidder import MEDIA_PATH, PIXEL_EVENTS
from tests.api import test_cross_origin_player as cross_origin
from tests.api.test_cross_origin_player import Played, play_page, played_record
from tests.conftest import LiveServer, drop_schemas, eventually, start_server
from tests.contract.support import QUARTILES
from tests.demand.test_bidder import running
from tests.serving.test_programmatic import win_row

pytestmark = pytest.mark.browser
player_origin = cross_origin.player_origin
"""The player's own site (its page and the VAST client's bundle), which skips or fails without a browser."""

PARTNER = "test-bidder"
VENUE = "venue-empty"
"""No direct campaign: the bidder's bid wins the slot."""
PRICE_CPM = 4.2
HOUR = 3600


@pytest.fixture
def bidder() -> Iterator[httpx.Client]:
    with running(price_cpm=PRICE_CPM, seed=7) as client:
        yield client


@pytest.fixture
def exchange(backend: str, tmp_path: Path, bidder: httpx.Client) -> Iterator[LiveServer]:
    """adslot (production) with the test bidder as its only demand partner, on venue-empty; billing notices
    looked for every 50 ms."""
    server, schemas = start_server(tmp_path, backend, ADSLOT_DEMAND_BILLING_INTERVAL_MS="50")
    assert server.keys is not None
    answer = httpx.post(
        f"{server.url}/api/v1/demand/partners",
        headers={"Ssp-Key": server.keys.production_admin},
        json={
            "name": PARTNER,
            "endpoint": f"{bidder.base_url}/openrtb2/auction",
            "timeout_ms": 500,
            "venues": [VENUE],
            "auto_approve": True,
        },
        timeout=10,
    )
    assert answer.status_code == 201, answer.text
    yield server
    server.stop()
    if schemas:
        drop_schemas(schemas)


def play(origin: str, server: LiveServer) -> Played:
    """The player page against `server`'s production environment on VENUE."""
    assert server.keys is not None
    return play_page(origin, server.url, server.keys.production, VENUE)


def record_of(server: LiveServer, ident: str) -> dict[str, Any]:
    assert server.keys is not None
    return played_record(server.url, server.keys.production, ident)


def notices(bidder: httpx.Client, kind: str, auction_id: str) -> list[dict[str, Any]]:
    """The bidder's log entries of `kind` (win, bill, pixel...) for the auction."""
    entries: list[dict[str, Any]] = bidder.get("/log", params={"kind": kind}).json()
    return [entry for entry in entries if entry.get("query", {}).get("auction") == auction_id]


def partner_total(server: LiveServer) -> dict[str, Any] | None:
    """The bidder's total in the demand report over the hours around now."""
    assert server.keys is not None
    hour = int(time.time()) // HOUR * HOUR
    answer = httpx.get(
        f"{server.url}/api/v1/reports/demand",
        headers={"Ssp-Key": server.keys.production_admin},
        params={"from": hour - HOUR, "to": hour + 2 * HOUR},
        timeout=10,
    )
    assert answer.status_code == 200, answer.text
    totals: list[dict[str, Any]] = answer.json()["data"]["totals"]
    return next((total for total in totals if total["partner"] == PARTNER), None)


def test_a_real_vast_client_plays_the_bidders_creative_and_both_sides_count_it_once(
    player_origin: str, exchange: LiveServer, bidder: httpx.Client
) -> None:
    played, error, requested = play(player_origin, exchange)
    assert error is None, error
    assert played is not None
    base = str(bidder.base_url).rstrip("/")
    assert played["media"] == f"{base}{MEDIA_PATH}"
    assert played["played"] > 0
    ident = played["uuid"]
    assert f"{exchange.url}/api/v1/ad/vast/{ident}" in requested, "the wrapper was resolved"
    assert f"{base}{MEDIA_PATH}" in requested
    assert not [url for url in requested if not url.startswith(("http://127.0.0.1", "data:"))], requested

    # adslot counted the play: the impression and every quartile, with no campaign of its own.
    record = record_of(exchange, ident)
    assert record["campaign_id"] is None
    assert record["plays"] == 1
    assert record["events"]["impression"] is not None
    for event in QUARTILES:
        assert record["events"][event] is not None, (event, record)

    win = win_row(exchange, ident)
    assert win is not None and win["partner"] == PARTNER
    auction_id = win["auction_id"]

    # The bidder saw its own pixels fire, each with the auction's id substituted.
    fired = notices(bidder, "pixel", auction_id)
    assert sorted(entry["event"] for entry in fired) == sorted(PIXEL_EVENTS), fired
    assert not [entry for entry in fired if "macros_left" in entry], fired

    # One win notice; one billing notice, sent once the impression counted (and never again).
    assert eventually(lambda: len(notices(bidder, "win", auction_id)) == 1), bidder.get("/log").json()
    assert eventually(lambda: len(notices(bidder, "bill", auction_id)) == 1), bidder.get("/log").json()
    time.sleep(0.3)  # six more passes of the billing sender
    (bill,) = notices(bidder, "bill", auction_id)
    assert len(notices(bidder, "win", auction_id)) == 1
    assert "macros_left" not in bill
    win = win_row(exchange, ident)
    assert win is not None and win["billed_at"] is not None and win["bill_due_at"] is not None
    assert bill["query"]["price"] == str(PRICE_CPM)
    assert bill["query"]["ts"] == str(win["bill_due_at"] * 1000)

    # The demand report agrees; its asks are written every few seconds (DemandStats), its wins at once.
    def reported() -> bool:
        total = partner_total(exchange)
        return total is not None and total["requests"] == 1

    assert eventually(reported, timeout=12), partner_total(exchange)
    total = partner_total(exchange)
    assert total is not None
    assert (total["requests"], total["bids"], total["wins"], total["plays"], total["billed"]) == (
        1,
        1,
        1,
        1,
        1,
    )
    assert total["avg_clearing_cpm"] == PRICE_CPM
