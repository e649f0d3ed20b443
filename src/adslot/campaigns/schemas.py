"""Wire shapes of the management API for advertisers, campaigns and creatives, with their constraints."""

from __future__ import annotations

from typing import Annotated, Literal

import msgspec

Name = Annotated[str, msgspec.Meta(min_length=1, max_length=128, pattern=r"^[^\x00-\x1f\x7f]+$")]
Label = Annotated[str, msgspec.Meta(min_length=1, max_length=64, pattern=r"^[^\x00-\x1f\x7f]+$")]
"""Short labels (advertiser category, venue type): their columns hold 64 characters."""
Id = Annotated[str, msgspec.Meta(min_length=1, max_length=128, pattern=r"^[^\x00-\x1f\x7f]+$")]
Epoch = Annotated[int, msgspec.Meta(ge=0, le=253402300799)]
Positive = Annotated[int, msgspec.Meta(ge=1, le=100_000)]
MediaUrl = Annotated[str, msgspec.Meta(min_length=1, max_length=2048, pattern=r"^(https?://[^\s]+|/[^\s]*)$")]
MimeType = Annotated[str, msgspec.Meta(pattern=r"^video/[a-z0-9.+-]{1,40}$")]
CampaignStatus = Literal["active", "paused", "archived"]


class AdvertiserIn(msgspec.Struct, forbid_unknown_fields=True):
    name: Name
    category: Label | None = None


class Advertiser(msgspec.Struct):
    id: int
    name: str
    category: str | None
    created_at: int


class CampaignIn(msgspec.Struct, forbid_unknown_fields=True):
    advertiser_id: Annotated[int, msgspec.Meta(ge=1)]
    name: Name
    start_at: Epoch
    end_at: Epoch
    status: CampaignStatus = "active"
    venue_ids: Annotated[list[Id], msgspec.Meta(max_length=10_000)] | None = None
    """Venues this campaign runs in; null runs it in every venue."""


class CampaignPatch(msgspec.Struct, forbid_unknown_fields=True):
    name: Name | None = None
    status: CampaignStatus | None = None
    start_at: Epoch | None = None
    end_at: Epoch | None = None
    venue_ids: Annotated[list[Id], msgspec.Meta(max_length=10_000)] | None = None
    all_venues: bool | None = None


class CreativeIn(msgspec.Struct, forbid_unknown_fields=True):
    name: Name
    media_url: MediaUrl
    """An http(s) URL, or a path starting with / served by adslot under the environment's base URL."""
    mime_type: MimeType
    width: Positive
    height: Positive
    duration_seconds: Annotated[int, msgspec.Meta(ge=1, le=3600)]
    bitrate_kbps: Annotated[int, msgspec.Meta(ge=1, le=1_000_000)] | None = None


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
