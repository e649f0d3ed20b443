"""Wire shapes of the reports: what the API answers and the OpenAPI document describes.

A delivery row carries only the dimensions it was grouped by (the others are left out, not null), then the
metrics; msgspec's UNSET leaves a field out of the encoded object.
"""

from __future__ import annotations

from typing import Literal

import msgspec
from msgspec import UNSET, UnsetType


class InvalidCounts(msgspec.Struct):
    """Fires the invalid-traffic rules flagged, per rule: kept, never counted as plays or billed."""

    too_fast: int
    """Quartiles closer together than the creative's duration allows."""
    out_of_order: int
    """An event played before one that comes earlier in a play."""
    foreign_network: int
    """From another network than its ad request's."""
    burst: int
    """One of too many first impressions from one network in a short time."""


class Metrics(msgspec.Struct, kw_only=True):
    """Delivery figures of one group (or of the whole report, as its totals)."""

    requests: int | None
    """Ad requests, filled or not (request_stats); null when not attributable: see the endpoint docs."""
    fills: int
    """Filled ad requests (one per ad_requests row)."""
    fill_rate: float | None
    """fills / requests, rounded to 4 decimals; null when requests is null or 0."""
    plays: int
    """Filled ad requests whose impression was counted."""
    impressions: float
    """Audience impressions delivered: the sum of each play's worth, rounded to 3 decimals."""
    starts: int
    first_quartiles: int
    midpoints: int
    third_quartiles: int
    completes: int
    completion_rate: float | None
    """completes / starts, rounded to 4 decimals; null when there was no start."""
    late: int
    """Event fires that arrived after the ad request expired (kept, never counted)."""
    duplicates: int
    """Repeated fires of an already counted event."""
    expired: int
    """Ad requests whose expiry passed unplayed (and that the player did not release)."""
    released: int
    """Ad requests the player gave back before play."""
    invalid: InvalidCounts
    """Fires the invalid-traffic rules flagged, per rule (CSV: an invalid_<rule> column each)."""
    direct_plays: int
    """Plays of the environment's own campaigns."""
    programmatic_plays: int
    """Plays of ad requests a demand partner won (no campaign): plays = direct_plays + programmatic_plays."""


class DeliveryRow(Metrics, kw_only=True):
    campaign_id: int | Literal["programmatic"] | UnsetType = UNSET
    """"programmatic" for the ad requests demand partners won (they have no campaign)."""
    creative_id: int | Literal["programmatic"] | UnsetType = UNSET
    """"programmatic" for the ad requests demand partners won (their creative is the partner's)."""
    venue_id: str | UnsetType = UNSET
    screen_id: str | UnsetType | None = UNSET
    """null for ad requests that named no screen."""
    day: str | UnsetType = UNSET
    """The local date (YYYY-MM-DD) in the report's time zone."""
    hour: str | UnsetType = UNSET
    """The local hour's start, ISO 8601 with its UTC offset (so a repeated DST hour is two distinct rows)."""


class Filters(msgspec.Struct):
    campaign_id: int | None
    venue_id: str | None
    screen_id: str | None


class DeliveryReport(msgspec.Struct, kw_only=True):
    from_: int = msgspec.field(name="from")
    """The report covers play times from `from` (included) to `to` (excluded), UTC epoch seconds."""
    to: int
    timezone: str
    group_by: list[str]
    filters: Filters
    rows: list[DeliveryRow]
    totals: Metrics


class DeliveryEnvelope(msgspec.Struct):
    status: int
    data: DeliveryReport


class PlayRow(msgspec.Struct):
    """One played ad request: its Proof-of-Play record as a flat row (times are UTC epoch seconds)."""

    ad_request_uuid: str
    venue_id: str
    screen_id: str | None
    play_time: int
    campaign_id: int | None
    """null for an ad request a demand partner won."""
    creative_id: int | None
    impressions: float
    impression_at: int | None
    start_at: int | None
    first_quartile_at: int | None
    midpoint_at: int | None
    third_quartile_at: int | None
    complete_at: int | None
    duplicate_count: int
    late_count: int


PLAY_COLUMNS = tuple(PlayRow.__struct_fields__)


class PlaylogPage(msgspec.Struct, kw_only=True):
    venue_id: str
    screen_id: str | None
    from_: int = msgspec.field(name="from")
    to: int
    rows: list[PlayRow]
    next_cursor: str | None
    """Pass as `cursor` (with the same venue, screen, from and to) for the next page; null on the last."""


class PlaylogEnvelope(msgspec.Struct):
    status: int
    data: PlaylogPage


class DemandMetrics(msgspec.Struct, kw_only=True):
    """What one demand partner was asked, answered and won in an hour (or the whole report, as its total)."""

    requests: int
    """Bid requests sent (skipped asks are not requests)."""
    bids: int
    """Answers with at least one bid that could compete."""
    bid_rate: float | None
    """bids / requests, rounded to 4 decimals; null when requests is 0."""
    no_bids: int
    """Answers without a bid (204, an empty body, no bid in it)."""
    dropped: int
    """Answers of which no bid could compete (garbage, too large, every bid dropped)."""
    timeouts: int
    errors: int
    errors_by_reason: dict[str, int]
    """errors per reason (connect, http_500, protocol, read...)."""
    drops: dict[str, int]
    """Bids (or whole answers) dropped, per reason, every reason listed (a no-bid is not a drop)."""
    skipped_qps: int
    """Asks skipped because the partner was at its max_qps."""
    skipped_breaker: int
    """Asks skipped because the partner's circuit breaker was open."""
    lost: int
    """Bids that competed and lost the auction."""
    wins: int
    """Ad requests the partner won."""
    win_rate: float | None
    """wins / bids, rounded to 4 decimals; null when bids is 0."""
    plays: int
    """Wins whose impression was counted (once retention deleted the ad request: whose billing came due)."""
    spend: float | None
    """Sum over plays of clearing CPM * impressions per play / 1000, in `currency`, rounded to 6 decimals;
    null when the wins were in several currencies."""
    avg_clearing_cpm: float | None
    """The average clearing price (CPM) of the wins, rounded to 6 decimals; null without wins or when they
    were in several currencies."""
    currency: str | None
    """The currency of the wins' prices; null without wins or when several."""
    billed: int
    """Wins whose billing notice (burl) was sent."""
    notices_dropped: int = 0
    """Notices (nurl, lurl, burl) not sent: their URL went to a host the partner did not declare, or was
    not http(s), too long, held user info or was no URL."""
    notice_drops: dict[str, int] = {}
    """notices_dropped per reason (notice_host, notice_scheme, notice_too_long, notice_userinfo,
    notice_malformed), every reason listed."""


class DemandRow(DemandMetrics, kw_only=True):
    partner: str
    hour: str
    """The hour's start in the report's time zone, ISO 8601 with its UTC offset."""


class DemandTotal(DemandMetrics, kw_only=True):
    partner: str


class DemandReport(msgspec.Struct, kw_only=True):
    from_: int = msgspec.field(name="from")
    """The report covers the UTC hours starting within [from, to), UTC epoch seconds."""
    to: int
    timezone: str
    rows: list[DemandRow]
    """One per partner and hour with anything to count, by partner then hour."""
    totals: list[DemandTotal]
    """One per partner of the rows, by partner."""


class DemandEnvelope(msgspec.Struct):
    status: int
    data: DemandReport
