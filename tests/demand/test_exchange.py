"""The slot as serving offers it to partners (exchange.opportunity_for): every request it makes validates; a
bid whose markup is served by a nurl its partner may not be sent to is dropped, and another bid wins."""

from __future__ import annotations

import asyncio
import dataclasses
import uuid
from typing import Any

import msgspec
import pytest
import sqlalchemy as sa

from adslot.decision.model import ScreenProfile, VenueProfile
from adslot.decision.slot import make_slot
from adslot.demand.bid_request import build_bid_request, encode_bid_request
from adslot.demand.exchange import Exchange, Sale, opportunity_for
from adslot.demand.notice_rules import MAX_NOTICE_BYTES
from adslot.demand.openrtb import LossReason, spec_violations
from adslot.demand.partners import Partner
from adslot.demand.stats import DemandStats, hour_of
from adslot.demand.terms import Deal, PartnerTerms
from tests.demand.openrtb_schema import schema_errors
from tests.demand.test_caller import OPPORTUNITY as CALLER_OPPORTUNITY
from tests.demand.test_caller import Behaviour, Bidders, bidders, bidding, respond
from tests.demand.test_caller import partner as caller_partner

NOW = 1_796_443_000
PLAY = NOW + 120
IDENT = uuid.UUID("01a244ca-8dc4-79e5-bc56-3cef445c4440")
VENUE = VenueProfile(
    "lobby",
    "Europe/Paris",
    "1.1",
    country="FR",
    city="Paris",
    latitude=48.85,
    longitude=2.35,
    impressions_per_play=12.5,
)
SCREEN = ScreenProfile("lobby", "s1", 1080, 1920, "portrait", frozenset({"video/mp4", "video/webm"}), 15)
TERMS = PartnerTerms("dsp", floor_cpm_micros=2_500_000, auction="second", tmax_ms=150)
DEALS = PartnerTerms(
    "dsp", floor_cpm_micros=1_000_000, deals=(Deal("deal-1", 5_000_000, buyer_seats=frozenset({"seat-9"})),)
)
PLAY_HOUR = hour_of(CALLER_OPPORTUNITY.play_time)
__all__ = ["bidders"]  # the fake partners' fixture, shared with test_caller
CASES: dict[str, tuple[VenueProfile, ScreenProfile | None, bool, PartnerTerms]] = {
    "registered venue with a screen": (VENUE, SCREEN, True, TERMS),
    "registered venue without a screen": (VENUE, None, True, TERMS),
    "with deals": (VENUE, SCREEN, True, DEALS),
    "bare sandbox venue, no audience figure": (VenueProfile("anywhere"), None, False, TERMS),
}


def offered(venue: VenueProfile, screen: ScreenProfile | None, registered: bool, terms: PartnerTerms) -> Any:
    slot = make_slot(venue, screen.screen_id if screen else None, screen, PLAY)
    opportunity = opportunity_for(
        slot,
        registered=registered,
        ad_request_id=IDENT,
        impressions=venue.impressions_per_play,
        expires_at=PLAY + 900,
    )
    return build_bid_request(opportunity, terms, request_id="req-1", transaction_id="tid-1", now=NOW)


@pytest.mark.parametrize("case", CASES)
def test_every_request_serving_builds_validates_against_the_openrtb_schema(case: str) -> None:
    request = offered(*CASES[case])
    assert schema_errors("BidRequest", msgspec.json.decode(encode_bid_request(request))) == []
    assert spec_violations(request) == []


def test_a_screen_sizes_the_video_and_its_mime_types_and_length_are_sent() -> None:
    request = offered(*CASES["registered venue with a screen"])
    video = request.imp[0].video
    assert (video.w, video.h, video.maxduration) == (1080, 1920, 15)
    assert video.mimes == ["video/mp4", "video/webm"]
    assert request.imp[0].tagid == "s1"


def test_a_registered_venue_sends_its_audience_and_a_bare_one_none() -> None:
    assert offered(*CASES["registered venue with a screen"]).imp[0].qty.multiplier == 12.5
    assert offered(*CASES["bare sandbox venue, no audience figure"]).imp[0].qty is None


def test_the_ad_request_uuid_is_never_sent_to_a_partner() -> None:
    for case in CASES.values():
        assert str(IDENT) not in encode_bid_request(offered(*case)).decode()


def markup_by_nurl(nurl: str, price: float, seat: str = "s1") -> Behaviour:
    """A bid without markup, served by its nurl, at `price`."""

    async def behaviour(request: dict[str, Any], writer: asyncio.StreamWriter) -> bool:
        bid = {"id": "b1", "impid": "1", "price": price, "nurl": nurl, "crid": "c1"}
        body = msgspec.json.encode({"id": request["id"], "seatbid": [{"seat": seat, "bid": [bid]}]})
        return await respond(writer, 200, body)

    return behaviour


def auction_of(partners: list[Partner]) -> tuple[Sale, dict[tuple[str, int, str], int]]:
    """One auction of the slot among `partners` (their creatives approved), and what it counted."""

    async def scenario() -> tuple[Sale, dict[tuple[str, int, str], int]]:
        stats = DemandStats(sa.create_engine("sqlite://"))

        async def nothing(fn: Any) -> None:
            return None

        exchange = Exchange(currency="USD", stats=stats, write=nothing, read=nothing)
        try:
            opportunity = dataclasses.replace(CALLER_OPPORTUNITY, ad_request_uuid=str(IDENT))
            sale = await exchange.auction(
                partners,
                opportunity,
                ad_request_id=IDENT,
                creatives={(p.name, "c1"): (1, "approved") for p in partners},
                direct_cpm_micros=None,
                now=NOW,
            )
            exchange.settle(sale, sold=sale.win is not None)
            await exchange.drain()
            return sale, stats.pending()
        finally:
            await exchange.close()

    return asyncio.run(scenario())


def test_a_bid_served_by_an_undeclared_nurl_is_dropped_and_the_next_bid_wins(bidders: Bidders) -> None:
    high_url, _ = bidders.start(markup_by_nurl("http://127.0.0.2:6379/ad", 9.0))
    low_url, _ = bidders.start(bidding(4.0))
    sale, counted = auction_of([caller_partner("high", high_url), caller_partner("low", low_url)])
    assert sale.win is not None and sale.win.partner == "low"
    (drop,) = sale.result.drops
    assert (drop.partner, drop.reason, drop.loss) == ("high", "notice_host", LossReason.INVALID_BID_RESPONSE)
    assert counted[("high", PLAY_HOUR, "drop:notice_host")] == 1


def test_a_nurl_serving_markup_that_its_macros_grow_past_8_kib_cannot_win(bidders: Bidders) -> None:
    """Short as bid; past the limit once its 20 `${AUCTION_SEAT_ID}` are each the seat, percent-encoded."""
    nurl = "https://win.example/ad?" + "${AUCTION_SEAT_ID}" * 20
    grown_url, _ = bidders.start(markup_by_nurl(nurl, 9.0, seat="é" * 100))
    high_url, _ = bidders.start(bidding(4.0))
    grown = caller_partner("grown", grown_url, notice_hosts=["win.example"])
    sale, _ = auction_of([grown, caller_partner("high", high_url)])
    assert sale.win is not None and sale.win.partner == "high"
    assert [(d.partner, d.reason) for d in sale.result.drops] == [("grown", "notice_too_long")]
    assert len(nurl) < MAX_NOTICE_BYTES


def test_a_nurl_serving_markup_on_a_declared_host_wins_with_its_macros_substituted(bidders: Bidders) -> None:
    grown_url, _ = bidders.start(markup_by_nurl("https://win.example/ad?seat=${AUCTION_SEAT_ID}", 9.0))
    sale, _ = auction_of([caller_partner("grown", grown_url, notice_hosts=["win.example"])])
    assert sale.win is not None and sale.win.nurl == "https://win.example/ad?seat=s1"
    assert sale.result.drops == ()
