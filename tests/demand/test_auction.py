"""Bids are checked (every drop has its reason and loss code, and nothing a partner sends raises), then the
best of programmatic and direct wins, first or second price, with floors, deals and ties settled as
documented."""

from __future__ import annotations

from typing import Any

import msgspec
import pytest

from adslot.demand.auction import (
    DROP_REASONS,
    MAX_ADM_BYTES,
    MAX_BIDS,
    MAX_RESPONSE_BYTES,
    Asked,
    Checked,
    DropReason,
    check_response,
    only_playable,
    run_auction,
)
from adslot.demand.notice_rules import MAX_NOTICE_BYTES, notice_rule
from adslot.demand.openrtb import LossReason
from adslot.demand.terms import Deal, PartnerTerms
from adslot.vast.markup import ANSWER_BYTES, ANSWER_ELEMENTS, MAX_DEPTH, MarkupChecks
from tests.demand.openrtb_schema import schema_errors
from tests.vast.test_markup import laughs, nested

VAST = (
    '<?xml version="1.0" encoding="UTF-8"?><VAST version="2.0"><Ad id="a"><InLine><AdSystem>dsp</AdSystem>'
    "<AdTitle>spot</AdTitle><Impression/><Creatives/></InLine></Ad></VAST>"
)
DEALS = (
    Deal("gold", floor_cpm_micros=6_000_000, buyer_seats=frozenset({"seat-ok"})),
    Deal("open-deal", floor_cpm_micros=1_000_000),
    Deal("fixed", floor_cpm_micros=3_000_000, at=3),
)


def terms(name: str = "dsp", **changes: Any) -> PartnerTerms:
    return PartnerTerms(
        name,
        **{
            "floor_cpm_micros": 2_000_000,
            "deals": DEALS,
            "blocked_domains": frozenset({"casino.example"}),
            "notices": notice_rule("https://dsp.example/bid"),
            **changes,
        },
    )


def bid(price: float, bid_id: str = "b1", **fields: Any) -> dict[str, Any]:
    return {"id": bid_id, "impid": "1", "price": price, "adm": VAST, "adomain": ["brand.example"], **fields}


def body(*bids: dict[str, Any], seat: str | None = "seat-ok", **fields: Any) -> bytes:
    seatbid: dict[str, Any] = {"bid": list(bids)}
    if seat is not None:
        seatbid["seat"] = seat
    return msgspec.json.encode({"id": "req-1", "bidid": "resp-1", "seatbid": [seatbid], **fields})


def checked(answer: bytes | None, partner: PartnerTerms | None = None, request_id: str = "req-1") -> Checked:
    return check_response(Asked(partner or terms(), request_id), answer)


def only_drop(answer: bytes | None, partner: PartnerTerms | None = None) -> tuple[DropReason, Any]:
    result = checked(answer, partner)
    assert result.bids == ()
    assert len(result.drops) == 1
    return result.drops[0].reason, result.drops[0].loss


def test_a_valid_bid_competes_with_its_price_floor_and_ids() -> None:
    result = checked(body(bid(2.51)))
    assert result.drops == ()
    (valid,) = result.bids
    assert (valid.partner, valid.request_id, valid.seat, valid.response_bid_id) == (
        "dsp",
        "req-1",
        "seat-ok",
        "resp-1",
    )
    assert (valid.price_micros, valid.floor_micros, valid.at, valid.currency) == (
        2_510_000,
        2_000_000,
        1,
        "USD",
    )


def test_the_test_bodies_are_themselves_valid_openrtb_responses() -> None:
    assert schema_errors("BidResponse", msgspec.json.decode(body(bid(2.5), bid(3.0, "b2")))) == []


def test_first_price_winner_pays_its_bid() -> None:
    result = run_auction([checked(body(bid(3.0), bid(5.25, "b2")))])
    assert result.winner is not None
    assert (result.winner.bid.bid.id, result.winner.price_micros) == ("b2", 5_250_000)
    assert not result.direct_won


def test_second_price_winner_pays_the_next_price_plus_a_cent() -> None:
    result = run_auction([checked(body(bid(3.0), bid(5.25, "b2")), terms(auction="second"))])
    assert result.winner is not None
    assert (result.winner.bid.bid.id, result.winner.price_micros) == ("b2", 3_010_000)


def test_second_price_alone_pays_the_floor_plus_a_cent() -> None:
    result = run_auction([checked(body(bid(5.0)), terms(auction="second"))])
    assert result.winner is not None and result.winner.price_micros == 2_010_000


def test_second_price_never_charges_more_than_the_bid() -> None:
    result = run_auction([checked(body(bid(2.0)), terms(auction="second"))])
    assert result.winner is not None and result.winner.price_micros == 2_000_000
    tie = run_auction([checked(body(bid(4.0), bid(4.0, "b2")), terms(auction="second"))])
    assert tie.winner is not None and tie.winner.price_micros == 4_000_000


def test_second_price_counts_another_partners_bid_and_the_direct_cpm() -> None:
    mine = checked(body(bid(9.0)), terms("a", auction="second"))
    theirs = checked(body(bid(4.0)), terms("b"))
    result = run_auction([mine, theirs], direct_cpm_micros=6_500_000)
    assert result.winner is not None
    assert (result.winner.bid.partner, result.winner.price_micros) == ("a", 6_510_000)


@pytest.mark.parametrize(
    ("auction", "price", "winner_min", "loser_min"),
    [("first", 1_000_000, 900_000, 1_000_000), ("second", 910_000, 900_000, 910_000)],
)
def test_prices_and_minimum_to_win_follow_the_specs_example(
    auction: str, price: int, winner_min: int, loser_min: int
) -> None:
    """OpenRTB 2.6 section 4.4.1: floor 0.85, bids 1.00, 0.90 and 0.80 (below the floor, so adslot drops it
    and, as the section allows for a bid kept out of the auction, tells it no minimum to win)."""
    partner = terms(auction=auction, floor_cpm_micros=850_000)
    answer = body(bid(1.0), bid(0.9, "b2"), bid(0.8, "b3"))
    result = run_auction([checked(answer, partner)])
    assert result.winner is not None
    assert (result.winner.price_micros, result.winner.min_to_win_micros) == (price, winner_min)
    assert [(loser.bid.bid.id, loser.loss, loser.min_to_win_micros) for loser in result.losers] == [
        ("b2", LossReason.LOST_TO_HIGHER_BID, loser_min)
    ]
    assert [(drop.bid.id if drop.bid else None, drop.reason) for drop in result.drops] == [
        ("b3", "below_floor")
    ]


def test_a_bid_at_the_floor_competes_and_one_below_is_dropped() -> None:
    assert len(checked(body(bid(2.0))).bids) == 1
    assert only_drop(body(bid(1.99))) == ("below_floor", LossReason.BELOW_AUCTION_FLOOR)


def test_a_deal_bid_is_held_to_the_deals_floor_not_the_open_one() -> None:
    assert only_drop(body(bid(5.99, dealid="gold"))) == ("below_floor", LossReason.BELOW_DEAL_FLOOR)
    (gold,) = checked(body(bid(6.0, dealid="gold"))).bids
    assert gold.deal is not None and (gold.deal.id, gold.floor_micros) == ("gold", 6_000_000)
    (cheap,) = checked(body(bid(1.5, dealid="open-deal"))).bids
    assert cheap.floor_micros == 1_000_000


def test_a_deal_is_open_only_to_its_buyer_seats() -> None:
    assert only_drop(body(bid(7.0, dealid="gold"), seat="seat-other")) == (
        "deal_buyer",
        LossReason.BUYER_SEAT_BLOCKED,
    )
    assert only_drop(body(bid(7.0, dealid="gold"), seat=None))[0] == "deal_buyer"
    assert len(checked(body(bid(7.0, dealid="open-deal"), seat="anyone")).bids) == 1


def test_a_bid_on_a_deal_never_offered_is_dropped() -> None:
    assert only_drop(body(bid(7.0, dealid="nope"))) == ("unknown_deal", LossReason.INVALID_DEAL_ID)


def test_a_fixed_price_deal_pays_its_floor() -> None:
    result = run_auction([checked(body(bid(8.0, dealid="fixed")))])
    assert result.winner is not None and result.winner.price_micros == 3_000_000


def test_open_bids_lose_to_a_deal_bid_with_their_own_loss_code() -> None:
    result = run_auction(
        [checked(body(bid(7.0, dealid="gold"), bid(5.0, "b2"), bid(4.0, "b3", dealid="open-deal")))]
    )
    assert result.winner is not None and result.winner.bid.bid.id == "b1"
    assert [(loser.bid.bid.id, loser.loss) for loser in result.losers] == [
        ("b2", LossReason.LOST_TO_DEAL_BID),
        ("b3", LossReason.LOST_TO_HIGHER_BID),
    ]


def test_equal_bids_go_to_the_earlier_response_then_the_earlier_bid() -> None:
    first = checked(body(bid(4.0, "early")), terms("a"))
    second = checked(body(bid(4.0, "late")), terms("b"))
    assert run_auction([first, second]).winner.bid.partner == "a"  # type: ignore[union-attr]
    assert run_auction([second, first]).winner.bid.partner == "b"  # type: ignore[union-attr]
    within = run_auction([checked(body(bid(4.0, "x"), bid(4.0, "y")))])
    assert within.winner is not None and within.winner.bid.bid.id == "x"


def test_the_direct_campaign_wins_a_tie() -> None:
    result = run_auction([checked(body(bid(4.0)))], direct_cpm_micros=4_000_000)
    assert result.direct_won and result.winner is None
    assert [(loser.loss, loser.min_to_win_micros) for loser in result.losers] == [
        (LossReason.LOST_TO_HIGHER_BID, 4_000_000)
    ]


def test_a_higher_direct_cpm_beats_every_bid() -> None:
    result = run_auction(
        [checked(body(bid(4.0)), terms("a")), checked(body(bid(5.0)), terms("b"))],
        direct_cpm_micros=5_500_000,
    )
    assert result.direct_won and result.winner is None
    assert [loser.bid.partner for loser in result.losers] == ["a", "b"]


def test_a_bid_above_the_direct_cpm_wins() -> None:
    result = run_auction([checked(body(bid(4.01)))], direct_cpm_micros=4_000_000)
    assert not result.direct_won
    assert result.winner is not None and result.winner.min_to_win_micros == 4_000_000


def test_with_no_valid_bid_the_direct_campaign_fills_or_nothing_does() -> None:
    dropped = checked(body(bid(1.0)))
    direct = run_auction([dropped], direct_cpm_micros=1_000_000)
    assert (direct.winner, direct.direct_won, direct.losers) == (None, True, ())
    assert [drop.reason for drop in direct.drops] == ["below_floor"]
    nothing = run_auction([dropped])
    assert (nothing.winner, nothing.direct_won) == (None, False)
    assert run_auction([]) == run_auction([], direct_cpm_micros=None)


def test_partners_in_different_currencies_cannot_share_an_auction() -> None:
    with pytest.raises(ValueError, match="currency"):
        run_auction([checked(None, terms("a")), checked(None, terms("b", currency="EUR", deals=()))])


Loss = LossReason
NO_PRICE = b'{"id": "req-1", "seatbid": [{"bid": [{"id": "b", "impid": "1"}]}]}'
EUR_ONLY = terms(currency="EUR", deals=())
BIG_VAST = "<VAST>" + " " * MAX_ADM_BYTES + "</VAST>"
DROP_CASES: dict[str, tuple[bytes | None, PartnerTerms | None, DropReason, LossReason | None]] = {
    "204 without body": (None, None, "no_bid", None),
    "empty body": (b"", None, "no_bid", None),
    "blank body": (b" \n", None, "no_bid", None),
    "no seatbid": (b'{"id": "req-1"}', None, "no_bid", None),
    "no bid with reason": (b'{"id": "req-1", "seatbid": [], "nbr": 2}', None, "no_bid", None),
    "seat without bids": (b'{"id": "req-1", "seatbid": [{"bid": []}]}', None, "no_bid", None),
    "not json": (b"{not json", None, "bad_json", None),
    "html error page": (b"<html>502</html>", None, "bad_json", None),
    "json array": (b"[]", None, "bad_json", None),
    "id of the wrong type": (b'{"id": 5}', None, "bad_json", None),
    "bid without price": (NO_PRICE, None, "bad_json", None),
    "invalid utf-8": (b'{"id": "\xff\xfe"}', None, "bad_json", None),
    "ext nested 1,000 deep": (
        b'{"id": "req-1", "ext": ' + b"[" * 1000 + b"]" * 1000 + b"}",
        None,
        "bad_json",
        None,
    ),
    "unknown member nested 100,000 deep": (
        b'{"id": "req-1", "unknown": ' + b"[" * 100_000 + b"]" * 100_000 + b"}",
        None,
        "bad_json",
        None,
    ),
    "price out of float range": (body(bid(3.0)).replace(b"3.0", b"1e999"), None, "bad_json", None),
    "response too large": (b" " * (MAX_RESPONSE_BYTES + 1), None, "too_large", None),
    "another auction": (body(bid(3.0), id="req-0"), None, "wrong_request_id", Loss.INVALID_AUCTION_ID),
    "another currency": (body(bid(3.0), cur="EUR"), None, "wrong_currency", Loss.INVALID_BID_RESPONSE),
    "missing cur is USD": (body(bid(3.0)), EUR_ONLY, "wrong_currency", Loss.INVALID_BID_RESPONSE),
    "another impression": (body(bid(3.0, impid="2")), None, "wrong_imp", Loss.INVALID_BID_RESPONSE),
    "zero price": (body(bid(0)), terms(floor_cpm_micros=0), "bad_price", Loss.INVALID_BID_RESPONSE),
    "negative price": (body(bid(-1.0)), None, "bad_price", Loss.INVALID_BID_RESPONSE),
    "absurd price": (body(bid(1.7976931348623157e308)), None, "bad_price", Loss.INVALID_BID_RESPONSE),
    "unknown deal": (body(bid(3.0, dealid="x")), None, "unknown_deal", Loss.INVALID_DEAL_ID),
    "deal buyer": (body(bid(7.0, dealid="gold"), seat="s"), None, "deal_buyer", Loss.BUYER_SEAT_BLOCKED),
    "below floor": (body(bid(1.0)), None, "below_floor", Loss.BELOW_AUCTION_FLOOR),
    "blocked domain": (
        body(bid(3.0, adomain=["casino.example"])),
        None,
        "blocked_domain",
        Loss.CREATIVE_FILTERED_ADVERTISER_EXCLUSIONS,
    ),
    "blocked subdomain as url": (
        body(bid(3.0, adomain=["https://WWW.Shop.Casino.example/x"])),
        None,
        "blocked_domain",
        Loss.CREATIVE_FILTERED_ADVERTISER_EXCLUSIONS,
    ),
    "no markup and no nurl": (body(bid(3.0, adm=None)), None, "no_creative", Loss.MISSING_MARKUP),
    "nurl that is no url": (
        body(bid(3.0, adm=None, nurl="javascript:alert(1)")),
        None,
        "no_creative",
        Loss.MISSING_MARKUP,
    ),
    "nurl serving markup on an undeclared host": (
        body(bid(3.0, adm=None, nurl="http://127.0.0.1:6379/ad")),
        None,
        "notice_host",
        Loss.INVALID_BID_RESPONSE,
    ),
    "nurl serving markup with user info": (
        body(bid(3.0, adm=None, nurl="https://user:pw@dsp.example/ad")),
        None,
        "notice_userinfo",
        Loss.INVALID_BID_RESPONSE,
    ),
    "nurl serving markup too long": (
        body(bid(3.0, adm=None, nurl="https://dsp.example/ad?" + "x" * MAX_NOTICE_BYTES)),
        None,
        "notice_too_long",
        Loss.INVALID_BID_RESPONSE,
    ),
    "nurl serving markup with no host": (
        body(bid(3.0, adm=None, nurl="https:///ad")),
        None,
        "notice_malformed",
        Loss.INVALID_BID_RESPONSE,
    ),
    "html markup": (
        body(bid(3.0, adm="<div><img src='x'></div>")),
        None,
        "not_vast",
        Loss.CREATIVE_FILTERED_INCORRECT_FORMAT,
    ),
    "xml that is not vast": (
        body(bid(3.0, adm='<?xml version="1.0"?><html/>')),
        None,
        "not_vast",
        Loss.CREATIVE_FILTERED_INCORRECT_FORMAT,
    ),
    "markup too large": (body(bid(3.0, adm=BIG_VAST)), None, "too_large", Loss.CREATIVE_FILTERED_GENERAL),
    "entity bomb markup": (body(bid(3.0, adm=laughs())), None, "unsafe_markup", None),
    "markup too deep": (body(bid(3.0, adm=nested(MAX_DEPTH + 1))), None, "unsafe_markup", None),
}


@pytest.mark.parametrize("case", DROP_CASES)
def test_a_bid_that_may_not_compete_is_dropped_with_its_reason_and_loss_code(case: str) -> None:
    answer, partner, reason, loss = DROP_CASES[case]
    result = checked(answer, partner)
    assert result.bids == ()
    assert [(drop.partner, drop.request_id, drop.reason, drop.loss) for drop in result.drops] == [
        ((partner or terms()).name, "req-1", reason, loss)
    ]
    assert result.drops[0].detail
    assert (result.drops[0].bid is None) == (loss is None)


APPROVAL_REASONS = {"creative_pending", "creative_rejected"}
"""Drops of the creative approval check (only_playable), which the exchange runs on checked answers."""
UNREACHABLE = {"notice_scheme"}
"""A nurl serving markup that is not http(s) is `no_creative` first: notice_scheme is a notice's drop only."""


def test_every_drop_reason_is_proven_by_a_case() -> None:
    assert {case[2] for case in DROP_CASES.values()} | APPROVAL_REASONS | UNREACHABLE == set(DROP_REASONS)


def test_bids_whose_creative_may_not_play_are_moved_to_the_drops_with_their_loss_codes() -> None:
    answer = checked(body(bid(3.0, "ok"), bid(4.0, "new"), bid(5.0, "banned")))
    held = {"new": "creative_pending", "banned": "creative_rejected"}
    result = only_playable(answer, lambda valid: held.get(valid.bid.id))  # type: ignore[arg-type, return-value]
    assert [b.bid.id for b in result.bids] == ["ok"]
    assert [(d.bid.id if d.bid else None, d.reason, d.loss) for d in result.drops] == [
        ("new", "creative_pending", Loss.CREATIVE_FILTERED_PENDING),
        ("banned", "creative_rejected", Loss.CREATIVE_FILTERED_DISAPPROVED),
    ]
    assert only_playable(answer, lambda valid: None) is answer


def test_each_bid_of_a_response_is_judged_on_its_own() -> None:
    answer = body(
        bid(3.0, "good"),
        bid(1.0, "cheap"),
        bid(3.0, "html", adm="<b>hi</b>"),
        bid(4.0, "nurl", adm=None, nurl="https://dsp.example/win"),
    )
    result = checked(answer)
    assert [valid.bid.id for valid in result.bids] == ["good", "nurl"]
    assert [(drop.bid.id if drop.bid else None, drop.reason) for drop in result.drops] == [
        ("cheap", "below_floor"),
        ("html", "not_vast"),
    ]


def test_a_domain_that_merely_ends_like_a_blocked_one_is_not_blocked() -> None:
    assert len(checked(body(bid(3.0, adomain=["notcasino.example"]))).bids) == 1


def test_a_response_without_cur_is_in_us_dollars() -> None:
    assert len(checked(body(bid(3.0)), terms(currency="USD")).bids) == 1


def test_markup_at_the_size_limit_is_accepted() -> None:
    adm = VAST.replace("</VAST>", " " * (MAX_ADM_BYTES - len(VAST.encode())) + "</VAST>")
    assert len(adm.encode()) == MAX_ADM_BYTES
    assert len(checked(body(bid(3.0, adm=adm))).bids) == 1


@pytest.mark.parametrize(
    ("markup", "vast"),
    [
        (VAST, True),
        ("\ufeff \n" + VAST.replace("<Ad ", "<!-- ad --><Ad "), True),
        (VAST.replace("InLine", "Wrapper"), True),
        ('<VAST version="2.0"></VAST>', False),
        ('<VAST version="2.0"/>', False),
        ('<VAST version="2.0"><Ad id="a"></Ad></VAST>', False),
        (VAST[:-20], False),
        ("<VASTly/>", False),
        ("<html><VAST></VAST></html>", False),
        ('<?xml version="1.0"?><vmap/>', False),
        ("https://cdn.example/ad.mp4", False),
    ],
)
def test_only_markup_adslot_can_serve_as_a_vast_ad_competes(markup: str, vast: bool) -> None:
    result = checked(body(bid(3.0, adm=markup)))
    assert len(result.bids) == (1 if vast else 0)
    if not vast:
        assert [drop.reason for drop in result.drops] == ["not_vast"]


@pytest.mark.parametrize(
    "garbage",
    [
        b"\x00\x01\x02",
        b'{"id": "\\ud800"}',
        b"{" * 100_000,
        b'{"id": "req-1", "seatbid": {"bid": 1}}',
        b"null",
        b'"id"',
        b"1e999999",
    ],
)
def test_garbage_from_a_partner_never_raises(garbage: bytes) -> None:
    assert only_drop(garbage)[0] == "bad_json"


def test_one_unsafe_markup_refuses_the_whole_answer_and_stops_its_checks_there() -> None:
    answer = body(bid(3.0, "good"), bid(3.0, "bomb", adm=laughs()), bid(3.0, "after", adm="<b>"))
    result = checked(answer)
    assert result.bids == ()
    assert [(drop.reason, drop.bid, drop.loss) for drop in result.drops] == [("unsafe_markup", None, None)]
    assert "document type declaration" in result.drops[0].detail


def vast_numbered(n: int, padding: int = 0) -> str:
    """A distinct VAST ad, `padding` bytes of title longer (bytes, not elements, fill the budget)."""
    title = "t" * padding
    return VAST.replace("<Impression/>", f"<Impression>https://dsp.example/i/{n:05}</Impression>").replace(
        "<AdTitle>spot", f"<AdTitle>spot{title}"
    )


def test_an_answer_checks_no_more_markup_than_its_budget_and_drops_the_rest_as_too_large() -> None:
    per_bid = len(vast_numbered(0, 8000).encode())
    n = ANSWER_BYTES // per_bid + 20
    assert n <= MAX_BIDS
    result = checked(body(*(bid(3.0, f"b{i}", adm=vast_numbered(i, 8000)) for i in range(n))))
    assert len(result.bids) == ANSWER_BYTES // per_bid
    assert {drop.reason for drop in result.drops} == {"too_large"}
    assert len(result.drops) == 20
    assert "budget" in result.drops[0].detail
    assert result.drops[0].loss == Loss.CREATIVE_FILTERED_GENERAL


def test_an_answer_meets_no_more_elements_than_its_budget() -> None:
    heavy = VAST.replace("<Impression/>", "<Impression/>" * (ANSWER_ELEMENTS // 3))
    result = checked(body(*(bid(3.0, f"b{i}", adm=heavy.replace('id="a"', f'id="{i}"')) for i in range(5))))
    per_markup = ANSWER_ELEMENTS // 3 + 7
    assert len(result.bids) == ANSWER_ELEMENTS // per_markup
    assert [drop.reason for drop in result.drops] == ["too_large"] * (5 - len(result.bids))


def test_a_markup_repeated_in_an_answer_is_parsed_once_and_spends_the_budget_once() -> None:
    markup = vast_numbered(0, 12_000)
    n = ANSWER_BYTES // len(markup.encode()) * 3
    assert n * len(markup.encode()) > ANSWER_BYTES and n <= MAX_BIDS
    result = checked(body(*(bid(3.0, f"b{i}", adm=markup) for i in range(n))))
    assert len(result.bids) == n and result.drops == ()


def test_verdicts_given_to_check_response_outlive_the_answer() -> None:
    markups = MarkupChecks()
    heavy = VAST.replace("<Impression/>", "<Impression/>" * (ANSWER_ELEMENTS - 10))
    first = check_response(Asked(terms(), "req-1"), body(bid(3.0, adm=heavy)), markups)
    answer = body(bid(3.0, adm=heavy), bid(3.0, "b2", adm=vast_numbered(1)))
    again = check_response(Asked(terms(), "req-1"), answer, markups)
    assert len(first.bids) == 1
    assert len(again.bids) == 2  # the first markup known: the whole budget left for the second


def test_bids_past_max_bids_are_one_drop_unjudged_without_a_loss_notice() -> None:
    answer = body(
        *(bid(3.0, f"b{i}", adm=vast_numbered(i), lurl="https://dsp.example/l") for i in range(900))
    )
    result = checked(answer)
    assert len(result.bids) == MAX_BIDS
    assert [(drop.reason, drop.bid, drop.loss) for drop in result.drops] == [("too_large", None, None)]
    assert f"{900 - MAX_BIDS} bids past the {MAX_BIDS}" in result.drops[0].detail
