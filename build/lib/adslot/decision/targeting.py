"""Which venues and screens a campaign may play on: its targeting (every dimension must match) and its
exclusions (any dimension matching rules the venue out).

Country codes compare case-insensitively (ISO codes arrive as "de" or "DE"); venue types, tags, regions and
cities compare exactly, because they are the media owner's own vocabulary and "Mall" may deliberately differ
from "mall".
"""

from __future__ import annotations

import math

from adslot.decision.model import GeoRadius, LiveCampaign, Targeting, VenueProfile

EARTH_RADIUS_KM = 6371.0088
"""Mean Earth radius (IUGG); the spherical error is well under the precision anyone sells a radius at."""


def venue_matches(targeting: Targeting, venue: VenueProfile) -> bool:
    """Every non-empty venue dimension must match; screen ids are ``screen_allowed``'s concern, except that
    screens named only as (venue id, screen id) pairs confine the campaign to those pairs' venues."""
    if targeting.venue_ids and venue.venue_id not in targeting.venue_ids:
        return False
    confined = screen_venues(targeting)
    if confined is not None and venue.venue_id not in confined:
        return False
    if targeting.venue_types and venue.venue_type not in targeting.venue_types:
        return False
    if targeting.venue_tags and targeting.venue_tags.isdisjoint(venue.tags):
        return False
    return not has_geography(targeting) or geography_matches(targeting, venue)


def screen_venues(targeting: Targeting) -> frozenset[str] | None:
    """The venues a targeting's screens confine it to: those of its (venue id, screen id) pairs, unless it
    also names bare screen ids (a screen id in any venue) or no screens at all (None: not confined)."""
    if not targeting.screens or targeting.screen_ids:
        return None
    return frozenset(venue_id for venue_id, _ in targeting.screens)


def venue_excluded(exclusions: Targeting, venue: VenueProfile) -> bool:
    """Any venue dimension matching excludes; screen exclusions are ``screen_allowed``'s concern."""
    if venue.venue_id in exclusions.venue_ids:
        return True
    if venue.venue_type is not None and venue.venue_type in exclusions.venue_types:
        return True
    if not exclusions.venue_tags.isdisjoint(venue.tags):
        return True
    return has_geography(exclusions) and geography_matches(exclusions, venue)


def screen_allowed(campaign: LiveCampaign, venue_id: str, screen_id: str | None) -> bool:
    """A screen-targeted campaign was sold on named screens only: a request naming none cannot carry it."""
    targeting = campaign.targeting
    if (targeting.screen_ids or targeting.screens) and (
        screen_id is None or not _names_screen(targeting, venue_id, screen_id)
    ):
        return False
    return screen_id is None or not _names_screen(campaign.exclusions, venue_id, screen_id)


def _names_screen(criteria: Targeting, venue_id: str, screen_id: str) -> bool:
    return screen_id in criteria.screen_ids or (venue_id, screen_id) in criteria.screens


def has_geography(targeting: Targeting) -> bool:
    return bool(targeting.countries or targeting.regions or targeting.cities or targeting.radii)


def geography_matches(targeting: Targeting, venue: VenueProfile) -> bool:
    """Country, region, city and radius are alternatives of one place: any of them matching is a match."""
    if venue.country is not None and targeting.countries and _country_in(venue.country, targeting.countries):
        return True
    if venue.region is not None and venue.region in targeting.regions:
        return True
    if venue.city is not None and venue.city in targeting.cities:
        return True
    return any(within(radius, venue) for radius in targeting.radii)


def upper_countries(targeting: Targeting) -> frozenset[str]:
    return frozenset(country.upper() for country in targeting.countries)


def _country_in(country: str, countries: frozenset[str]) -> bool:
    """Exact first (the usual case, no allocation), then case-insensitively."""
    if country in countries:
        return True
    wanted = country.upper()
    return any(candidate.upper() == wanted for candidate in countries)


def within(radius: GeoRadius, venue: VenueProfile) -> bool:
    """A venue without coordinates is nowhere on the map, so no radius can contain it."""
    if venue.latitude is None or venue.longitude is None:
        return False
    return distance_km(radius.latitude, radius.longitude, venue.latitude, venue.longitude) <= radius.radius_km


def distance_km(lat1: float, lon1: float, lat2: float, lon2: float) -> float:
    """Great-circle (haversine) distance: stable for the short distances radii are drawn at."""
    phi1, phi2 = math.radians(lat1), math.radians(lat2)
    half_dphi = (phi2 - phi1) / 2
    half_dlambda = math.radians(lon2 - lon1) / 2
    a = math.sin(half_dphi) ** 2 + math.cos(phi1) * math.cos(phi2) * math.sin(half_dlambda) ** 2
    return 2 * EARTH_RADIUS_KM * math.asin(min(1.0, math.sqrt(a)))
