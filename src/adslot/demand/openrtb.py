"""OpenRTB 2.6 wire shapes: the parts of a bid request adslot sends and of a bid response it reads.

Only the attributes adslot uses are declared; msgspec ignores the rest on decoding, as the spec (section 2.6)
asks every receiver to tolerate unknown fields. Every optional attribute defaults to None and None is
omitted when encoding, so a value adslot sets (even 0) is always sent and nothing else is.
"""

from __future__ import annotations

from enum import IntEnum
from typing import Any

import msgspec

MILLISECONDS_2001 = 978_307_200_000
"""2001-01-01 in Unix milliseconds: an `imp.dt` below it was almost surely sent in seconds."""


class Qty(msgspec.Struct, omit_defaults=True):
    multiplier: float
    sourcetype: int | None = None
    vendor: str | None = None


class Video(msgspec.Struct, omit_defaults=True):
    mimes: list[str]
    minduration: int | None = None
    maxduration: int | None = None
    w: int | None = None
    h: int | None = None
    protocols: list[int] | None = None
    linearity: int | None = None
    skip: int | None = None
    boxingallowed: int | None = None


class Deal(msgspec.Struct, omit_defaults=True):
    id: str
    bidfloor: float | None = None
    bidfloorcur: str | None = None
    at: int | None = None
    wseat: list[str] | None = None


class Pmp(msgspec.Struct, omit_defaults=True):
    private_auction: int | None = None
    deals: list[Deal] | None = None


class Imp(msgspec.Struct, omit_defaults=True):
    id: str
    video: Video | None = None
    pmp: Pmp | None = None
    tagid: str | None = None
    bidfloor: float | None = None
    bidfloorcur: str | None = None
    exp: int | None = None
    qty: Qty | None = None
    dt: float | None = None
    ext: dict[str, Any] | None = None


class Geo(msgspec.Struct, omit_defaults=True):
    lat: float | None = None
    lon: float | None = None
    type: int | None = None
    country: str | None = None
    region: str | None = None
    city: str | None = None
    utcoffset: int | None = None


class Device(msgspec.Struct, omit_defaults=True):
    devicetype: int | None = None
    geo: Geo | None = None
    w: int | None = None
    h: int | None = None


class Publisher(msgspec.Struct, omit_defaults=True):
    id: str | None = None
    name: str | None = None
    domain: str | None = None


class Dooh(msgspec.Struct, omit_defaults=True):
    id: str | None = None
    name: str | None = None
    venuetype: list[str] | None = None
    venuetypetax: int | None = None
    publisher: Publisher | None = None
    domain: str | None = None
    keywords: str | None = None


class Source(msgspec.Struct, omit_defaults=True):
    tid: str | None = None


class BidRequest(msgspec.Struct, omit_defaults=True):
    id: str
    imp: list[Imp]
    dooh: Dooh | None = None
    site: dict[str, Any] | None = None
    """Never sent by adslot; declared so that a request carrying it is seen to break the one-medium rule."""
    app: dict[str, Any] | None = None
    """As `site`."""
    device: Device | None = None
    at: int | None = None
    tmax: int | None = None
    cur: list[str] | None = None
    badv: list[str] | None = None
    source: Source | None = None
    test: int | None = None
    ext: dict[str, Any] | None = None


class Bid(msgspec.Struct, omit_defaults=True):
    id: str
    impid: str
    price: float
    nurl: str | None = None
    burl: str | None = None
    lurl: str | None = None
    adm: str | None = None
    adid: str | None = None
    adomain: list[str] | None = None
    cid: str | None = None
    crid: str | None = None
    dealid: str | None = None
    w: int | None = None
    h: int | None = None
    exp: int | None = None
    dur: int | None = None


class SeatBid(msgspec.Struct, omit_defaults=True):
    bid: list[Bid]
    seat: str | None = None


class BidResponse(msgspec.Struct, omit_defaults=True):
    id: str
    seatbid: list[SeatBid] | None = None
    bidid: str | None = None
    cur: str = "USD"
    """The spec's default: a response without `cur` is in US dollars."""
    nbr: int | None = None


class LossReason(IntEnum):
    """OpenRTB 2.6 section 4.4 takes `${AUCTION_LOSS}` from the "Loss Reason Codes" list of OpenRTB 3.0."""

    BID_WON = 0
    INTERNAL_ERROR = 1
    IMPRESSION_OPPORTUNITY_EXPIRED = 2
    INVALID_BID_RESPONSE = 3
    INVALID_DEAL_ID = 4
    INVALID_AUCTION_ID = 5
    INVALID_ADVERTISER_DOMAIN = 6
    MISSING_MARKUP = 7
    MISSING_CREATIVE_ID = 8
    MISSING_BID_PRICE = 9
    MISSING_MINIMUM_CREATIVE_APPROVAL_DATA = 10
    BELOW_AUCTION_FLOOR = 100
    BELOW_DEAL_FLOOR = 101
    LOST_TO_HIGHER_BID = 102
    LOST_TO_DEAL_BID = 103
    BUYER_SEAT_BLOCKED = 104
    CREATIVE_FILTERED_GENERAL = 200
    CREATIVE_FILTERED_PENDING = 201
    CREATIVE_FILTERED_DISAPPROVED = 202
    CREATIVE_FILTERED_SIZE_NOT_ALLOWED = 203
    CREATIVE_FILTERED_INCORRECT_FORMAT = 204
    CREATIVE_FILTERED_ADVERTISER_EXCLUSIONS = 205
    CREATIVE_FILTERED_APP_STORE_ID_EXCLUSIONS = 206
    CREATIVE_FILTERED_NOT_SECURE = 207
    CREATIVE_FILTERED_LANGUAGE_EXCLUSIONS = 208
    CREATIVE_FILTERED_CATEGORY_EXCLUSIONS = 209
    CREATIVE_FILTERED_ATTRIBUTE_EXCLUSIONS = 210
    CREATIVE_FILTERED_AD_TYPE_EXCLUSIONS = 211
    CREATIVE_FILTERED_ANIMATION_TOO_LONG = 212
    CREATIVE_FILTERED_NOT_ALLOWED_IN_DEAL = 213
    CREATIVE_FILTERED_INVALID_SKADNETWORK = 214
    CREATIVE_FILTERED_APP_BUNDLE_EXCLUSIONS = 215


def spec_violations(request: BidRequest) -> list[str]:
    """The spec's rules that its JSON Schemas cannot check, one line per breach; empty when there is none.

    The schemas check types and required attributes only; these are what a DOOH request must also honour
    (sections 3.2.1, 3.2.31 and 3.2.4), so a request adslot sends, or one its test bidder receives, can be
    judged by them too.
    """
    found: list[str] = []
    media = [name for name in ("site", "app", "dooh") if getattr(request, name) is not None]
    if len(media) > 1:
        found.append(f"at most one of site, app and dooh may be present, not {' and '.join(media)}")
    for index, imp in enumerate(request.imp):
        if imp.qty is not None and imp.qty.sourcetype == 1 and not imp.qty.vendor:
            found.append(f"imp[{index}].qty: a vendor is required when sourcetype is 1")
        if imp.dt is not None and imp.dt < MILLISECONDS_2001:
            found.append(f"imp[{index}].dt: {imp.dt} is not a time in Unix milliseconds")
    return found
