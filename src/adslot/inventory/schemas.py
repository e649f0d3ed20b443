"""Wire shapes of the management API for venues and screens."""

from __future__ import annotations

from typing import Annotated

import msgspec

from adslot.campaigns.schemas import Id, Label, Name

Timezone = Annotated[str, msgspec.Meta(min_length=1, max_length=64, pattern=r"^[A-Za-z0-9_+\-/]+$")]
Latitude = Annotated[float, msgspec.Meta(ge=-90, le=90)]
Longitude = Annotated[float, msgspec.Meta(ge=-180, le=180)]
Pixels = Annotated[int, msgspec.Meta(ge=1, le=100_000)]


class VenueIn(msgspec.Struct, forbid_unknown_fields=True):
    venue_id: Id
    name: Name
    timezone: Timezone = "UTC"
    latitude: Latitude | None = None
    longitude: Longitude | None = None
    venue_type: Label | None = None


class VenuePatch(msgspec.Struct, forbid_unknown_fields=True):
    name: Name | None = None
    timezone: Timezone | None = None
    latitude: Latitude | None = None
    longitude: Longitude | None = None
    venue_type: Label | None = None


class ScreenIn(msgspec.Struct, forbid_unknown_fields=True):
    screen_id: Id
    name: Name | None = None
    width: Pixels | None = None
    height: Pixels | None = None


class Screen(msgspec.Struct):
    venue_id: str
    screen_id: str
    name: str | None
    width: int | None
    height: int | None
    created_at: int


class Venue(msgspec.Struct):
    venue_id: str
    name: str
    timezone: str
    latitude: float | None
    longitude: float | None
    venue_type: str | None
    created_at: int
    screens: list[Screen]
