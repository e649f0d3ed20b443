"""Wire shapes of the management API for advertisers, campaigns and creatives, with their constraints.

Shape and range are checked here, by msgspec, so that a bad value is a 400 `invalid_field` naming its path
(`caps[1].limit`); what needs more than one field or the database (a spend cap needs a cpm, a country must be
assigned) is checked by the repository. In a PATCH body an absent member stays as it is and a member that is
given replaces the stored one whole; `null` clears the members that may be empty.
"""

from __future__ import annotations

from typing import Annotated, Literal

import msgspec
from msgspec import UNSET, UnsetType

from adslot.fields import CountryCode, Id, Label, Latitude, Longitude, MimeType, Name, Timezone

Epoch = Annotated[int, msgspec.Meta(ge=0, le=253402300799)]
Positive = Annotated[int, msgspec.Meta(ge=1, le=100_000)]
MediaUrl = Annotated[str, msgspec.Meta(min_length=1, max_length=2048, pattern=r"^(https?://[^\s]+|/[^\s]*)$")]
CampaignStatus = Literal["active", "paused", "archived"]
CreativeStatus = Literal["active", "paused"]
Weight = Annotated[int, msgspec.Meta(ge=1, le=1_000_000)]
VenueTypeId = Annotated[str, msgspec.Meta(pattern=r"^[0-9]{1,3}(\.[0-9]{1,3}){0,3}$")]
"""An OpenOOH venue taxonomy id, e.g. "1" (transit), "1.1" or "1.1.2"."""
Sha256 = Annotated[str, msgspec.Meta(pattern=r"^[0-9a-f]{64}$")]
Tier = Literal["sponsorship", "standard", "house"]
Pacing = Literal["asap", "even"]
CapPeriod = Literal["lifetime", "daily"]
CapMetric = Literal["plays", "impressions", "spend"]
Day = Literal["mon", "tue", "wed", "thu", "fri", "sat", "sun"]
DAYS: tuple[Day, ...] = ("mon", "tue", "wed", "thu", "fri", "sat", "sun")
Amount = Annotated[float, msgspec.Meta(gt=0, le=1e12)]
"""A positive amount in the account currency; the repository allows at most 6 decimals (it stores micros)."""
CapLimit = Annotated[int, msgspec.Meta(ge=1, le=10**12)] | Amount
"""Plays and impressions are whole numbers; spend is an Amount."""


class AdvertiserIn(msgspec.Struct, forbid_unknown_fields=True):
    name: Name
    category: Label | None = None
    """Competitive separation keeps campaigns of one category apart on a screen."""


class Advertiser(msgspec.Struct):
    id: int
    name: str
    category: str | None
    created_at: int


class GeoRadius(msgspec.Struct, forbid_unknown_fields=True):
    latitude: Latitude
    longitude: Longitude
    radius_km: Annotated[float, msgspec.Meta(gt=0, le=20_040)]


class Geo(msgspec.Struct, forbid_unknown_fields=True):
    """One dimension: a venue matches when it is in any country, region or city listed, or any radius."""

    countries: Annotated[list[CountryCode], msgspec.Meta(max_length=300)] | None = None
    regions: Annotated[list[Label], msgspec.Meta(max_length=10_000)] | None = None
    cities: Annotated[list[Name], msgspec.Meta(max_length=10_000)] | None = None
    radius: Annotated[list[GeoRadius], msgspec.Meta(max_length=1_000)] | None = None


class ScreenRef(msgspec.Struct, forbid_unknown_fields=True):
    """One screen of one venue. Screen ids are the venue's own, so "s1" may name a screen in every venue."""

    venue_id: Id
    screen_id: Id


class TargetingRules(msgspec.Struct, forbid_unknown_fields=True):
    """Venue and screen criteria. As targeting, every dimension given must match (values within one
    dimension are alternatives); as exclusions, a match in any dimension excludes.

    In targeting, `venue_ids` is the campaign's venue list (the same as the campaign's top-level
    `venue_ids`): null runs it in every venue, and a PATCH whose targeting leaves `venue_ids` out keeps
    the list.

    Screens are one dimension, named two ways (either matching is a match): `screen_ids` names a screen id
    in every venue the campaign runs in, `screens` names one venue's screen.
    """

    venue_ids: Annotated[list[Id], msgspec.Meta(max_length=10000)] | UnsetType | None = UNSET
    venue_types: Annotated[list[VenueTypeId], msgspec.Meta(max_length=1_000)] | None = None
    venue_tags: Annotated[list[Label], msgspec.Meta(max_length=1_000)] | None = None
    geo: Geo | None = None
    screen_ids: Annotated[list[Id], msgspec.Meta(max_length=10_000)] | None = None
    screens: Annotated[list[ScreenRef], msgspec.Meta(max_length=10_000)] | None = None


class Daypart(msgspec.Struct, forbid_unknown_fields=True):
    """Hours start_hour up to end_hour on each day, in the venue's local time; an end_hour at or before
    start_hour runs past midnight into the next day."""

    days: Annotated[list[Day], msgspec.Meta(min_length=1, max_length=7)]
    start_hour: Annotated[int, msgspec.Meta(ge=0, le=23)]
    end_hour: Annotated[int, msgspec.Meta(ge=1, le=24)]


class Cap(msgspec.Struct, forbid_unknown_fields=True):
    """A goal that is also a hard limit: plays, impressions or spend (in the account currency), over the
    flight or per day of the campaign's timezone."""

    period: CapPeriod
    metric: CapMetric
    limit: CapLimit


class Frequency(msgspec.Struct, forbid_unknown_fields=True):
    """Plays of the campaign per screen: at most per_hour in a clock hour, per_day in a day."""

    per_hour: Annotated[int, msgspec.Meta(ge=1, le=3_600)] | None = None
    per_day: Annotated[int, msgspec.Meta(ge=1, le=86_400)] | None = None


Dayparts = Annotated[list[Daypart], msgspec.Meta(max_length=100)]
Caps = Annotated[list[Cap], msgspec.Meta(max_length=6)]
SeparationMinutes = Annotated[int, msgspec.Meta(ge=0, le=1_440)]
ShareOfVoice = Annotated[float, msgspec.Meta(gt=0, le=1)]
VenueIds = Annotated[list[Id], msgspec.Meta(max_length=10_000)]


class CampaignIn(msgspec.Struct, forbid_unknown_fields=True):
    advertiser_id: Annotated[int, msgspec.Meta(ge=1)]
    name: Name
    start_at: Epoch
    end_at: Epoch
    status: CampaignStatus = "active"
    venue_ids: VenueIds | None = None
    """Venues this campaign runs in; null runs it in every venue. The same list as targeting.venue_ids."""
    tier: Tier = "standard"
    """sponsorship outranks standard, which outranks house: a lower tier fills only what a higher leaves."""
    weight: Weight = 100
    """Share among campaigns of one tier that can fill the same slot."""
    timezone: Timezone = "UTC"
    """The campaign's clock: daily caps and even pacing count days in it."""
    targeting: TargetingRules | None = None
    exclusions: TargetingRules | None = None
    dayparts: Dayparts = []
    """When it plays, by venue-local day and hour; none means every hour."""
    caps: Caps = []
    cpm: Amount | None = None
    """Price per 1,000 impressions in the account currency; needed by spend caps."""
    pacing: Pacing = "asap"
    frequency: Frequency | None = None
    separation_minutes: SeparationMinutes = 0
    """Minutes between this campaign and another of its advertiser's category on one screen."""
    share_of_voice: ShareOfVoice | None = None
    """Fraction of the plays on the screens it targets, within its tier."""


class CampaignPatch(msgspec.Struct, forbid_unknown_fields=True):
    """Absent members stay as they are. `targeting` and `exclusions`, `dayparts` and `caps` are replaced
    whole; null clears cpm, frequency, share_of_voice, targeting and exclusions."""

    name: Name | None = None
    status: CampaignStatus | None = None
    start_at: Epoch | None = None
    end_at: Epoch | None = None
    venue_ids: VenueIds | None = None
    all_venues: bool | None = None
    tier: Tier | UnsetType = UNSET
    weight: Weight | UnsetType = UNSET
    timezone: Timezone | UnsetType = UNSET
    targeting: TargetingRules | UnsetType | None = UNSET
    exclusions: TargetingRules | UnsetType | None = UNSET
    dayparts: Dayparts | UnsetType = UNSET
    caps: Caps | UnsetType = UNSET
    cpm: Amount | UnsetType | None = UNSET
    pacing: Pacing | UnsetType = UNSET
    frequency: Frequency | UnsetType | None = UNSET
    separation_minutes: SeparationMinutes | UnsetType = UNSET
    share_of_voice: ShareOfVoice | UnsetType | None = UNSET


class CreativeIn(msgspec.Struct, forbid_unknown_fields=True):
    name: Name
    media_url: MediaUrl
    """An http(s) URL, or a path starting with / served by adslot under the environment's base URL."""
    mime_type: MimeType
    width: Positive
    height: Positive
    duration_seconds: Annotated[int, msgspec.Meta(ge=1, le=3600)]
    bitrate_kbps: Annotated[int, msgspec.Meta(ge=1, le=1_000_000)] | None = None
    weight: Weight = 100
    """Share among the campaign's active creatives."""
    size_bytes: Annotated[int, msgspec.Meta(ge=1, le=10**12)] | None = None
    sha256: Sha256 | None = None
    """Lower-case hex SHA-256 of the media file, so players can verify what they cached."""


class CreativePatch(msgspec.Struct, forbid_unknown_fields=True):
    name: Name | UnsetType = UNSET
    status: CreativeStatus | UnsetType = UNSET
    weight: Weight | UnsetType = UNSET


class Creative(msgspec.Struct):
    id: int
    campaign_id: int
    name: str
    media_url: str
    mime_type: str
    width: int
    height: int
    duration_seconds: int
    bitrate_kbps: int | None
    status: str
    created_at: int
    weight: int
    size_bytes: int | None
    sha256: str | None


class Campaign(msgspec.Struct):
    id: int
    advertiser_id: int
    name: str
    status: str
    start_at: int
    end_at: int
    all_venues: bool
    venue_ids: list[str]
    creatives: list[Creative]
    created_at: int
    tier: Tier
    weight: int
    timezone: str
    targeting: TargetingRules
    exclusions: TargetingRules
    dayparts: list[Daypart]
    caps: list[Cap]
    cpm: float | None
    pacing: Pacing
    frequency: Frequency | None
    separation_minutes: int
    share_of_voice: float | None
