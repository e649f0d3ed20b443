"""Every OpenRTB 2.6 macro is substituted in notice URLs and markup, percent-encoded so a bidder's ids cannot
break the URL or the VAST around it; absent values are empty, encodings nobody agreed are withheld."""

from __future__ import annotations

import xml.etree.ElementTree as ET

import msgspec
import pytest

from adslot.demand.auction import Asked, AuctionResult, check_response, run_auction
from adslot.demand.macros import AUDIT, MACROS, MacroValues, drop_values, loss_values, substitute, win_values
from adslot.demand.terms import PartnerTerms

EVERY_MACRO = "&".join(f"{name.lower()}=${{{name}}}" for name in MACROS)
VAST_WITH_PIXEL = (
    '<VAST version="2.0"><Ad id="a"><InLine><Impression><![CDATA[https://dsp.example/imp?seat=${AUCTION_SEAT_ID}'
    "&price=${AUCTION_PRICE}]]></Impression><Error>https://dsp.example/err?ad=${AUCTION_AD_ID}</Error>"
    "</InLine></Ad></VAST>"
)


def auction(auction_type: str = "second", seat: str = "seat-1", adid: str = "ad-7") -> AuctionResult:
    bids = [
        {"id": "b1", "impid": "1", "price": 1.0, "adm": VAST_WITH_PIXEL, "adid": adid},
        {"id": "b2", "impid": "1", "price": 0.9, "adm": VAST_WITH_PIXEL},
        {"id": "b3", "impid": "1", "price": 0.8, "adm": VAST_WITH_PIXEL},
    ]
    body = msgspec.json.encode({"id": "req-1", "bidid": "resp-9", "seatbid": [{"seat": seat, "bid": bids}]})
    terms = PartnerTerms("dsp", floor_cpm_micros=850_000, auction=auction_type)  # type: ignore[arg-type]
    return run_auction([check_response(Asked(terms, "req-1"), body)])


def test_the_spec_defines_these_fourteen_macros() -> None:
    assert MACROS == (
        "AUCTION_ID",
        "AUCTION_BID_ID",
        "AUCTION_IMP_ID",
        "AUCTION_SEAT_ID",
        "AUCTION_AD_ID",
        "AUCTION_PRICE",
        "AUCTION_CURRENCY",
        "AUCTION_MBR",
        "AUCTION_LOSS",
        "AUCTION_MIN_TO_WIN",
        "AUCTION_MULTIPLIER",
        "AUCTION_IMP_TS",
        "AUCTION_DISCOUNT_PCT",
        "AUCTION_DISCOUNT_CPM",
    )


def test_a_billing_notice_gets_every_macro_of_the_winner() -> None:
    result = auction()
    assert result.winner is not None
    values = win_values(result.winner, multiplier=14.2, imp_ts_ms=1_800_000_120_345)
    assert substitute(f"https://dsp.example/bill?{EVERY_MACRO}", values) == (
        "https://dsp.example/bill?auction_id=req-1&auction_bid_id=resp-9&auction_imp_id=1"
        "&auction_seat_id=seat-1&auction_ad_id=ad-7&auction_price=0.91&auction_currency=USD"
        "&auction_mbr=0.91&auction_loss=0&auction_min_to_win=0.9&auction_multiplier=14.2"
        "&auction_imp_ts=1800000120345&auction_discount_pct=0&auction_discount_cpm=0"
    )


def test_a_first_price_win_notice_has_the_full_price_and_a_ratio_of_one() -> None:
    result = auction("first")
    assert result.winner is not None
    url = substitute(
        "https://w?p=${AUCTION_PRICE}&m=${AUCTION_MBR}&t=${AUCTION_IMP_TS}", win_values(result.winner)
    )
    assert url == "https://w?p=1&m=1&t="


def test_a_loss_notice_gets_its_code_and_the_price_that_won_but_no_price_of_its_own() -> None:
    result = auction()
    loser = result.losers[0]
    url = substitute(
        "https://l?id=${AUCTION_ID}&bid=${AUCTION_BID_ID}&p=${AUCTION_PRICE}&loss=${AUCTION_LOSS}"
        "&min=${AUCTION_MIN_TO_WIN}&cur=${AUCTION_CURRENCY}",
        loss_values(loser),
    )
    assert url == "https://l?id=req-1&bid=resp-9&p=&loss=102&min=0.91&cur=USD"


def test_a_dropped_bids_loss_notice_says_why_it_could_not_compete() -> None:
    (drop,) = auction().drops
    url = substitute(
        "https://l?loss=${AUCTION_LOSS}&imp=${AUCTION_IMP_ID}&min=${AUCTION_MIN_TO_WIN}", drop_values(drop)
    )
    assert url == "https://l?loss=100&imp=1&min="


def test_values_are_percent_encoded_so_a_bidders_ids_cannot_change_the_url() -> None:
    values = MacroValues(seat_id="a b&c=d/é?#", ad_id="x%y")
    assert substitute("https://n?s=${AUCTION_SEAT_ID}&a=${AUCTION_AD_ID}", values) == (
        "https://n?s=a%20b%26c%3Dd%2F%C3%A9%3F%23&a=x%25y"
    )


def test_markup_stays_well_formed_vast_whatever_the_ids_hold() -> None:
    result = auction(seat="]]><Evil/><![CDATA[", adid="</Error><Evil/>")
    assert result.winner is not None
    markup = substitute(VAST_WITH_PIXEL, win_values(result.winner))
    root = ET.fromstring(markup)
    assert root.find(".//Evil") is None
    impression = root.findtext(".//Impression")
    assert impression == "https://dsp.example/imp?seat=%5D%5D%3E%3CEvil%2F%3E%3C%21%5BCDATA%5B&price=0.91"
    assert root.findtext(".//Error") == "https://dsp.example/err?ad=%3C%2FError%3E%3CEvil%2F%3E"


def test_an_absent_value_empties_its_macro() -> None:
    assert substitute("a=${AUCTION_MULTIPLIER}&b=${AUCTION_SEAT_ID}", MacroValues()) == "a=&b="


def test_a_name_the_spec_does_not_define_is_left_alone() -> None:
    template = "x=${AUCTION_FOO}&y=${OTHER}&z=$AUCTION_PRICE"
    assert substitute(template, MacroValues(price_micros=1)) == template


def test_a_macro_asking_for_an_unagreed_encoding_is_withheld_not_sent_in_clear() -> None:
    values = MacroValues(price_micros=2_500_000)
    assert substitute("p=${AUCTION_PRICE:B64}&q=${AUCTION_PRICE}", values) == "p=&q=2.5"


def test_an_audit_render_puts_audit_in_every_macro() -> None:
    assert substitute(
        "p=${AUCTION_PRICE}&s=${AUCTION_SEAT_ID:B64}&f=${AUCTION_FOO}", MacroValues(), audit=True
    ) == (f"p={AUDIT}&s={AUDIT}&f=${{AUCTION_FOO}}")


def test_the_same_macro_is_substituted_everywhere_it_appears() -> None:
    values = MacroValues(auction_id="r")
    assert substitute("${AUCTION_ID}/${AUCTION_ID}${AUCTION_ID}", values) == "r/rr"


@pytest.mark.parametrize(
    ("values", "expected"),
    [
        (MacroValues(price_micros=2_510_000), "2.51"),
        (MacroValues(price_micros=3_000_000), "3"),
        (MacroValues(price_micros=1), "0.000001"),
        (MacroValues(multiplier=0.3333333333), "0.333333"),
        (MacroValues(multiplier=30.3), "30.3"),
    ],
)
def test_numbers_are_written_in_plain_decimals_without_float_noise(
    values: MacroValues, expected: str
) -> None:
    assert substitute("${AUCTION_PRICE}${AUCTION_MULTIPLIER}", values) == expected
