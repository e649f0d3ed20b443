"""What a decision reads: live campaigns with their rules, venues and screens, compiled off the hot path.

These are plain immutable values. The catalog builds them from the database; the decision engine, the claim
planner (caps, pacing, frequency, separation) and the creative manifest read them; none of them does I/O.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

Tier = Literal["sponsorship", "standard", "house"]
TIERS: tuple[Tier, ...] = ("sponsorship", "standard", "house")
"""Highest priority first: a lower tier fills a slot only when no higher tier can."""

Pacing = Literal["asap", "even"]
CapPeriod = Literal["lifetime", "daily"]
CapMetric = Literal["plays", "impressions", "spend"]
Orientation = Literal["landscape", "portrait", "square"]

HOURS_PER_WEEK = 168
ALL_HOURS = (1 << HOURS_PER_WEEK) - 1
"""A 168-bit mask with every hour of the week set; bit (weekday * 24 + hour), Monday = 0, venue-local."""


@dataclass(frozen=True, slots=True)
class Creative:
    id: int
    campaign_id: int
    name: str
    media_url: str
    mime_type: str
    width: int
    height: int
    duration_seconds: int
    bitrate_kbps: int | None
    weight: int = 100
    size_bytes: int | None = None
    sha256: str | None = None


@dataclass(frozen=True, slots=True)
class GeoRadius:
    latitude: float
    longitude: float
    radius_km: float


@dataclass(frozen=True, slots=True)
class Targeting:
    """Venue and screen criteria. As a targeting: every non-empty dimension must match (AND), any value
    within a dimension may match (OR); geography (countries, regions, cities, radii) is one dimension.
    As exclusions: a match in any dimension excludes. Screens are one dimension: a screen id in any venue
    (`screen_ids`) or a (venue id, screen id) pair (`screens`)."""

    venue_ids: frozenset[str] = frozenset()
    venue_types: frozenset[str] = frozenset()
    venue_tags: frozenset[str] = frozenset()
    countries: frozenset[str] = frozenset()
    regions: frozenset[str] = frozenset()
    cities: frozenset[str] = frozenset()
    radii: tuple[GeoRadius, ...] = ()
    screen_ids: frozenset[str] = frozenset()
    screens: frozenset[tuple[str, str]] = frozenset()


@dataclass(frozen=True, slots=True)
class Cap:
    """A goal that is also a hard limit: `limit` plays, impressions (thousandths of an impression: milli)
    or spend (micros of the account currency), per flight (`lifetime`) or per day of the campaign's
    timezone (`daily`)."""

    period: CapPeriod
    metric: CapMetric
    limit: int


@dataclass(frozen=True, slots=True)
class FrequencyCap:
    """Plays of this campaign per screen: at most `per_hour` per clock hour, `per_day` per local day."""

    per_hour: int | None = None
    per_day: int | None = None


@dataclass(frozen=True, slots=True)
class LiveCampaign:
    id: int
    advertiser_id: int
    name: str
    start_at: int
    end_at: int
    tier: Tier = "standard"
    weight: int = 100
    timezone: str = "UTC"
    """The campaign's clock: daily caps and even pacing count days and hours in it."""
    category: str | None = None
    """The advertiser's category, for competitive separation."""
    targeting: Targeting = field(default_factory=Targeting)
    exclusions: Targeting = field(default_factory=Targeting)
    hours_of_week: int = ALL_HOURS
    """Dayparts compiled to a 168-bit mask, evaluated at play_time in the venue's timezone."""
    caps: tuple[Cap, ...] = ()
    cpm_micros: int | None = None
    """Price per thousand impressions in micros; needed by spend caps."""
    pacing: Pacing = "asap"
    frequency: FrequencyCap | None = None
    separation_minutes: int = 0
    share_of_voice: float | None = None
    """Fraction (0, 1] of the plays on the screens it targets, within its tier."""
    creatives: tuple[Creative, ...] = ()


@dataclass(frozen=True, slots=True)
class VenueProfile:
    venue_id: str
    timezone: str = "UTC"
    venue_type: str | None = None
    tags: frozenset[str] = frozenset()
    country: str | None = None
    region: str | None = None
    city: str | None = None
    latitude: float | None = None
    longitude: float | None = None
    impressions_per_play: float = 1.0
    hourly_impressions: tuple[float, ...] | None = None
    """168 multipliers by venue-local hour of week (Monday 00h first); overrides impressions_per_play."""


@dataclass(frozen=True, slots=True)
class ScreenProfile:
    """What a registered screen accepts; None means no constraint."""

    venue_id: str
    screen_id: str
    width: int | None = None
    height: int | None = None
    orientation: Orientation | None = None
    mime_types: frozenset[str] | None = None
    max_duration_seconds: int | None = None
