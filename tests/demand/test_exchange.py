"""The slot as serving offers it to partners (exchange.opportunity_for): every request it makes validates."""

from __future__ import annotations

import uuid
from typing import Any

import msgspec
import pytest

from adslot.decision.model import ScreenProfile, VenueProfile
from adslot.decision.slot import make_slot
from adslot.demand.bid_request import build_bid_request, encode_bid_request
from adslot.demand.exchange import opportunity_for
from adslot.demand.openrtb import spec_violations
from adslot.demand.terms import Deal, PartnerTerms
from tests.demand.openrtb_schema import schema_errors

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
