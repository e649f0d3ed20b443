"""Which bids may compete for a slot, and which of them, or the direct campaign, wins it and at what price.

Pure: the partners' answers come in as bytes, already received (or None for a 204), and nothing here does
I/O or raises on what a partner sent. Every bid that may not compete is a `Drop` with its reason, counted
per partner, and with the OpenRTB loss code its `lurl` would carry.

Only the open tier reaches the auction: guaranteed tiers (sponsorships, reservations, caps, pacing) are
decided before it, and a slot they fill is never offered to a partner. The direct candidate here is the
open-tier campaign the decision chose, competing with its CPM.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Literal, get_args

import msgspec

from adslot.demand.bid_request import IMP_ID
from adslot.demand.notice_rules import NOTICE_FAULTS, NoticeRule, notice_fault
from adslot.demand.openrtb import Bid, BidResponse, LossReason
from adslot.demand.terms import AUCTION_CODES, Deal, PartnerTerms, to_cpm, to_micros
from adslot.vast.markup import (
    ANSWER_BYTES,
    ANSWER_ELEMENTS,
    Budget,
    MarkupChecks,
    NotVast,
    OverBudget,
    UnsafeMarkup,
)

DropReason = Literal[
    "bad_json",
    "too_large",
    "no_bid",
    "wrong_request_id",
    "wrong_currency",
    "wrong_imp",
    "bad_price",
    "unknown_deal",
    "deal_buyer",
    "below_floor",
    "blocked_domain",
    "no_creative",
    "not_vast",
    "unsafe_markup",
    "creative_pending",
    "creative_rejected",
    "notice_scheme",
    "notice_host",
    "notice_too_long",
    "notice_userinfo",
    "notice_malformed",
]
"""Why a response or a bid may not compete. For a whole response: `bad_json` (not a BidResponse), `too_large`
(over MAX_RESPONSE_BYTES), `no_bid` (204, empty body, no seatbid or no bid in it), `unsafe_markup` (a bid's
markup declares a DTD or entities, or nests too deep: the whole answer is refused there, the partner's
error). For one bid:
`wrong_request_id` (its response answers another request), `wrong_currency` (response `cur`, USD when
absent, is not the partner's), `wrong_imp`, `bad_price` (not in (0, MAX_CPM]), `unknown_deal`, `deal_buyer`
(its seat is not among the deal's buyers), `below_floor` (the deal's floor for a deal bid), `blocked_domain`,
`no_creative` (neither adm nor an http(s) nurl), `not_vast`, `too_large` (adm over MAX_ADM_BYTES, or past
what is left of the answer's markup budget, ANSWER_BYTES and ANSWER_ELEMENTS; and the bids past MAX_BIDS,
as one drop without a bid),
`creative_pending` (its crid awaits the media owner's approval), `creative_rejected` (the media owner
rejected it, or it cannot be held for approval: no crid), and for a bid without markup, served by its
`nurl`, the `NoticeFault` of that nurl (demand/notice_rules.py): a host its partner did not declare, and
so on; such a bid cannot play, so it never wins."""
DROP_REASONS: tuple[DropReason, ...] = get_args(DropReason)

MAX_RESPONSE_BYTES = 1024 * 1024
"""A larger body is dropped unread (`too_large`): decoding it would cost the slot's time budget."""
MAX_ADM_BYTES = 256 * 1024
"""A VAST document is a few KiB; markup beyond 256 KiB (UTF-8) is dropped as `too_large`, as it would be
stored with the ad request and served to the player."""
MAX_BIDS = 64
"""Bids judged in one answer (an answer bids on one imp): those past it are one `too_large` drop, unjudged,
so an answer of a thousand tiny bids costs no more than one of 64, and earns no thousand loss notices."""
MAX_CPM = 1_000_000
"""No honest CPM is higher (a partner's floor is at most this too); a larger price is `bad_price`, and could
not be held in micros."""
SECOND_PRICE_INCREMENT_MICROS = 10_000
"""0.01 of the currency: a second-price winner pays the price it had to beat plus this."""
_RESPONSE_DECODER = msgspec.json.Decoder(BidResponse)

_LOSS: dict[DropReason, LossReason] = {
    "wrong_request_id": LossReason.INVALID_AUCTION_ID,
    "wrong_currency": LossReason.INVALID_BID_RESPONSE,
    "wrong_imp": LossReason.INVALID_BID_RESPONSE,
    "bad_price": LossReason.INVALID_BID_RESPONSE,
    "unknown_deal": LossReason.INVALID_DEAL_ID,
    "deal_buyer": LossReason.BUYER_SEAT_BLOCKED,
    "below_floor": LossReason.BELOW_AUCTION_FLOOR,
    "blocked_domain": LossReason.CREATIVE_FILTERED_ADVERTISER_EXCLUSIONS,
    "no_creative": LossReason.MISSING_MARKUP,
    "not_vast": LossReason.CREATIVE_FILTERED_INCORRECT_FORMAT,
    "too_large": LossReason.CREATIVE_FILTERED_GENERAL,
    "creative_pending": LossReason.CREATIVE_FILTERED_PENDING,
    "creative_rejected": LossReason.CREATIVE_FILTERED_DISAPPROVED,
    **dict.fromkeys(NOTICE_FAULTS, LossReason.INVALID_BID_RESPONSE),
}
"""The loss code of a dropped bid; a drop of a whole response (bad_json, no_bid) has no bid to notify."""


@dataclass(frozen=True, slots=True)
class Asked:
    """What one partner was asked: its terms and the ids of the request it was sent."""

    terms: PartnerTerms
    request_id: str
    imp_id: str = IMP_ID


@dataclass(frozen=True, slots=True)
class ValidBid:
    partner: str
    request_id: str
    """The id of the request it answers: `${AUCTION_ID}` in its notices."""
    seat: str | None
    bid: Bid
    price_micros: int
    floor_micros: int
    """The floor the bid cleared: its deal's, or its partner's."""
    at: int
    """How it is priced if it wins: 1 first price, 2 second price, 3 its deal's fixed floor."""
    deal: Deal | None
    currency: str
    response_bid_id: str | None
    """`BidResponse.bidid`, which `${AUCTION_BID_ID}` stands for."""


@dataclass(frozen=True, slots=True)
class Drop:
    partner: str
    request_id: str
    reason: DropReason
    detail: str
    bid: Bid | None = None
    loss: LossReason | None = None


@dataclass(frozen=True, slots=True)
class Checked:
    """One partner's answer, sorted into the bids that compete and the drops."""

    asked: Asked
    bids: tuple[ValidBid, ...]
    drops: tuple[Drop, ...]


def check_response(asked: Asked, body: bytes | None, markups: MarkupChecks | None = None) -> Checked:
    """Sort one partner's answer; `body` is None or empty for a 204. Never raises on what the partner sent.

    Its bids' markups are checked within one Budget, through `markups` (remembered verdicts) when given: the
    answer costs bounded CPU however many bids it carries. The first unsafe markup ends the check there."""
    partner = asked.terms.name

    def dropped(reason: DropReason, detail: str) -> Checked:
        return Checked(asked, (), (Drop(partner, asked.request_id, reason, detail),))

    if body is not None and len(body) > MAX_RESPONSE_BYTES:
        return dropped("too_large", f"response of {len(body)} bytes exceeds {MAX_RESPONSE_BYTES}")
    if not body or not body.strip():
        return dropped("no_bid", "no content")
    try:
        response = _RESPONSE_DECODER.decode(body)
    except (msgspec.DecodeError, UnicodeDecodeError) as error:
        return dropped("bad_json", str(error))
    except RecursionError:  # msgspec decodes nesting recursively: a partner's 1,000-deep array
        return dropped("bad_json", "the response nests arrays or objects too deeply")
    offered = [(seat.seat, bid) for seat in response.seatbid or () for bid in seat.bid]
    if not offered:
        return dropped("no_bid", "no seatbid" if response.nbr is None else f"no bid, nbr {response.nbr}")
    bids: list[ValidBid] = []
    drops: list[Drop] = []
    if len(offered) > MAX_BIDS:
        detail = f"{len(offered) - MAX_BIDS} bids past the {MAX_BIDS} an answer may carry, not judged"
        drops.append(Drop(partner, asked.request_id, "too_large", detail))
        del offered[MAX_BIDS:]
    markup = _Markup(markups or MarkupChecks(), Budget())
    for seat, bid in offered:
        checked = _check_bid(asked, response, seat, bid, markup)
        if isinstance(checked, ValidBid):
            bids.append(checked)
        else:
            reason, detail = checked
            if reason == "unsafe_markup":
                return dropped(reason, detail)
            drops.append(Drop(partner, asked.request_id, reason, detail, bid, _loss(reason, bid)))
    return Checked(asked, tuple(bids), tuple(drops))


@dataclass(frozen=True, slots=True)
class _Markup:
    """How one answer's markups are checked: the verdicts known, and what is left of its budget."""

    checks: MarkupChecks
    budget: Budget


def _check_bid(
    asked: Asked, response: BidResponse, seat: str | None, bid: Bid, markup: _Markup
) -> ValidBid | tuple[DropReason, str]:
    """The first rule a bid breaks, or the bid as it competes; cheap rules first, markup last."""
    terms = asked.terms
    if response.id != asked.request_id:
        return "wrong_request_id", f"response id {response.id!r} answers no request sent"
    if response.cur.upper() != terms.currency.upper():
        return "wrong_currency", f"bid in {response.cur}, asked in {terms.currency}"
    if bid.impid != asked.imp_id:
        return "wrong_imp", f"impid {bid.impid!r} is not {asked.imp_id!r}"
    if not 0 < bid.price <= MAX_CPM:
        return "bad_price", f"price {bid.price} is not in (0, {MAX_CPM}]"
    deal = terms.deal(bid.dealid) if bid.dealid else None
    if bid.dealid and deal is None:
        return "unknown_deal", f"deal {bid.dealid!r} was not offered"
    if deal is not None and deal.buyer_seats and seat not in deal.buyer_seats:
        return "deal_buyer", f"seat {seat!r} may not buy deal {deal.id!r}"
    price = to_micros(bid.price)
    floor = deal.floor_cpm_micros if deal is not None else terms.floor_cpm_micros
    if price < floor:
        return "below_floor", f"price {bid.price} is below the floor {to_cpm(floor)}"
    blocked = _blocked_domain(bid.adomain, terms.blocked_domains)
    if blocked is not None:
        return "blocked_domain", f"advertiser domain {blocked!r} is blocked"
    creative_fault = _creative_fault(bid, markup, terms.notices)
    if creative_fault is not None:
        return creative_fault
    at = deal.at if deal is not None and deal.at is not None else AUCTION_CODES[terms.auction]
    return ValidBid(
        terms.name, asked.request_id, seat, bid, price, floor, at, deal, terms.currency, response.bidid
    )


def _loss(reason: DropReason, bid: Bid) -> LossReason | None:
    if reason == "below_floor" and bid.dealid:
        return LossReason.BELOW_DEAL_FLOOR
    return _LOSS.get(reason)


def _creative_fault(bid: Bid, markup: _Markup, notices: NoticeRule) -> tuple[DropReason, str] | None:
    """Markup must be VAST; without markup, the win notice must be a URL that can serve it (spec 4.3.1), on
    a host the partner declared for its notices."""
    if bid.adm:
        data = bid.adm.encode()
        if len(data) > MAX_ADM_BYTES:
            return "too_large", f"adm of {len(data)} bytes exceeds {MAX_ADM_BYTES}"
        try:
            markup.checks.check(data, markup.budget)
        except UnsafeMarkup as error:
            return "unsafe_markup", f"adm refused: {error}"
        except OverBudget as error:
            budget = f"{ANSWER_BYTES} bytes and {ANSWER_ELEMENTS} elements"
            return "too_large", f"adm past the answer's markup budget ({budget}): {error}"
        except NotVast as error:
            return "not_vast", f"adm is not a VAST ad adslot can serve: {error}"
        return None
    if not bid.nurl or not bid.nurl.lower().startswith(("https://", "http://")):
        return "no_creative", "neither adm nor an http(s) nurl"
    fault = notice_fault(bid.nurl, notices)
    if fault is not None:
        return fault, "its nurl, which serves its markup, may not be used: " + fault
    return None


def _blocked_domain(adomain: list[str] | None, blocked: frozenset[str]) -> str | None:
    """The first advertiser domain that is, or is under, a blocked one; bidders sometimes send URLs."""
    if not blocked:
        return None
    for value in adomain or ():
        domain = _domain(value)
        if any(domain == block or domain.endswith("." + block) for block in blocked):
            return value
    return None


def _domain(value: str) -> str:
    host = value.strip().lower().split("://", 1)[-1].split("/", 1)[0].rstrip(".")
    return host.removeprefix("www.")


def only_playable(checked: Checked, held: Callable[[ValidBid], DropReason | None]) -> Checked:
    """`checked` with the bids whose creative may not play (`held` names why: pending or rejected) moved to
    its drops, with their loss codes: the media owner's approval comes before any price."""
    kept: list[ValidBid] = []
    drops = list(checked.drops)
    for bid in checked.bids:
        reason = held(bid)
        if reason is None:
            kept.append(bid)
        else:
            crid = bid.bid.crid
            drops.append(
                Drop(bid.partner, bid.request_id, reason, f"creative {crid!r}", bid.bid, _LOSS[reason])
            )
    if len(kept) == len(checked.bids):
        return checked
    return Checked(checked.asked, tuple(kept), tuple(drops))


@dataclass(frozen=True, slots=True)
class Winner:
    bid: ValidBid
    price_micros: int
    """The clearing price, `${AUCTION_PRICE}`: a CPM in the bid's currency."""
    min_to_win_micros: int
    """`${AUCTION_MIN_TO_WIN}` for the winner: the next price (bid or direct CPM) or its floor if higher."""


@dataclass(frozen=True, slots=True)
class Loser:
    bid: ValidBid
    loss: LossReason
    min_to_win_micros: int
    """`${AUCTION_MIN_TO_WIN}` for a loser: what the winner paid, or the direct CPM that beat it."""


@dataclass(frozen=True, slots=True)
class AuctionResult:
    winner: Winner | None
    """None when the direct campaign won, or when nothing competed."""
    direct_won: bool
    losers: tuple[Loser, ...]
    drops: tuple[Drop, ...]


def run_auction(checked: Sequence[Checked], direct_cpm_micros: int | None = None) -> AuctionResult:
    """The best valid bid against the direct open-tier CPM (in the partners' currency), priced as its partner
    agreed.

    Ties are settled in a fixed order: the direct campaign wins a tie (a bid must beat it), and among equal
    bids the one from the response earlier in `checked` wins (the caller passes them in arrival order), then
    the earlier bid in that response. First price: the winner pays its bid. Second price: the highest of the
    next price (another bid or the direct CPM) and the winner's floor, plus 0.01, never more than its bid.
    A deal with `at` 3 pays its floor.
    """
    currencies = {item.asked.terms.currency for item in checked}
    if len(currencies) > 1:
        raise ValueError(f"one auction, one currency: the partners asked use {sorted(currencies)}")
    bids = [bid for item in checked for bid in item.bids]
    drops = tuple(drop for item in checked for drop in item.drops)
    best: ValidBid | None = None
    for bid in bids:
        if best is None or bid.price_micros > best.price_micros:
            best = bid
    if best is None:
        return AuctionResult(None, direct_cpm_micros is not None, (), drops)
    if direct_cpm_micros is not None and direct_cpm_micros >= best.price_micros:
        losers = tuple(Loser(bid, LossReason.LOST_TO_HIGHER_BID, direct_cpm_micros) for bid in bids)
        return AuctionResult(None, True, losers, drops)
    others = [bid.price_micros for bid in bids if bid is not best]
    if direct_cpm_micros is not None:
        others.append(direct_cpm_micros)
    to_beat = max([best.floor_micros, *others])
    winner = Winner(best, clearing_price(best, to_beat), to_beat)
    loss = LossReason.LOST_TO_DEAL_BID if best.deal is not None else LossReason.LOST_TO_HIGHER_BID
    losers = tuple(
        Loser(bid, LossReason.LOST_TO_HIGHER_BID if bid.deal is not None else loss, winner.price_micros)
        for bid in bids
        if bid is not best
    )
    return AuctionResult(winner, False, losers, drops)


def clearing_price(bid: ValidBid, to_beat_micros: int) -> int:
    """What the winning bid pays, given the highest of the other prices and its floor."""
    if bid.at == 3:
        return bid.floor_micros
    if bid.at == 2:
        return min(bid.price_micros, to_beat_micros + SECOND_PRICE_INCREMENT_MICROS)
    return bid.price_micros
