"""What a media owner agreed with one demand partner: floor, currency, auction type, time budget, deals.

Money is in micros of the partner's currency (a CPM of 2.50 is 2_500_000), as campaigns store their CPM,
so floors and prices compare exactly. adslot converts no currency: a deal is priced in its partner's
currency, and the bids it accepts must be too.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from adslot.demand.notice_rules import NOTHING, NoticeRule

AuctionType = Literal["first", "second"]
AUCTION_CODES: dict[AuctionType, int] = {"first": 1, "second": 2}
"""OpenRTB `at` of a request: 1 first price, 2 second price plus an increment."""
DealAuction = Literal[1, 2, 3]
"""A deal's `at` may also be 3: its floor is the fixed price."""
MICROS = 1_000_000


def to_micros(cpm: float) -> int:
    """A CPM as sent on the wire (a float) in micros, rounded: 2.51 is 2_510_000, not 2_509_999."""
    return round(cpm * MICROS)


def to_cpm(micros: int) -> float:
    return micros / MICROS


@dataclass(frozen=True, slots=True)
class Deal:
    """A private-marketplace deal offered in `imp.pmp`, open to other bids too (`private_auction` 0)."""

    id: str
    floor_cpm_micros: int = 0
    buyer_seats: frozenset[str] = frozenset()
    """The seats (`seatbid.seat`) allowed to bid on it; empty allows every seat of the partner."""
    at: DealAuction | None = None
    """1 first price, 2 second price, 3 the floor is the fixed price; None follows the partner's auction."""
    currency: str | None = None
    """None: the partner's currency. Any other currency is refused, as adslot converts none."""


@dataclass(frozen=True, slots=True)
class PartnerTerms:
    name: str
    floor_cpm_micros: int = 0
    currency: str = "USD"
    auction: AuctionType = "first"
    tmax_ms: int = 150
    deals: tuple[Deal, ...] = ()
    blocked_domains: frozenset[str] = frozenset()
    """Advertiser domains (`adomain`) refused, each with its subdomains; sent as `badv` too."""
    notices: NoticeRule = NOTHING
    """Where its notices may go (demand/notice_rules.py); by default nowhere."""

    def __post_init__(self) -> None:
        """Terms are configuration: a wrong one is refused when it is written, not met in every auction."""
        if self.floor_cpm_micros < 0 or any(deal.floor_cpm_micros < 0 for deal in self.deals):
            raise ValueError("a floor cannot be negative")
        if self.tmax_ms <= 0:
            raise ValueError("tmax_ms must be positive")
        if len({deal.id for deal in self.deals}) != len(self.deals):
            raise ValueError("deal ids must be unique")
        for deal in self.deals:
            if deal.currency is not None and deal.currency != self.currency:
                raise ValueError(f"deal {deal.id} is in {deal.currency}, its partner in {self.currency}")

    def deal(self, deal_id: str) -> Deal | None:
        return next((deal for deal in self.deals if deal.id == deal_id), None)
