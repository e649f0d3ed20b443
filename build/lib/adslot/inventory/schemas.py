"""Wire shapes of the management API for venues and screens.

In a PATCH body an absent member stays as it is; null clears a member that may be empty (for name and
timezone, which may not, null leaves them as they are, as it always has).
"""

from __future__ import annotations

from typing import Annotated, Literal

import msgspec
from msgspec import UNSET, UnsetType

from adslot.fields import (
    CountryCode,
    Label,
    Latitude,
    Longitude,
    MimeType,
    Name,
    PathId,
    Timezone,
)

Pixels = Annotated[int, msgspec.Meta(ge=1, le=100_000)]
Orientation = Literal["landscape", "portrait", "square"]
Tags = Annotated[list[Label], msgspec.Meta(max_length=100)]
ImpressionsPerPlay = Annotated[float, msgspec.Meta(gt=0, le=1_000_000)]
"""People who see one play: the venue's audience multiplier."""
HourlyImpressions = Annotated[
    list[Annotated[float, msgspec.Meta(ge=0, le=1_000_000)]], msgspec.Meta(min_length=168, max_length=168)
]
"""Impressions per play for each venue-local hour of the week, Monday 00h first; overrides
impressions_per_play."""
MimeTypes = Annotated[list[MimeType], msgspec.Meta(min_length=1, max_length=20)]
MaxDuration = Annotated[int, msgspec.Meta(ge=1, le=3600)]
City = Name


class VenueIn(msgspec.Struct, forbid_unknown_fields=True):
    venue_id: PathId
    name: Name
    timezone: Timezone = "UTC"
    latitude: Latitude | None = None
    longitude: Longitude | None = None
    venue_type: Label | None = None
    """The OpenOOH venue taxonomy id (e.g. "1.1") that campaigns target by venue_types."""
    tags: Tags = []
    country: CountryCode | None = None
    """ISO 3166-1 alpha-2, stored in upper case."""
    region: Label | None = None
    city: City | None = None
    impressions_per_play: ImpressionsPerPlay = 1.0
    hourly_impressions: HourlyImpressions | None = None


class VenuePatch(msgspec.Struct, forbid_unknown_fields=True):
    name: Name | None = None
    timezone: Timezone | None = None
    latitude: Latitude | UnsetType | None = UNSET
    longitude: Longitude | UnsetType | None = UNSET
    venue_type: Label | UnsetType | None = UNSET
    tags: Tags | UnsetType = UNSET
    country: CountryCode | UnsetType | None = UNSET
    region: Label | UnsetType | None = UNSET
    city: City | UnsetType | None = UNSET
    impressions_per_play: ImpressionsPerPlay | UnsetType = UNSET
    hourly_impressions: HourlyImpressions | UnsetType | None = UNSET


class ScreenIn(msgspec.Struct, forbid_unknown_fields=True):
    screen_id: PathId
    name: Name | None = None
    width: Pixels | None = None
    height: Pixels | None = None
    orientation: Orientation | None = None
    mime_types: MimeTypes | None = None
    """The video types the player plays; null accepts any."""
    max_duration_seconds: MaxDuration | None = None


class ScreenPatch(msgspec.Struct, forbid_unknown_fields=True):
    name: Name | UnsetType | None = UNSET
    width: Pixels | UnsetType | None = UNSET
    height: Pixels | UnsetType | None = UNSET
    orientation: Orientation | UnsetType | None = UNSET
    mime_types: MimeTypes | UnsetType | None = UNSET
    max_duration_seconds: MaxDuration | UnsetType | None = UNSET


class Screen(msgspec.Struct):
    venue_id: str
    screen_id: str
    name: str | None
    width: int | None
    height: int | None
    created_at: int
    orientation: Orientation | None
    mime_types: list[str] | None
    max_duration_seconds: int | None


class Venue(msgspec.Struct):
    venue_id: str
    name: str
    timezone: str
    latitude: float | None
    longitude: float | None
    venue_type: str | None
    created_at: int
    screens: list[Screen]
    tags: list[str]
    country: str | None
    region: str | None
    city: str | None
    impressions_per_play: float
    hourly_impressions: list[float] | None


class ImportResult(msgspec.Struct):
    venues_created: int
    venues_updated: int
    screens_created: int
    screens_updated: int
