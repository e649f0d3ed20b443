"""Venue targeting (every dimension must match), exclusions (any dimension excludes) and screen targeting."""

from __future__ import annotations

import math

import pytest

from adslot.decision.model import GeoRadius, Targeting, VenueProfile
from adslot.decision.targeting import (
    distance_km,
    screen_allowed,
    screen_venues,
    venue_excluded,
    venue_matches,
)
from tests.decision.factories import campaign

BERLIN = (52.5200, 13.4050)
POTSDAM = (52.3906, 13.0645)  # about 27 km from Berlin's centre
HAMBURG = (53.5511, 9.9937)  # about 255 km

MALL = VenueProfile(
    "mall-1",
    venue_type="mall",
    tags=frozenset({"indoor", "premium"}),
    country="DE",
    region="DE-BE",
    city="Berlin",
    latitude=BERLIN[0],
    longitude=BERLIN[1],
)
NOWHERE = VenueProfile("bare")


def near_berlin(radius_km: float) -> GeoRadius:
    return GeoRadius(BERLIN[0], BERLIN[1], radius_km)


# --- distances --------------------------------------------------------------------------------------------


def test_one_degree_of_longitude_on_the_equator_is_a_360th_of_the_circumference() -> None:
    assert distance_km(0, 0, 0, 1) == pytest.approx(2 * math.pi * 6371.0088 / 360, rel=1e-9)


def test_distance_is_symmetric_and_zero_to_itself() -> None:
    assert distance_km(*BERLIN, *HAMBURG) == pytest.approx(distance_km(*HAMBURG, *BERLIN))
    assert distance_km(*BERLIN, *BERLIN) == 0


def test_berlin_to_hamburg_is_about_255_km() -> None:
    assert 250 < distance_km(*BERLIN, *HAMBURG) < 260


# --- targeting: each dimension ----------------------------------------------------------------------------


def test_empty_targeting_matches_every_venue() -> None:
    assert venue_matches(Targeting(), MALL)
    assert venue_matches(Targeting(), NOWHERE)


@pytest.mark.parametrize(
    ("targeting", "expected"),
    [
        (Targeting(venue_ids=frozenset({"mall-1", "x"})), True),
        (Targeting(venue_ids=frozenset({"mall-2"})), False),
        (Targeting(venue_types=frozenset({"mall", "airport"})), True),
        (Targeting(venue_types=frozenset({"airport"})), False),
        (Targeting(venue_types=frozenset({"Mall"})), False),
        (Targeting(venue_tags=frozenset({"premium", "outdoor"})), True),
        (Targeting(venue_tags=frozenset({"outdoor"})), False),
        (Targeting(venue_tags=frozenset({"Premium"})), False),
        (Targeting(countries=frozenset({"DE"})), True),
        (Targeting(countries=frozenset({"de"})), True),
        (Targeting(countries=frozenset({"FR"})), False),
        (Targeting(regions=frozenset({"DE-BE"})), True),
        (Targeting(regions=frozenset({"DE-HH"})), False),
        (Targeting(cities=frozenset({"Berlin"})), True),
        (Targeting(cities=frozenset({"Hamburg"})), False),
        (Targeting(radii=(GeoRadius(POTSDAM[0], POTSDAM[1], 30),)), True),
        (Targeting(radii=(GeoRadius(POTSDAM[0], POTSDAM[1], 20),)), False),
        (Targeting(radii=(GeoRadius(HAMBURG[0], HAMBURG[1], 50), near_berlin(1))), True),
    ],
    ids=lambda value: repr(value) if isinstance(value, bool) else "",
)
def test_each_targeting_dimension_matches_only_its_values(targeting: Targeting, expected: bool) -> None:
    assert venue_matches(targeting, MALL) is expected


def test_lowercase_venue_country_matches_an_uppercase_targeted_code() -> None:
    venue = VenueProfile("v", country="de")
    assert venue_matches(Targeting(countries=frozenset({"DE"})), venue)


def test_geography_kinds_are_alternatives_of_one_dimension() -> None:
    # Wrong country, but the city matches: geography is one dimension, so the venue matches.
    assert venue_matches(Targeting(countries=frozenset({"FR"}), cities=frozenset({"Berlin"})), MALL)
    # Wrong country and city, but within the radius.
    assert venue_matches(
        Targeting(countries=frozenset({"FR"}), cities=frozenset({"Paris"}), radii=(near_berlin(5),)), MALL
    )
    assert not venue_matches(
        Targeting(countries=frozenset({"FR"}), cities=frozenset({"Paris"}), regions=frozenset({"FR-IDF"})),
        MALL,
    )


def test_dimensions_are_combined_with_and() -> None:
    assert venue_matches(
        Targeting(
            venue_types=frozenset({"mall"}), venue_tags=frozenset({"indoor"}), countries=frozenset({"DE"})
        ),
        MALL,
    )
    assert not venue_matches(
        Targeting(
            venue_types=frozenset({"mall"}), venue_tags=frozenset({"indoor"}), countries=frozenset({"FR"})
        ),
        MALL,
    )
    assert not venue_matches(
        Targeting(venue_ids=frozenset({"mall-1"}), venue_types=frozenset({"airport"})), MALL
    )


def test_a_venue_without_the_targeted_attribute_does_not_match() -> None:
    for targeting in [
        Targeting(venue_types=frozenset({"mall"})),
        Targeting(venue_tags=frozenset({"indoor"})),
        Targeting(countries=frozenset({"DE"})),
        Targeting(regions=frozenset({"DE-BE"})),
        Targeting(cities=frozenset({"Berlin"})),
    ]:
        assert not venue_matches(targeting, NOWHERE), targeting


def test_a_venue_without_coordinates_is_never_within_a_radius() -> None:
    no_coordinates = VenueProfile("v", country="DE", city="Berlin")
    assert not venue_matches(Targeting(radii=(near_berlin(20_000),)), no_coordinates)
    only_latitude = VenueProfile("v", latitude=BERLIN[0])
    assert not venue_matches(Targeting(radii=(near_berlin(20_000),)), only_latitude)


def test_screen_ids_are_not_a_venue_dimension() -> None:
    assert venue_matches(Targeting(screen_ids=frozenset({"s9"})), MALL)


# --- exclusions: any dimension ----------------------------------------------------------------------------


def test_empty_exclusions_exclude_nothing() -> None:
    assert not venue_excluded(Targeting(), MALL)
    assert not venue_excluded(Targeting(), NOWHERE)


@pytest.mark.parametrize(
    ("exclusions", "expected"),
    [
        (Targeting(venue_ids=frozenset({"mall-1"})), True),
        (Targeting(venue_ids=frozenset({"mall-2"})), False),
        (Targeting(venue_types=frozenset({"mall"})), True),
        (Targeting(venue_types=frozenset({"airport"})), False),
        (Targeting(venue_tags=frozenset({"premium"})), True),
        (Targeting(venue_tags=frozenset({"outdoor"})), False),
        (Targeting(countries=frozenset({"de"})), True),
        (Targeting(countries=frozenset({"FR"})), False),
        (Targeting(regions=frozenset({"DE-BE"})), True),
        (Targeting(cities=frozenset({"Berlin"})), True),
        (Targeting(cities=frozenset({"Hamburg"})), False),
        (Targeting(radii=(GeoRadius(POTSDAM[0], POTSDAM[1], 30),)), True),
        (Targeting(radii=(GeoRadius(HAMBURG[0], HAMBURG[1], 100),)), False),
    ],
    ids=lambda value: repr(value) if isinstance(value, bool) else "",
)
def test_each_exclusion_dimension_excludes_only_its_values(exclusions: Targeting, expected: bool) -> None:
    assert venue_excluded(exclusions, MALL) is expected


def test_a_single_matching_dimension_is_enough_to_exclude() -> None:
    exclusions = Targeting(venue_types=frozenset({"airport"}), venue_tags=frozenset({"premium"}))
    assert venue_excluded(exclusions, MALL)


def test_exclusions_never_exclude_a_venue_lacking_the_attribute() -> None:
    exclusions = Targeting(
        venue_types=frozenset({"mall"}),
        countries=frozenset({"DE"}),
        regions=frozenset({"DE-BE"}),
        cities=frozenset({"Berlin"}),
        radii=(near_berlin(20_000),),
    )
    assert not venue_excluded(exclusions, NOWHERE)


def test_screen_exclusions_do_not_exclude_the_venue() -> None:
    assert not venue_excluded(Targeting(screen_ids=frozenset({"s1"})), MALL)


# --- screens ----------------------------------------------------------------------------------------------


def test_a_campaign_without_screen_rules_allows_any_screen_and_no_screen() -> None:
    plain = campaign(1)
    assert screen_allowed(plain, "mall-1", "s1")
    assert screen_allowed(plain, "mall-1", None)


def test_a_screen_targeted_campaign_allows_only_its_screens() -> None:
    targeted = campaign(1, targeting=Targeting(screen_ids=frozenset({"s1", "s2"})))
    assert screen_allowed(targeted, "mall-1", "s1")
    assert screen_allowed(targeted, "mall-1", "s2")
    assert not screen_allowed(targeted, "mall-1", "s3")


def test_a_screen_targeted_campaign_refuses_a_request_without_a_screen() -> None:
    targeted = campaign(1, targeting=Targeting(screen_ids=frozenset({"s1"})))
    assert not screen_allowed(targeted, "mall-1", None)


def test_an_excluded_screen_is_not_allowed_and_others_are() -> None:
    excluding = campaign(1, exclusions=Targeting(screen_ids=frozenset({"s1"})))
    assert not screen_allowed(excluding, "mall-1", "s1")
    assert screen_allowed(excluding, "mall-1", "s2")
    assert screen_allowed(excluding, "mall-1", None)


def test_a_screen_pair_allows_that_venues_screen_and_not_the_same_id_elsewhere() -> None:
    targeted = campaign(1, targeting=Targeting(screens=frozenset({("mall-1", "s1"), ("lobby", "s2")})))
    assert screen_allowed(targeted, "mall-1", "s1")
    assert screen_allowed(targeted, "lobby", "s2")
    assert not screen_allowed(targeted, "lobby", "s1")
    assert not screen_allowed(targeted, "mall-1", "s2")
    assert not screen_allowed(targeted, "mall-1", None)


def test_screen_ids_and_screen_pairs_are_alternatives_of_one_dimension() -> None:
    both = campaign(
        1, targeting=Targeting(screen_ids=frozenset({"s1"}), screens=frozenset({("lobby", "s2")}))
    )
    assert screen_allowed(both, "mall-1", "s1")
    assert screen_allowed(both, "lobby", "s1")
    assert screen_allowed(both, "lobby", "s2")
    assert not screen_allowed(both, "mall-1", "s2")


def test_screens_named_only_as_pairs_confine_the_campaign_to_those_pairs_venues() -> None:
    pairs = Targeting(screens=frozenset({("mall-1", "s1"), ("lobby", "s2")}))
    assert screen_venues(pairs) == {"mall-1", "lobby"}
    assert venue_matches(pairs, VenueProfile("mall-1"))
    assert venue_matches(pairs, VenueProfile("lobby"))
    assert not venue_matches(pairs, VenueProfile("station"))


def test_bare_screen_ids_beside_pairs_leave_every_venue_open() -> None:
    both = Targeting(screen_ids=frozenset({"s1"}), screens=frozenset({("lobby", "s2")}))
    assert screen_venues(both) is None
    assert screen_venues(Targeting()) is None
    assert venue_matches(both, VenueProfile("station"))


def test_an_excluded_screen_pair_excludes_only_that_venues_screen() -> None:
    excluding = campaign(1, exclusions=Targeting(screens=frozenset({("mall-1", "s1")})))
    assert not screen_allowed(excluding, "mall-1", "s1")
    assert screen_allowed(excluding, "lobby", "s1")
    assert screen_allowed(excluding, "mall-1", None)


def test_exclusion_wins_over_targeting_of_the_same_screen() -> None:
    both = campaign(
        1,
        targeting=Targeting(screen_ids=frozenset({"s1", "s2"})),
        exclusions=Targeting(screen_ids=frozenset({"s1"})),
    )
    assert not screen_allowed(both, "mall-1", "s1")
    assert screen_allowed(both, "mall-1", "s2")
