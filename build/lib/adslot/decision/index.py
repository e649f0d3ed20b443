"""The compiled, immutable view of live campaigns that a decision reads, built off the hot path.

A decision must cost about the same with 10 or 10,000 live campaigns, so nothing here scans the catalog per
request:

- building posts each campaign under one of its venue targeting dimensions (every non-empty dimension must
  match, so any one of them finds every venue the campaign can match);
- the first request for a venue unions the postings that venue can hit, applies the full targeting and
  exclusions, and memoizes the result (``candidates``);
- the first request for a kind of screen in that venue keeps the campaigns the screen allows with the
  creatives that fit it, grouped by tier with cumulative weights for a bisecting draw (``screen_pools``);
- between two flight boundaries and within one hour of the week, the campaigns in flight and in daypart do not
  change, so that subset is memoized too (``ScreenPools.eligible_tiers``). What is left per request is a
  bisect and the caller's ``exclude`` and ``accept``.

Screens share memo entries when they cannot differ: only the screen ids that some campaign targets or excludes
are told apart (any other id is allowed exactly where a request without a screen is), and fit depends only on
the screen's declared size, orientation, formats and maximum duration.

The memo caches are dicts with a size cap that evict their oldest entry. The index serves one event loop; a
race between threads would at worst compute an entry twice.
"""

from __future__ import annotations

import math
from array import array
from bisect import bisect_right
from collections.abc import Iterable
from dataclasses import dataclass
from itertools import accumulate
from typing import TypeVar

from adslot.decision.fit import fits
from adslot.decision.model import (
    TIERS,
    Creative,
    GeoRadius,
    LiveCampaign,
    ScreenProfile,
    Targeting,
    Tier,
    VenueProfile,
)
from adslot.decision.targeting import (
    EARTH_RADIUS_KM,
    has_geography,
    screen_allowed,
    screen_venues,
    upper_countries,
    venue_excluded,
    venue_matches,
)

__all__ = [
    "Candidate",
    "Choice",
    "Creative",
    "DecisionIndex",
    "FitKey",
    "LiveCampaign",
    "ScreenPools",
    "TierPool",
]

DEFAULT_CACHE_SIZE = 16_384
"""Venues, and (venue, kind of screen) pairs, kept compiled: a network's whole active footprint, typically."""

WINDOWS_PER_SCREEN = 4
"""Eligible subsets kept per screen pool: the current hour, the next one for look-ahead play times, and a
flight that starts or ends within the hour."""

Cell = tuple[int, int]
"""A 1° x 1° cell of latitude and longitude: a radius campaign is posted on each cell its circle touches."""

MAX_RADIUS_CELLS = 64
"""A radius touching more cells (hundreds of kilometres, or near a pole) is checked at every venue instead."""

_MARGIN_RADIANS = 1e-6

FitKey = tuple[int | None, int | None, str | None, frozenset[str] | None, int | None] | None
"""What ``fits`` reads of a screen; None for a request without a screen profile."""

K = TypeVar("K")
V = TypeVar("V")

_NO_BOUNDARY = 1 << 62
"""Beyond any epoch second; an int, so that comparisons with play_time stay int to int."""

_TIER_RANK: dict[str, int] = {tier: rank for rank, tier in enumerate(TIERS)}


@dataclass(frozen=True, slots=True)
class Choice:
    """What fills a slot. Defined here, and re-exported by ``choose``, so that every candidate can carry its
    choices ready-made: building a frozen dataclass per decision would cost as much as the rest of it."""

    campaign: LiveCampaign
    creative: Creative


@dataclass(frozen=True, slots=True)
class Candidate:
    """A campaign as it can fill slots on one kind of screen: fitting creatives, ready for a weighted draw.

    The flight and hours are copied out of the campaign so that the hot loop reads one object, not two.
    """

    campaign: LiveCampaign
    choices: tuple[Choice, ...]
    """One per creative that fits, with a positive weight."""
    creative_cumulative: array[float]
    """Running sums of creative weights. Arrays of doubles, not tuples of floats: a bisect then reads one
    contiguous buffer instead of a float object per probe, which matters once the catalog outgrows the CPU
    caches."""
    id: int
    start_at: int
    end_at: int
    hours_of_week: int
    share: float
    """Share of voice clamped to (0, 1]; 0.0 for a campaign drawn by weight."""

    @property
    def creatives(self) -> tuple[Creative, ...]:
        return tuple(choice.creative for choice in self.choices)


@dataclass(frozen=True, slots=True)
class TierPool:
    """One tier's candidates, weight-drawn and share-of-voice apart, each with its cumulative sums."""

    tier: Tier
    weighted: tuple[Candidate, ...]
    weight_cumulative: array[float]
    sov: tuple[Candidate, ...]
    sov_cumulative: array[float]
    sov_total: float

    def all(self) -> tuple[Candidate, ...]:
        return self.weighted + self.sov

    @classmethod
    def of(cls, tier: Tier, candidates: Iterable[Candidate]) -> TierPool:
        weighted: list[Candidate] = []
        sov: list[Candidate] = []
        for candidate in candidates:
            (sov if candidate.share > 0 else weighted).append(candidate)
        sov_cumulative = array("d", accumulate(c.share for c in sov))
        return cls(
            tier=tier,
            weighted=tuple(weighted),
            weight_cumulative=array("d", accumulate(float(c.campaign.weight) for c in weighted)),
            sov=tuple(sov),
            sov_cumulative=sov_cumulative,
            sov_total=sov_cumulative[-1] if sov_cumulative else 0.0,
        )


class ScreenPools:
    """What may play on one kind of screen in one venue (or in the venue when the request names no screen)."""

    __slots__ = ("_last", "_windows", "boundaries", "tiers", "venue")

    def __init__(self, venue: VenueProfile, tiers: tuple[TierPool, ...]) -> None:
        self.venue = venue
        self.tiers = tiers
        """Non-empty tiers in TIERS order, with every candidate whatever its flight and hours."""
        self.boundaries: tuple[int, ...] = tuple(
            sorted({t for pool in tiers for c in pool.all() for t in (c.start_at, c.end_at)})
        )
        """Every flight start and end: between two of them, the set of campaigns in flight cannot change."""
        self._windows: dict[tuple[int, int], tuple[TierPool, ...]] = {}
        self._last: tuple[int, int, int, tuple[TierPool, ...]] = (-1, 0, 0, ())
        """The window answered last, with its hour and flight interval: most requests for a screen ask for the
        same hour, and comparing three numbers is cheaper than a bisect and a dict lookup. One tuple, replaced
        whole, so that a reader never sees half an update."""

    def eligible_tiers(self, play_time: int, hour_of_week: int) -> tuple[TierPool, ...]:
        """The non-empty tiers restricted to candidates in flight at play_time and active in that hour."""
        hour, low, high, window = self._last
        if hour == hour_of_week and low <= play_time < high:
            return window
        boundaries = self.boundaries
        interval = bisect_right(boundaries, play_time)
        low = boundaries[interval - 1] if interval else -_NO_BOUNDARY
        high = boundaries[interval] if interval < len(boundaries) else _NO_BOUNDARY
        key = (hour_of_week, interval)
        found = self._windows.get(key)
        if found is None:
            found = self._window(play_time, hour_of_week)
            _remember(self._windows, key, found, WINDOWS_PER_SCREEN)
        self._last = (hour_of_week, low, high, found)
        return found

    def _window(self, play_time: int, hour_of_week: int) -> tuple[TierPool, ...]:
        bit = 1 << hour_of_week
        return tuple(
            pool
            for pool in (
                TierPool.of(
                    tier.tier,
                    (c for c in tier.all() if c.start_at <= play_time < c.end_at and c.hours_of_week & bit),
                )
                for tier in self.tiers
            )
            if pool.weighted or pool.sov
        )


class DecisionIndex:
    """Live campaigns posted by venue targeting dimension, with per-venue and per-screen memos."""

    __slots__ = (
        "_by_cell",
        "_by_city",
        "_by_country",
        "_by_region",
        "_by_tag",
        "_by_type",
        "_by_venue_id",
        "_cache_size",
        "_everywhere",
        "_fitted",
        "_named_screens",
        "_screens",
        "_venues",
        "_wide_radius",
        "campaigns",
    )

    def __init__(self, campaigns: dict[int, LiveCampaign], cache_size: int = DEFAULT_CACHE_SIZE) -> None:
        """Use ``build``, which checks the campaigns; this only compiles them."""
        self.campaigns = campaigns
        """Every campaign that can ever be a candidate (it has creatives), by id."""
        self._cache_size = max(1, cache_size)
        self._by_venue_id: dict[str, list[int]] = {}
        self._by_type: dict[str, list[int]] = {}
        self._by_tag: dict[str, list[int]] = {}
        self._by_country: dict[str, list[int]] = {}
        self._by_region: dict[str, list[int]] = {}
        self._by_city: dict[str, list[int]] = {}
        self._by_cell: dict[Cell, list[int]] = {}
        wide_radius: list[int] = []
        everywhere: list[int] = []
        named: set[str] = set()
        for campaign in campaigns.values():
            self._post(campaign, wide_radius, everywhere)
            for criteria in (campaign.targeting, campaign.exclusions):
                named.update(criteria.screen_ids)
                named.update(screen_id for _, screen_id in criteria.screens)
        self._wide_radius = tuple(wide_radius)
        self._everywhere = tuple(everywhere)
        self._named_screens = frozenset(named)
        self._venues: dict[str, tuple[VenueProfile, tuple[LiveCampaign, ...]]] = {}
        self._screens: dict[tuple[str, str | None, FitKey], ScreenPools] = {}
        self._fitted: dict[FitKey, dict[int, Candidate | None]] = {}

    @classmethod
    def build(
        cls, campaigns: Iterable[LiveCampaign], *, cache_size: int = DEFAULT_CACHE_SIZE
    ) -> DecisionIndex:
        """Campaigns without creatives are left out: they can never fill a slot.

        Raises ``ValueError`` on a duplicate id or an unknown tier, which only a bug in the catalog produces.
        """
        kept: dict[int, LiveCampaign] = {}
        seen: set[int] = set()
        for campaign in campaigns:
            if campaign.tier not in _TIER_RANK:
                raise ValueError(f"campaign {campaign.id} has unknown tier {campaign.tier!r}")
            if campaign.id in seen:
                raise ValueError(f"campaign {campaign.id} appears twice")
            seen.add(campaign.id)
            if campaign.creatives:
                kept[campaign.id] = campaign
        return cls(kept, cache_size)

    def candidates(self, venue: VenueProfile) -> tuple[LiveCampaign, ...]:
        """Campaigns whose venue targeting matches and exclusions do not, in TIERS order, then by id.

        Memoized per venue id; a different profile under the same id (the venue was edited) is recomputed.
        """
        found = self._venues.get(venue.venue_id)
        if found is not None and (found[0] is venue or found[0] == venue):
            return found[1]
        computed = self._compute_candidates(venue)
        _remember(self._venues, venue.venue_id, (venue, computed), self._cache_size)
        return computed

    def screen_pools(
        self, venue: VenueProfile, screen_id: str | None, screen: ScreenProfile | None
    ) -> ScreenPools:
        """The venue's candidates that this screen allows, with the creatives that fit it, by tier."""
        named = screen_id if screen_id in self._named_screens else None
        fit = fit_key(screen)
        key = (venue.venue_id, named, fit)
        found = self._screens.get(key)
        if found is not None and (found.venue is venue or found.venue == venue):
            return found
        pools = ScreenPools(venue, self._compute_tiers(venue, named, screen, fit))
        _remember(self._screens, key, pools, self._cache_size)
        return pools

    def _post(self, campaign: LiveCampaign, wide_radius: list[int], everywhere: list[int]) -> None:
        """One dimension is enough, as every non-empty one must match: the one likely to hold fewest venues.

        Venue ids first (named, or those of the (venue, screen) pairs a campaign sold on screens only names);
        then a geography of cities, regions and radii small enough to post on the grid; then
        tags and types; then a geography with countries or a radius too wide for the grid; else everywhere.
        """
        targeting = campaign.targeting
        cells = _geography_cells(targeting)
        narrow_geography = has_geography(targeting) and not targeting.countries and cells is not None
        screens_in = screen_venues(targeting)
        if targeting.venue_ids:
            _post(self._by_venue_id, targeting.venue_ids, campaign.id)
        elif screens_in is not None:
            _post(self._by_venue_id, screens_in, campaign.id)
        elif narrow_geography:
            self._post_geography(campaign.id, targeting, cells, wide_radius)
        elif targeting.venue_tags:
            _post(self._by_tag, targeting.venue_tags, campaign.id)
        elif targeting.venue_types:
            _post(self._by_type, targeting.venue_types, campaign.id)
        elif has_geography(targeting):
            self._post_geography(campaign.id, targeting, cells, wide_radius)
        else:
            everywhere.append(campaign.id)

    def _post_geography(
        self, campaign_id: int, targeting: Targeting, cells: list[Cell] | None, wide_radius: list[int]
    ) -> None:
        _post(self._by_country, upper_countries(targeting), campaign_id)
        _post(self._by_region, targeting.regions, campaign_id)
        _post(self._by_city, targeting.cities, campaign_id)
        if cells is None:
            wide_radius.append(campaign_id)
        else:
            _post(self._by_cell, cells, campaign_id)

    def _compute_candidates(self, venue: VenueProfile) -> tuple[LiveCampaign, ...]:
        ids: set[int] = set(self._everywhere)
        ids.update(self._by_venue_id.get(venue.venue_id, ()))
        if venue.venue_type is not None:
            ids.update(self._by_type.get(venue.venue_type, ()))
        for tag in venue.tags:
            ids.update(self._by_tag.get(tag, ()))
        if venue.country is not None:
            ids.update(self._by_country.get(venue.country.upper(), ()))
        if venue.region is not None:
            ids.update(self._by_region.get(venue.region, ()))
        if venue.city is not None:
            ids.update(self._by_city.get(venue.city, ()))
        latitude, longitude = venue.latitude, venue.longitude
        if latitude is not None and longitude is not None and math.isfinite(latitude + longitude):
            ids.update(self._wide_radius)
            ids.update(self._by_cell.get(cell_of(latitude, longitude), ()))
        kept = [
            campaign
            for campaign in (self.campaigns[i] for i in ids)
            if venue_matches(campaign.targeting, venue) and not venue_excluded(campaign.exclusions, venue)
        ]
        kept.sort(key=lambda c: (_TIER_RANK[c.tier], c.id))
        return tuple(kept)

    def _compute_tiers(
        self, venue: VenueProfile, screen_id: str | None, screen: ScreenProfile | None, fit: FitKey
    ) -> tuple[TierPool, ...]:
        fitted = self._fitted.get(fit)
        if fitted is None:
            fitted = {}
            _remember(self._fitted, fit, fitted, self._cache_size)
        by_tier: dict[Tier, list[Candidate]] = {}
        for campaign in self.candidates(venue):
            if not screen_allowed(campaign, venue.venue_id, screen_id):
                continue
            if campaign.id in fitted:
                candidate = fitted[campaign.id]
            else:
                candidate = fitted[campaign.id] = _candidate(campaign, screen)
            if candidate is not None:
                by_tier.setdefault(campaign.tier, []).append(candidate)
        return tuple(TierPool.of(tier, by_tier[tier]) for tier in TIERS if tier in by_tier)


def cell_of(latitude: float, longitude: float) -> Cell:
    """Whole degrees; latitude 90 joins the row below it, longitude wraps to [-180, 180)."""
    row = min(math.floor(latitude), 89)
    column = (math.floor(longitude) + 180) % 360 - 180
    return row, column


def radius_cells(radius: GeoRadius) -> list[Cell] | None:
    """Every grid cell that the radius's circle may touch, or None when that is more than MAX_RADIUS_CELLS.

    The circle's latitude span is exactly its angular radius either side; its longitude span is
    asin(sin(r) / cos(latitude)) either side unless it contains a pole. A small margin covers rounding; a
    cell too many only costs one distance check.
    """
    angular = radius.radius_km / EARTH_RADIUS_KM
    if not (angular >= 0 and math.isfinite(radius.latitude) and math.isfinite(radius.longitude)):
        return []  # a negative or NaN radius, or a centre off the map, contains no point at all
    centre = math.radians(radius.latitude)
    if angular + _MARGIN_RADIANS >= math.pi / 2 - abs(centre):
        return None
    half_width = math.asin(min(1.0, math.sin(angular) / math.cos(centre))) + _MARGIN_RADIANS
    south = max(-90.0, math.degrees(centre - angular - _MARGIN_RADIANS))
    north = min(90.0, math.degrees(centre + angular + _MARGIN_RADIANS))
    west = radius.longitude - math.degrees(half_width)
    east = radius.longitude + math.degrees(half_width)
    rows = range(min(math.floor(south), 89), min(math.floor(north), 89) + 1)
    columns = range(math.floor(west), math.floor(east) + 1)
    if len(rows) * len(columns) > MAX_RADIUS_CELLS:
        return None
    return [(row, (column + 180) % 360 - 180) for row in rows for column in columns]


def _geography_cells(targeting: Targeting) -> list[Cell] | None:
    """The grid cells of all the targeting's radii; None when one of them is too wide for the grid."""
    cells: list[Cell] = []
    for radius in targeting.radii:
        mine = radius_cells(radius)
        if mine is None:
            return None
        cells.extend(mine)
    return cells


def fit_key(screen: ScreenProfile | None) -> FitKey:
    if screen is None:
        return None
    return (screen.width, screen.height, screen.orientation, screen.mime_types, screen.max_duration_seconds)


def _candidate(campaign: LiveCampaign, screen: ScreenProfile | None) -> Candidate | None:
    """None when the campaign can never be drawn on this kind of screen.

    A weight (campaign or creative) of 0 or less is how a buyer pauses without deleting, so it never plays;
    likewise a share of voice that is not positive.
    """
    share = campaign.share_of_voice
    if share is not None:
        if not share > 0:  # also rejects NaN
            return None
        share = min(share, 1.0)
    elif campaign.weight <= 0:
        return None
    creatives = tuple(c for c in campaign.creatives if c.weight > 0 and fits(c, screen))
    if not creatives:
        return None
    return Candidate(
        campaign=campaign,
        choices=tuple(Choice(campaign, creative) for creative in creatives),
        creative_cumulative=array("d", accumulate(float(c.weight) for c in creatives)),
        id=campaign.id,
        start_at=campaign.start_at,
        end_at=campaign.end_at,
        hours_of_week=campaign.hours_of_week,
        share=share or 0.0,
    )


def _post(postings: dict[K, list[int]], keys: Iterable[K], campaign_id: int) -> None:
    for key in keys:
        postings.setdefault(key, []).append(campaign_id)


def _remember(cache: dict[K, V], key: K, value: V, size: int) -> None:
    cache.pop(key, None)
    while len(cache) >= size:
        del cache[next(iter(cache))]
    cache[key] = value
