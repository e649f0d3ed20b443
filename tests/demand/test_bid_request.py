"""Every OpenRTB 2.6 bid request adslot builds validates against the shared schemas and honours the DOOH rules
they cannot check; the shared DOOH samples parse, and the one that breaks the one-medium rule is caught."""

from __future__ import annotations

import dataclasses
from typing import Any

import msgspec
import pytest

from adslot.demand.bid_request import (
    DEFAULT_MIME_TYPES,
    Audience,
    Opportunity,
    build_bid_request,
    encode_bid_request,
)
from adslot.demand.countries import ALPHA3, alpha3
from adslot.demand.openrtb import BidRequest, BidResponse, spec_violations
from adslot.demand.terms import Deal, PartnerTerms
from adslot.places import COUNTRIES
from tests.demand.openrtb_schema import EXAMPLES_DIR, SAMPLES_DIR, load_json, schema_errors

NOW = 1_800_000_000  # 2027-01-15, winter in Paris
PLAY = NOW + 120
EXPIRES = PLAY + 900
UUID = "0191e9b8-5f3c-7a51-9c2e-3b1f2a4d5e6f"

VENUE_ONLY = Opportunity(
    ad_request_uuid=UUID, venue_id="lobby", venue_name="Lobby", play_time=PLAY, expires_at=EXPIRES
)
SCREEN = dataclasses.replace(
    VENUE_ONLY,
    venue_type="1.1",
    timezone="Europe/Paris",
    latitude=48.8566,
    longitude=2.3522,
    country="fr",
    region="IDF",
    city="Paris",
    screen_id="s1",
    width=1920,
    height=1080,
    min_duration=5,
    max_duration=30,
    mime_types=("video/mp4", "video/webm"),
    audience=Audience(14.23456),
)
MEASURED = dataclasses.replace(SCREEN, audience=Audience(3.5, source_type=1, vendor="route.org.uk"))
NO_AUDIENCE = dataclasses.replace(SCREEN, audience=None)

OPEN = PartnerTerms("open-dsp", floor_cpm_micros=2_500_000, currency="EUR", tmax_ms=120)
WITH_DEALS = PartnerTerms(
    "deal-dsp",
    floor_cpm_micros=1_000_000,
    auction="second",
    deals=(
        Deal("pmp-1", floor_cpm_micros=4_500_000, buyer_seats=frozenset({"seat-b", "seat-a"}), at=1),
        Deal("pmp-2", floor_cpm_micros=3_000_000),
    ),
    blocked_domains=frozenset({"casino.example", "betting.example"}),
)

CASES = {
    "venue without screen, geo or audience": (VENUE_ONLY, OPEN),
    "screen with publisher audience": (SCREEN, OPEN),
    "screen with vendor-measured audience": (MEASURED, OPEN),
    "screen without audience figure": (NO_AUDIENCE, OPEN),
    "venue with deals": (VENUE_ONLY, WITH_DEALS),
    "screen with deals and audience": (SCREEN, WITH_DEALS),
}


def wire(opportunity: Opportunity, terms: PartnerTerms, now: int = NOW) -> dict[str, Any]:
    """The request as a partner receives it: encoded, then read back as plain JSON."""
    request = build_bid_request(opportunity, terms, request_id="req-1", transaction_id="tid-1", now=now)
    decoded: dict[str, Any] = msgspec.json.decode(encode_bid_request(request))
    return decoded


@pytest.mark.parametrize("case", CASES)
def test_every_built_request_validates_against_the_openrtb_schema(case: str) -> None:
    assert schema_errors("BidRequest", wire(*CASES[case])) == []


@pytest.mark.parametrize("case", CASES)
def test_every_built_request_keeps_the_rules_the_schema_cannot_check(case: str) -> None:
    opportunity, terms = CASES[case]
    request = build_bid_request(opportunity, terms, request_id="req-1", transaction_id="tid-1", now=NOW)
    assert spec_violations(request) == []
    assert spec_violations(msgspec.json.decode(encode_bid_request(request), type=BidRequest)) == []


def test_the_schema_check_fails_a_request_with_a_wrong_type() -> None:
    broken = wire(SCREEN, OPEN)
    broken["dooh"]["venuetype"] = "1.1"
    broken["imp"][0]["qty"]["multiplier"] = "14"
    assert sorted(schema_errors("BidRequest", broken)) == [
        "dooh/venuetype: '1.1' is not of type 'array'",
        "imp/0/qty/multiplier: '14' is not of type 'number'",
    ]


def test_a_request_names_the_venue_in_dooh_and_never_sends_site_or_app() -> None:
    request = wire(SCREEN, OPEN)
    assert request["dooh"] == {"id": "lobby", "name": "Lobby", "venuetype": ["1.1"], "venuetypetax": 1}
    assert "site" not in request and "app" not in request


def test_a_venue_without_a_type_sends_no_venue_taxonomy() -> None:
    assert wire(VENUE_ONLY, OPEN)["dooh"] == {"id": "lobby", "name": "Lobby"}


def test_the_device_is_out_of_home_at_the_venue() -> None:
    device = wire(SCREEN, OPEN)["device"]
    assert device == {
        "devicetype": 8,
        "geo": {
            "lat": 48.8566,
            "lon": 2.3522,
            "type": 3,
            "country": "FRA",
            "region": "IDF",
            "city": "Paris",
            "utcoffset": 60,
        },
        "w": 1920,
        "h": 1080,
    }


def test_the_utc_offset_is_the_venues_at_play_time_across_daylight_saving() -> None:
    summer_play = 1_784_000_000  # 2026-07-14
    summer = dataclasses.replace(SCREEN, play_time=summer_play, expires_at=summer_play + 900)
    assert wire(summer, OPEN, now=summer_play - 60)["device"]["geo"]["utcoffset"] == 120


def test_a_venue_without_location_sends_an_out_of_home_device_with_only_its_offset() -> None:
    assert wire(VENUE_ONLY, OPEN)["device"] == {"devicetype": 8, "geo": {"utcoffset": 0}}


def test_the_video_is_fitted_to_the_screen_and_slot() -> None:
    video = wire(SCREEN, OPEN)["imp"][0]["video"]
    assert video == {
        "mimes": ["video/mp4", "video/webm"],
        "minduration": 5,
        "maxduration": 30,
        "w": 1920,
        "h": 1080,
        "protocols": [2, 5],
        "linearity": 1,
        "skip": 0,
        "boxingallowed": 0,
    }


def test_without_a_screen_the_video_has_no_size_and_the_default_mime_types() -> None:
    video = wire(VENUE_ONLY, OPEN)["imp"][0]["video"]
    assert video == {"mimes": list(DEFAULT_MIME_TYPES), "protocols": [2, 5], "linearity": 1, "skip": 0}


def test_the_impression_carries_time_lead_time_floor_and_placement() -> None:
    imp = wire(SCREEN, OPEN)["imp"][0]
    assert imp["id"] == "1"
    assert imp["dt"] == PLAY * 1000
    assert imp["exp"] == EXPIRES - NOW
    assert (imp["bidfloor"], imp["bidfloorcur"]) == (2.5, "EUR")
    assert imp["tagid"] == "s1"
    assert "pmp" not in imp


def test_an_expired_ad_request_advertises_no_lead_time() -> None:
    assert wire(SCREEN, OPEN, now=EXPIRES + 5)["imp"][0]["exp"] == 0


def test_the_multiplier_comes_from_the_audience_figure_with_its_source() -> None:
    assert wire(SCREEN, OPEN)["imp"][0]["qty"] == {"multiplier": 14.2346, "sourcetype": 2}
    assert wire(MEASURED, OPEN)["imp"][0]["qty"] == {
        "multiplier": 3.5,
        "sourcetype": 1,
        "vendor": "route.org.uk",
    }


def test_without_an_audience_figure_there_is_no_qty() -> None:
    assert "qty" not in wire(NO_AUDIENCE, OPEN)["imp"][0]


def test_auction_terms_and_transaction_are_in_the_request() -> None:
    first = wire(SCREEN, OPEN)
    assert (first["id"], first["at"], first["tmax"], first["cur"]) == ("req-1", 1, 120, ["EUR"])
    assert first["source"] == {"tid": "tid-1"}
    assert "badv" not in first
    second = wire(SCREEN, WITH_DEALS)
    assert (second["at"], second["cur"]) == (2, ["USD"])
    assert second["badv"] == ["betting.example", "casino.example"]


def test_deals_are_offered_in_pmp_beside_the_open_auction() -> None:
    assert wire(SCREEN, WITH_DEALS)["imp"][0]["pmp"] == {
        "private_auction": 0,
        "deals": [
            {"id": "pmp-1", "bidfloor": 4.5, "bidfloorcur": "USD", "at": 1, "wseat": ["seat-a", "seat-b"]},
            {"id": "pmp-2", "bidfloor": 3.0, "bidfloorcur": "USD"},
        ],
    }


def test_the_ad_request_uuid_never_leaves_adslot() -> None:
    for opportunity, terms in CASES.values():
        request = build_bid_request(opportunity, terms, request_id="req-1", transaction_id="tid-1", now=NOW)
        assert UUID.encode() not in encode_bid_request(request)


def test_a_vendor_measured_audience_must_name_its_vendor() -> None:
    with pytest.raises(ValueError, match="vendor"):
        Audience(3.5, source_type=1)


@pytest.mark.parametrize("multiplier", [0.0, -1.0, 0.00001, float("nan")])
def test_an_audience_of_no_one_is_refused(multiplier: float) -> None:
    with pytest.raises(ValueError, match="positive"):
        Audience(multiplier)


def test_a_slot_whose_minimum_exceeds_its_maximum_duration_is_refused() -> None:
    with pytest.raises(ValueError, match="min_duration"):
        dataclasses.replace(SCREEN, min_duration=31)


@pytest.mark.parametrize(
    ("terms", "message"),
    [
        ({"floor_cpm_micros": -1}, "negative"),
        ({"tmax_ms": 0}, "tmax"),
        ({"deals": (Deal("d"), Deal("d"))}, "unique"),
        ({"deals": (Deal("d", currency="EUR"),)}, "EUR"),
    ],
)
def test_partner_terms_that_cannot_be_honoured_are_refused(terms: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        PartnerTerms("p", **terms)


def test_every_venue_country_has_its_alpha3_code() -> None:
    assert set(ALPHA3) == COUNTRIES
    assert len(set(ALPHA3.values())) == len(ALPHA3)
    assert all(len(code) == 3 and code.isupper() for code in ALPHA3.values())
    assert [alpha3(code) for code in ("GB", "de", "US", "CH", "KR", "XK")] == [
        "GBR",
        "DEU",
        "USA",
        "CHE",
        "KOR",
        "XKX",
    ]
    assert alpha3("ZZ") is None and alpha3(None) is None


def test_the_prebid_dooh_sample_validates_and_parses() -> None:
    sample = load_json(SAMPLES_DIR / "prebid-server-dooh.json")
    assert schema_errors("BidRequest", sample["mockBidRequest"]) == []
    request = msgspec.convert(sample["mockBidRequest"], BidRequest)
    assert request.dooh is not None and request.dooh.id == "12345"
    assert (request.tmax, request.imp[0].id) == (500, "some-impression-id")
    assert spec_violations(request) == []
    assert schema_errors("BidResponse", sample["expectedBidResponse"]) == []
    response = msgspec.convert(sample["expectedBidResponse"], BidResponse)
    assert response.seatbid is not None and response.seatbid[0].seat == "appnexus"


def test_the_iab_dooh_example_parses_and_its_seconds_sized_dt_is_flagged() -> None:
    sample = load_json(SAMPLES_DIR / "iab-2.6-impl-7.9.6.1-dooh-banner-request.json")
    assert schema_errors("BidRequest", sample) == []
    request = msgspec.convert(sample, BidRequest)
    imp = request.imp[0]
    assert imp.qty is not None and (imp.qty.multiplier, imp.qty.sourcetype) == (14.2, 1)
    assert imp.pmp is not None and [deal.id for deal in imp.pmp.deals or ()] == ["123", "333", "444"]
    assert request.device is not None and request.device.devicetype == 8
    assert spec_violations(request) == ["imp[0].dt: 12345670.0 is not a time in Unix milliseconds"]


def test_the_sample_with_both_site_and_dooh_passes_the_schema_but_breaks_the_one_medium_rule() -> None:
    sample = load_json(SAMPLES_DIR / "prebid-server-invalid-site-dooh-both.json")
    assert schema_errors("BidRequest", sample["mockBidRequest"]) == []
    request = msgspec.convert(sample["mockBidRequest"], BidRequest)
    assert spec_violations(request) == ["at most one of site, app and dooh may be present, not site and dooh"]


@pytest.mark.parametrize(
    ("root", "name"),
    [
        ("BidRequest", "bid-requests/mobile-app.json"),
        ("BidRequest", "bid-requests/pmp-direct-deal.json"),
        ("BidRequest", "bid-requests/simple-banner.json"),
        ("BidRequest", "bid-requests/video.json"),
        ("BidResponse", "bid-responses/ad-served-on-win.json"),
        ("BidResponse", "bid-responses/vast-inline.json"),
    ],
)
def test_the_schemas_own_examples_validate_in_the_local_registry(root: str, name: str) -> None:
    assert schema_errors(root, load_json(EXAMPLES_DIR / name)) == []
