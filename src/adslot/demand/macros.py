"""OpenRTB 2.6 substitution macros (section 4.4) in a bid's `nurl`, `burl`, `lurl` and `adm`.

Exchanges must substitute every macro they have data for, in notice URLs and in markup alike; a macro whose
value is absent becomes the empty string, and "AUDIT" stands in for every value when markup is rendered for
a test or a review. Values are percent-encoded, whether they land in a notice URL or in markup, where macros
sit in tracking URLs: a bidder's own ids (seat, ad id) then cannot break the URL, nor the VAST XML around
it, which adslot serves to its players.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from urllib.parse import quote

from adslot.demand.auction import Drop, Loser, ValidBid, Winner
from adslot.demand.terms import MICROS

MACROS = (
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
"""Every macro of OpenRTB 2.6 (release 2.6-202606), section 4.4."""
AUDIT = "AUDIT"
_MACRO = re.compile(r"\$\{(AUCTION_[A-Z_]+)(:[^}]*)?\}")
_DECIMALS = 6


@dataclass(frozen=True, slots=True)
class MacroValues:
    """What adslot knows when it fires one notice; None for what it does not (the macro becomes empty)."""

    auction_id: str | None = None
    bid_id: str | None = None
    imp_id: str | None = None
    seat_id: str | None = None
    ad_id: str | None = None
    price_micros: int | None = None
    currency: str | None = None
    mbr: float | None = None
    loss: int | None = None
    min_to_win_micros: int | None = None
    multiplier: float | None = None
    """Impressions won; at most the `qty.multiplier` of the request."""
    imp_ts_ms: int | None = None
    """When the ad played, in Unix milliseconds: DOOH notices come late, so the time is sent, not implied."""
    discount_pct: float | None = None
    discount_cpm_micros: int | None = None

    def text(self, macro: str) -> str | None:
        """The value of one macro as the spec writes it; None when absent (or the macro is not the spec's)."""
        match macro:
            case "AUCTION_ID":
                return self.auction_id
            case "AUCTION_BID_ID":
                return self.bid_id
            case "AUCTION_IMP_ID":
                return self.imp_id
            case "AUCTION_SEAT_ID":
                return self.seat_id
            case "AUCTION_AD_ID":
                return self.ad_id
            case "AUCTION_PRICE":
                return _micros_text(self.price_micros)
            case "AUCTION_CURRENCY":
                return self.currency
            case "AUCTION_MBR":
                return _number_text(self.mbr)
            case "AUCTION_LOSS":
                return None if self.loss is None else str(int(self.loss))
            case "AUCTION_MIN_TO_WIN":
                return _micros_text(self.min_to_win_micros)
            case "AUCTION_MULTIPLIER":
                return _number_text(self.multiplier)
            case "AUCTION_IMP_TS":
                return None if self.imp_ts_ms is None else str(self.imp_ts_ms)
            case "AUCTION_DISCOUNT_PCT":
                return _number_text(self.discount_pct)
            case "AUCTION_DISCOUNT_CPM":
                return _micros_text(self.discount_cpm_micros)
        return None


def substitute(template: str, values: MacroValues, *, audit: bool = False) -> str:
    """`template` with every OpenRTB macro replaced by its percent-encoded value.

    A `${AUCTION_...}` name the spec does not define is left as it is: it is not adslot's to touch. A macro
    asking for an encoding (`${AUCTION_PRICE:B64}`) is emptied: the algorithm is one agreed per partner, and
    adslot has agreed none, so it sends no value rather than the value in clear.
    """

    def value(match: re.Match[str]) -> str:
        name, encoding = match.group(1), match.group(2)
        if name not in MACROS:
            return match.group(0)
        if audit:
            return AUDIT
        if encoding is not None:
            return ""
        found = values.text(name)
        return "" if found is None else quote(found, safe="")

    return _MACRO.sub(value, template)


def win_values(
    winner: Winner, *, multiplier: float | None = None, imp_ts_ms: int | None = None
) -> MacroValues:
    """For the winner's `nurl`, `adm` and (with the play's multiplier and time) its `burl`."""
    bid = winner.bid
    return MacroValues(
        auction_id=bid.request_id,
        bid_id=bid.response_bid_id,
        imp_id=bid.bid.impid,
        seat_id=bid.seat,
        ad_id=bid.bid.adid,
        currency=bid.currency,
        price_micros=winner.price_micros,
        mbr=winner.price_micros / bid.price_micros,
        loss=0,
        min_to_win_micros=winner.min_to_win_micros,
        multiplier=multiplier,
        imp_ts_ms=imp_ts_ms,
        discount_pct=0.0,
        discount_cpm_micros=0,
    )


def loss_values(loser: Loser) -> MacroValues:
    """For a losing bid's `lurl`: no price (it cleared nothing), its loss code and the price that won."""
    return replace(
        _bid_values(loser.bid),
        loss=int(loser.loss),
        min_to_win_micros=loser.min_to_win_micros,
    )


def drop_values(drop: Drop) -> MacroValues:
    """For a dropped bid's `lurl`: why it could not compete; no price, no minimum to win (4.4.1)."""
    bid = drop.bid
    return MacroValues(
        auction_id=drop.request_id,
        imp_id=bid.impid if bid is not None else None,
        ad_id=bid.adid if bid is not None else None,
        loss=None if drop.loss is None else int(drop.loss),
    )


def _bid_values(bid: ValidBid) -> MacroValues:
    return MacroValues(
        auction_id=bid.request_id,
        bid_id=bid.response_bid_id,
        imp_id=bid.bid.impid,
        seat_id=bid.seat,
        ad_id=bid.bid.adid,
        currency=bid.currency,
    )


def _micros_text(micros: int | None) -> str | None:
    """2_510_000 as "2.51": the CPM in the bid's own units, without float noise."""
    if micros is None:
        return None
    sign = "-" if micros < 0 else ""
    whole, fraction = divmod(abs(micros), MICROS)
    return f"{sign}{whole}.{fraction:06d}".rstrip("0").rstrip(".")


def _number_text(number: float | None) -> str | None:
    if number is None:
        return None
    return f"{number:.{_DECIMALS}f}".rstrip("0").rstrip(".")
