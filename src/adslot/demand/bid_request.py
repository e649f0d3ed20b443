"""The OpenRTB 2.6 bid request for one slot of one ad request, as one demand partner is asked to bid on it.

The request describes a screen in a venue, not a person on a page: a `dooh` object (never `site` or `app`),
an out-of-home device at the venue's location, one video impression fitted to the screen and slot, and how
many people see one play (`imp.qty`), so that a CPM bid prices the whole play (implementation guide 7.9).
"""

from __future__ import annotations

import datetime
from dataclasses import dataclass

import msgspec

from adslot.decision.slot import zone
from adslot.demand import openrtb
from adslot.demand.countries import alpha3
from adslot.demand.terms import AUCTION_CODES, PartnerTerms, to_cpm

IMP_ID = "1"
"""The one impression of every request; a bid for any other is dropped."""
DEVICE_TYPE_OUT_OF_HOME = 8
"""AdCOM "Device Types": 8 is an out-of-home device."""
LOCATION_USER_PROVIDED = 3
"""AdCOM "Location Types": the venue's position is what the media owner registered, not a GPS fix."""
OPENOOH_VENUE_TAXONOMY_1_0 = 1
"""AdCOM "DOOH Venue Taxonomies": 1 is the OpenOOH Venue Taxonomy 1.0, the default of `venuetypetax`."""
MULTIPLIER_PUBLISHER_PROVIDED = 2
"""AdCOM "DOOH Multiplier Measurement Source Types": 0 unknown, 1 measurement vendor (then `vendor` is
required), 2 publisher, 3 exchange. A venue's impressions per play are entered by its media owner."""
VIDEO_PROTOCOLS = [2, 5]
"""VAST 2.0 and VAST 2.0 Wrapper: what adslot's players play, so the only markup a buyer should send."""
LINEAR = 1
MULTIPLIER_DECIMALS = 4
"""The precision of `qty.multiplier`: the guide (7.9.1) warns that buyer and seller rounding a fractional
multiplier differently is a billing discrepancy, so adslot rounds it once, here, and bills what it sent."""
DEFAULT_MIME_TYPES = ("video/mp4",)
"""What a screen that declares nothing is asked for: H.264 in MP4, which every DOOH player decodes."""


@dataclass(frozen=True, slots=True)
class Audience:
    """How many people see one play, and who says so."""

    multiplier: float
    source_type: int = MULTIPLIER_PUBLISHER_PROVIDED
    vendor: str | None = None
    """The measurement vendor's domain; required when source_type is 1."""

    def __post_init__(self) -> None:
        if not round(self.multiplier, MULTIPLIER_DECIMALS) > 0:
            raise ValueError(f"an audience multiplier must be positive at {MULTIPLIER_DECIMALS} decimals")
        if self.source_type == 1 and not self.vendor:
            raise ValueError("a vendor-measured audience (source_type 1) must name its vendor")


@dataclass(frozen=True, slots=True)
class Opportunity:
    """One slot of one ad request, offered to demand partners: what adslot knows of venue, screen and slot."""

    ad_request_uuid: str
    """Ties the auction to its ad request, and is never sent: it is a capability (whoever holds it fetches the
    VAST and fires the pixels), so a buyer must not learn it."""
    venue_id: str
    venue_name: str
    play_time: int
    """Unix seconds."""
    expires_at: int
    """Unix seconds: the end of the ad request's play window."""
    venue_type: str | None = None
    """An id of the venue taxonomy, e.g. OpenOOH "1.1"."""
    venue_taxonomy: int = OPENOOH_VENUE_TAXONOMY_1_0
    timezone: str = "UTC"
    latitude: float | None = None
    longitude: float | None = None
    country: str | None = None
    """ISO 3166-1 alpha-2, as venues store it; sent as alpha-3."""
    region: str | None = None
    city: str | None = None
    screen_id: str | None = None
    width: int | None = None
    height: int | None = None
    min_duration: int | None = None
    max_duration: int | None = None
    mime_types: tuple[str, ...] = DEFAULT_MIME_TYPES
    audience: Audience | None = None
    """None when the venue has no audience figure: the request then carries no `qty`."""

    def __post_init__(self) -> None:
        if not self.mime_types:
            raise ValueError("a video impression needs at least one MIME type")
        if (
            self.min_duration is not None
            and self.max_duration is not None
            and self.min_duration > self.max_duration
        ):
            raise ValueError("min_duration exceeds max_duration")


def build_bid_request(
    opportunity: Opportunity, terms: PartnerTerms, *, request_id: str, transaction_id: str, now: int
) -> openrtb.BidRequest:
    """The request one partner receives. `request_id` is fresh per partner (it is `${AUCTION_ID}` in that
    partner's notices); `transaction_id` (`source.tid`) is shared by every partner asked for this slot."""
    return openrtb.BidRequest(
        id=request_id,
        imp=[_imp(opportunity, terms, now)],
        dooh=_dooh(opportunity),
        device=_device(opportunity),
        at=AUCTION_CODES[terms.auction],
        tmax=terms.tmax_ms,
        cur=[terms.currency],
        badv=sorted(terms.blocked_domains) or None,
        source=openrtb.Source(tid=transaction_id),
    )


def encode_bid_request(request: openrtb.BidRequest) -> bytes:
    return msgspec.json.encode(request)


def _dooh(opportunity: Opportunity) -> openrtb.Dooh:
    known_type = opportunity.venue_type is not None
    return openrtb.Dooh(
        id=opportunity.venue_id,
        name=opportunity.venue_name,
        venuetype=[opportunity.venue_type] if opportunity.venue_type is not None else None,
        venuetypetax=opportunity.venue_taxonomy if known_type else None,
    )


def _device(opportunity: Opportunity) -> openrtb.Device:
    return openrtb.Device(
        devicetype=DEVICE_TYPE_OUT_OF_HOME, geo=_geo(opportunity), w=opportunity.width, h=opportunity.height
    )


def _geo(opportunity: Opportunity) -> openrtb.Geo:
    """lat/lon matter most: screens sit on private networks whose IP tells nothing of their place (7.9.2)."""
    located = opportunity.latitude is not None and opportunity.longitude is not None
    return openrtb.Geo(
        lat=opportunity.latitude if located else None,
        lon=opportunity.longitude if located else None,
        type=LOCATION_USER_PROVIDED if located else None,
        country=alpha3(opportunity.country),
        region=opportunity.region,
        city=opportunity.city,
        utcoffset=_utc_offset_minutes(opportunity.timezone, opportunity.play_time),
    )


def _utc_offset_minutes(tz_name: str, epoch: int) -> int:
    """The venue's offset at play time, not now: a slot after a DST change plays at the new offset."""
    offset = datetime.datetime.fromtimestamp(epoch, zone(tz_name)).utcoffset()
    return int(offset.total_seconds()) // 60 if offset is not None else 0


def _imp(opportunity: Opportunity, terms: PartnerTerms, now: int) -> openrtb.Imp:
    return openrtb.Imp(
        id=IMP_ID,
        video=_video(opportunity),
        pmp=_pmp(terms),
        tagid=opportunity.screen_id,
        bidfloor=to_cpm(terms.floor_cpm_micros),
        bidfloorcur=terms.currency,
        exp=max(0, opportunity.expires_at - now),
        qty=_qty(opportunity.audience),
        dt=opportunity.play_time * 1000,
    )


def _video(opportunity: Opportunity) -> openrtb.Video:
    """Sized to the screen when it is known, with no boxing: a letterboxed play is one the advertiser does not
    pay for (decision/fit.py refuses direct creatives for the same reason)."""
    sized = opportunity.width is not None and opportunity.height is not None
    return openrtb.Video(
        mimes=list(opportunity.mime_types),
        minduration=opportunity.min_duration,
        maxduration=opportunity.max_duration,
        w=opportunity.width if sized else None,
        h=opportunity.height if sized else None,
        protocols=VIDEO_PROTOCOLS,
        linearity=LINEAR,
        skip=0,
        boxingallowed=0 if sized else None,
    )


def _qty(audience: Audience | None) -> openrtb.Qty | None:
    if audience is None:
        return None
    return openrtb.Qty(
        multiplier=round(audience.multiplier, MULTIPLIER_DECIMALS),
        sourcetype=audience.source_type,
        vendor=audience.vendor,
    )


def _pmp(terms: PartnerTerms) -> openrtb.Pmp | None:
    if not terms.deals:
        return None
    deals = [
        openrtb.Deal(
            id=deal.id,
            bidfloor=to_cpm(deal.floor_cpm_micros),
            bidfloorcur=terms.currency,
            at=deal.at,
            wseat=sorted(deal.buyer_seats) or None,
        )
        for deal in terms.deals
    ]
    return openrtb.Pmp(private_auction=0, deals=deals)
