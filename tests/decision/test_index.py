"""The compiled decision index: candidates for a venue and a screen, found without a catalog scan."""

from __future__ import annotations

import dataclasses
import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import adslot.decision.index as index_module
from adslot.decision.index import Creative as ReexportedCreative
from adslot.decision.index import DecisionIndex
from adslot.decision.index import LiveCampaign as ReexportedLiveCampaign
from adslot.decision.model import Creative, GeoRadius, LiveCampaign, ScreenProfile, Targeting, VenueProfile
from adslot.decision.targeting import EARTH_RADIUS_KM, venue_matches
from tests.decision.factories import START, campaign, creative

V1 = VenueProfile("v1", venue_type="mall", tags=frozenset({"indoor"}), country="DE", city="Berlin")


def ids(campaigns: tuple[LiveCampaign, ...]) -> list[int]:
    return [c.id for c in campaigns]


def test_index_module_re_exports_the_model_types() -> None:
    assert ReexportedCreative is Creative
    assert ReexportedLiveCampaign is LiveCampaign


def test_campaigns_attribute_holds_every_campaign_with_creatives_by_id() -> None:
    built = DecisionIndex.build([campaign(1), campaign(2, creatives=0), campaign(3, venues=("v9",))])
    assert sorted(built.campaigns) == [1, 3]
    assert built.campaigns[3].id == 3


def test_candidates_of_a_venue_are_its_targeted_and_untargeted_campaigns() -> None:
    targeted = campaign(1, venues=("v1",))
    everywhere = campaign(2)
    other = campaign(3, venues=("v2",))
    built = DecisionIndex.build([targeted, everywhere, other])
    assert built.candidates(V1) == (targeted, everywhere)
    assert built.candidates(VenueProfile("v2")) == (everywhere, other)
    assert built.candidates(VenueProfile("unknown")) == (everywhere,)


FULL_VENUE = VenueProfile(
    "v1",
    venue_type="mall",
    tags=frozenset({"indoor"}),
    country="DE",
    region="DE-BE",
    city="Berlin",
    latitude=52.52,
    longitude=13.405,
)
PARIS = VenueProfile("paris", country="FR", latitude=48.85, longitude=2.35)


@pytest.mark.parametrize(
    ("targeting", "also_in_paris"),
    [
        (Targeting(venue_ids=frozenset({"v1"})), False),
        (Targeting(venue_types=frozenset({"mall"})), False),
        (Targeting(venue_tags=frozenset({"indoor"})), False),
        (Targeting(countries=frozenset({"de"})), False),
        (Targeting(cities=frozenset({"Berlin"})), False),
        (Targeting(regions=frozenset({"DE-BE"})), False),
        (Targeting(radii=(GeoRadius(52.52, 13.40, 5),)), False),
        (Targeting(countries=frozenset({"FR"}), radii=(GeoRadius(52.52, 13.40, 5),)), True),
        (Targeting(screen_ids=frozenset({"s1"})), True),
        (Targeting(screens=frozenset({("v1", "s1")})), False),
        (Targeting(screens=frozenset({("v1", "s1"), ("paris", "s9")})), True),
        (Targeting(screen_ids=frozenset({"s2"}), screens=frozenset({("v1", "s1")})), True),
        (Targeting(), True),
    ],
)
def test_each_kind_of_targeting_finds_its_venue_and_only_matching_ones(
    targeting: Targeting, also_in_paris: bool
) -> None:
    built = DecisionIndex.build([campaign(1, targeting=targeting)])
    assert ids(built.candidates(FULL_VENUE)) == [1]
    assert ids(built.candidates(PARIS)) == ([1] if also_in_paris else [])


def test_all_dimensions_of_a_targeting_are_applied_not_only_the_posted_one() -> None:
    built = DecisionIndex.build(
        [campaign(1, targeting=Targeting(venue_ids=frozenset({"v1"}), venue_types=frozenset({"airport"})))]
    )
    assert built.candidates(V1) == ()


def test_excluded_venues_lose_the_campaign() -> None:
    built = DecisionIndex.build(
        [
            campaign(1, exclusions=Targeting(venue_tags=frozenset({"indoor"}))),
            campaign(2, exclusions=Targeting(countries=frozenset({"FR"}))),
        ]
    )
    assert ids(built.candidates(V1)) == [2]


def test_candidates_come_in_tier_order_then_by_id_whatever_the_input_order() -> None:
    given = [
        campaign(5, tier="house"),
        campaign(4, tier="standard"),
        campaign(9, tier="sponsorship"),
        campaign(1, tier="house"),
        campaign(7, tier="sponsorship", venues=("v1",)),
        campaign(2, tier="standard", venues=("v1",)),
    ]
    assert ids(DecisionIndex.build(given).candidates(V1)) == [7, 9, 2, 4, 1, 5]
    assert ids(DecisionIndex.build(reversed(given)).candidates(V1)) == [7, 9, 2, 4, 1, 5]


def test_campaign_without_creatives_is_never_a_candidate() -> None:
    built = DecisionIndex.build([campaign(1, venues=("v1",), creatives=0), campaign(2, creatives=())])
    assert built.candidates(V1) == ()
    assert built.campaigns == {}


def test_duplicate_campaign_ids_are_refused() -> None:
    with pytest.raises(ValueError, match="twice"):
        DecisionIndex.build([campaign(1), campaign(1, venues=("v1",))])


def test_unknown_tier_is_refused() -> None:
    broken = dataclasses.replace(campaign(1), tier="gold")
    with pytest.raises(ValueError, match="tier"):
        DecisionIndex.build([broken])


# --- no scan over the catalog ------------------------------------------------------------------------------


@pytest.fixture
def looked_at(monkeypatch: pytest.MonkeyPatch) -> list[Targeting]:
    """Every targeting the index checks against a venue from here on: what a candidates() call examined."""
    seen: list[Targeting] = []
    real = index_module.venue_matches

    def counting(targeting: Targeting, venue: VenueProfile) -> bool:
        seen.append(targeting)
        return real(targeting, venue)

    monkeypatch.setattr(index_module, "venue_matches", counting)
    return seen


def test_a_venue_looks_only_at_campaigns_posted_under_its_attributes(looked_at: list[Targeting]) -> None:
    elsewhere = [campaign(n, venues=(f"other-{n}",)) for n in range(10, 1010)]
    typed_elsewhere = [
        campaign(n, targeting=Targeting(venue_types=frozenset({"airport"}))) for n in range(2000, 2500)
    ]
    mine = [campaign(1, venues=("v1",)), campaign(2, targeting=Targeting(venue_types=frozenset({"mall"})))]
    built = DecisionIndex.build(elsewhere + typed_elsewhere + mine)
    assert ids(built.candidates(V1)) == [1, 2]
    assert len(looked_at) == 2


def test_candidates_of_a_venue_are_computed_once_and_remembered(monkeypatch: pytest.MonkeyPatch) -> None:
    built = DecisionIndex.build([campaign(1, venues=("v1",)), campaign(2)])
    first = built.candidates(V1)
    calls: list[VenueProfile] = []

    def counting(targeting: Targeting, venue: VenueProfile) -> bool:
        calls.append(venue)
        return True

    monkeypatch.setattr(index_module, "venue_matches", counting)
    assert built.candidates(V1) is first
    assert built.candidates(dataclasses.replace(V1)) is first  # an equal copy, as a reloaded catalog makes
    assert calls == []


def test_an_edited_venue_under_the_same_id_is_recomputed() -> None:
    built = DecisionIndex.build([campaign(1, targeting=Targeting(venue_tags=frozenset({"outdoor"})))])
    assert built.candidates(V1) == ()
    edited = VenueProfile("v1", venue_type="mall", tags=frozenset({"indoor", "outdoor"}))
    assert ids(built.candidates(edited)) == [1]


def test_the_venue_memo_is_bounded_and_evicts_the_oldest() -> None:
    built = DecisionIndex.build([campaign(1)], cache_size=2)
    a, b, c = VenueProfile("a"), VenueProfile("b"), VenueProfile("c")
    first_a = built.candidates(a)
    built.candidates(b)
    first_c = built.candidates(c)
    assert built.candidates(c) is first_c
    assert built.candidates(a) is not first_a  # evicted, computed again
    assert built.candidates(a) == first_a


# --- screens -----------------------------------------------------------------------------------------------


def pooled_ids(built: DecisionIndex, screen_id: str | None, screen: ScreenProfile | None) -> list[int]:
    pools = built.screen_pools(V1, screen_id, screen)
    return [c.id for pool in pools.tiers for c in pool.all()]


def test_screen_pools_keep_only_campaigns_the_screen_allows() -> None:
    built = DecisionIndex.build(
        [
            campaign(1),
            campaign(2, targeting=Targeting(screen_ids=frozenset({"s1"}))),
            campaign(3, exclusions=Targeting(screen_ids=frozenset({"s1"}))),
        ]
    )
    assert pooled_ids(built, "s1", None) == [1, 2]
    assert pooled_ids(built, "s2", None) == [1, 3]
    assert pooled_ids(built, None, None) == [1, 3]


def test_a_screen_pair_pools_its_campaign_on_that_venues_screen_only() -> None:
    built = DecisionIndex.build(
        [campaign(1), campaign(2, targeting=Targeting(screens=frozenset({("v1", "s1")})))]
    )
    other = VenueProfile("v2")
    assert pooled_ids(built, "s1", None) == [1, 2]
    assert [c.id for pool in built.screen_pools(other, "s1", None).tiers for c in pool.all()] == [1]
    assert pooled_ids(built, "s2", None) == [1]


def test_a_campaign_sold_on_screen_pairs_only_is_posted_to_those_venues_not_everywhere(
    looked_at: list[Targeting],
) -> None:
    paired = [
        campaign(n, targeting=Targeting(screens=frozenset({("v1", "s1"), (f"v{n}", "s1")})))
        for n in range(2, 12)
    ]
    built = DecisionIndex.build([campaign(1), *paired])
    assert ids(built.candidates(VenueProfile("elsewhere"))) == [1]
    assert len(looked_at) == 1  # not one of the ten screen-pair campaigns
    assert ids(built.candidates(VenueProfile("v5"))) == [1, 5]
    assert ids(built.candidates(V1)) == list(range(1, 12))


def test_screen_pools_keep_only_creatives_that_fit_and_drop_campaigns_with_none() -> None:
    landscape, portrait = creative(11, 1), creative(12, 1, width=1080, height=1920)
    built = DecisionIndex.build(
        [
            campaign(1, creatives=(landscape, portrait)),
            campaign(2, creatives=(creative(21, 2, width=1080, height=1920),)),
        ]
    )
    pools = built.screen_pools(V1, "s1", ScreenProfile("v1", "s1", width=1920, height=1080))
    (pool,) = pools.tiers
    (only,) = pool.all()
    assert only.id == 1
    assert only.creatives == (landscape,)


def test_zero_weights_and_non_positive_shares_never_become_candidates() -> None:
    built = DecisionIndex.build(
        [
            campaign(1, weight=0),
            campaign(2, share_of_voice=0.0),
            campaign(3, share_of_voice=float("nan")),
            campaign(4, creatives=(creative(41, 4, weight=0),)),
            campaign(5, creatives=(creative(51, 5, weight=0), creative(52, 5))),
            campaign(6, share_of_voice=0.5, weight=0),
        ]
    )
    pools = built.screen_pools(V1, None, None)
    assert [c.id for pool in pools.tiers for c in pool.all()] == [5, 6]
    assert [cr.id for cr in pools.tiers[0].weighted[0].creatives] == [52]


def test_share_of_voice_above_one_is_clamped_to_one() -> None:
    built = DecisionIndex.build([campaign(1, share_of_voice=3.0)])
    (pool,) = built.screen_pools(V1, None, None).tiers
    assert pool.sov[0].share == 1.0


def test_screens_with_the_same_fit_and_no_screen_rules_share_one_pool() -> None:
    built = DecisionIndex.build(
        [campaign(1), campaign(2, targeting=Targeting(screen_ids=frozenset({"named"})))]
    )
    hd = ScreenProfile("v1", "a", width=1920, height=1080)
    hd_too = ScreenProfile("v1", "b", width=1920, height=1080)
    assert built.screen_pools(V1, "a", hd) is built.screen_pools(V1, "b", hd_too)
    assert built.screen_pools(V1, "named", hd) is not built.screen_pools(V1, "a", hd)
    assert pooled_ids(built, "named", hd) == [1, 2]


def test_eligible_tiers_hold_only_campaigns_in_flight_and_in_daypart() -> None:
    built = DecisionIndex.build(
        [
            campaign(1, start_at=START, end_at=START + 100),
            campaign(2, start_at=START + 100, end_at=START + 200),
            campaign(3, hours_of_week=1 << 1),  # Monday 01h only
            campaign(4, tier="house", hours_of_week=1 << 0),
        ]
    )
    pools = built.screen_pools(V1, None, None)

    def eligible(play_time: int, hour: int) -> list[int]:
        return [c.id for pool in pools.eligible_tiers(play_time, hour) for c in pool.all()]

    assert eligible(START, 0) == [1, 4]
    assert eligible(START + 99, 0) == [1, 4]
    assert eligible(START + 100, 0) == [2, 4]
    assert eligible(START + 150, 1) == [2, 3]
    assert eligible(START + 200, 5) == []
    assert eligible(START + 50, 0) == [1, 4]  # remembered windows answer again correctly


# --- radius campaigns on the grid ---------------------------------------------------------------------------


def radius_campaign(latitude: float, longitude: float, radius_km: float) -> LiveCampaign:
    return campaign(1, targeting=Targeting(radii=(GeoRadius(latitude, longitude, radius_km),)))


def found_at(built: DecisionIndex, latitude: float, longitude: float) -> bool:
    return bool(
        built.candidates(VenueProfile(f"at {latitude},{longitude}", latitude=latitude, longitude=longitude))
    )


def test_a_radius_is_found_across_a_cell_border() -> None:
    built = DecisionIndex.build([radius_campaign(52.999, 13.999, 5)])
    assert found_at(built, 53.01, 14.01)
    assert found_at(built, 52.98, 13.98)
    assert not found_at(built, 53.1, 14.1)


def test_a_radius_is_found_across_the_antimeridian() -> None:
    built = DecisionIndex.build([radius_campaign(0.0, 179.99, 10)])
    assert found_at(built, 0.0, -179.99)


def test_a_radius_around_a_pole_is_found_at_any_longitude() -> None:
    built = DecisionIndex.build([radius_campaign(89.9, 0.0, 50)])
    assert found_at(built, 89.95, 120.0)
    assert found_at(built, 90.0, 0.0)
    assert not found_at(built, 89.0, 180.0)


def test_a_radius_of_a_thousand_kilometres_is_found_far_from_its_centre() -> None:
    built = DecisionIndex.build([radius_campaign(52.52, 13.40, 1_000)])
    assert found_at(built, 48.86, 2.35)  # Paris, about 880 km from Berlin
    assert not found_at(built, 40.42, -3.70)  # Madrid, about 1,870 km


def test_a_negative_radius_contains_nothing() -> None:
    built = DecisionIndex.build([radius_campaign(52.52, 13.40, -1)])
    assert not found_at(built, 52.52, 13.40)


def test_far_away_radius_campaigns_are_not_examined(looked_at: list[Targeting]) -> None:
    far = [
        campaign(n, targeting=Targeting(radii=(GeoRadius(40.0, -74.0 + n / 100, 20),)))
        for n in range(10, 510)
    ]
    near = campaign(1, targeting=Targeting(radii=(GeoRadius(52.5, 13.4, 20),)))
    built = DecisionIndex.build([*far, near])
    assert ids(built.candidates(VenueProfile("berlin", latitude=52.52, longitude=13.40))) == [1]
    assert len(looked_at) == 1


latitudes = st.floats(-90, 90, allow_nan=False)
longitudes = st.floats(-180, 180, allow_nan=False, exclude_max=True)


@settings(max_examples=300, deadline=None)
@given(latitudes, longitudes, st.floats(0, 3_000), latitudes, longitudes)
def test_property_the_grid_finds_a_radius_campaign_exactly_where_its_circle_matches(
    centre_lat: float, centre_lon: float, radius_km: float, venue_lat: float, venue_lon: float
) -> None:
    targeting = Targeting(radii=(GeoRadius(centre_lat, centre_lon, radius_km),))
    built = DecisionIndex.build([campaign(1, targeting=targeting)])
    venue = VenueProfile("v", latitude=venue_lat, longitude=venue_lon)
    assert bool(built.candidates(venue)) == venue_matches(targeting, venue)


@settings(max_examples=300, deadline=None)
@given(latitudes, longitudes, st.floats(0.1, 300), st.floats(0, 1), st.floats(0, 2 * math.pi))
def test_property_a_venue_just_inside_a_radius_is_found(
    centre_lat: float, centre_lon: float, radius_km: float, fraction: float, bearing: float
) -> None:
    """Venues drawn inside the circle, so that the property above is not satisfied by misses alone."""
    distance = radius_km * fraction * 0.999
    # Destination point on the sphere at that distance and bearing.
    angular = distance / EARTH_RADIUS_KM
    phi1, lambda1 = math.radians(centre_lat), math.radians(centre_lon)
    phi2 = math.asin(
        math.sin(phi1) * math.cos(angular) + math.cos(phi1) * math.sin(angular) * math.cos(bearing)
    )
    lambda2 = lambda1 + math.atan2(
        math.sin(bearing) * math.sin(angular) * math.cos(phi1),
        math.cos(angular) - math.sin(phi1) * math.sin(phi2),
    )
    venue_lon = (math.degrees(lambda2) + 540) % 360 - 180
    venue = VenueProfile("v", latitude=math.degrees(phi2), longitude=venue_lon)
    targeting = Targeting(radii=(GeoRadius(centre_lat, centre_lon, radius_km),))
    assert venue_matches(targeting, venue)
    assert DecisionIndex.build([campaign(1, targeting=targeting)]).candidates(venue)


def test_coordinates_off_the_map_match_no_radius_and_break_nothing() -> None:
    nan, inf = float("nan"), float("inf")
    built = DecisionIndex.build(
        [
            campaign(1, targeting=Targeting(radii=(GeoRadius(nan, 13.4, 10),))),
            campaign(2, targeting=Targeting(radii=(GeoRadius(52.5, inf, 10),))),
            campaign(3, targeting=Targeting(radii=(GeoRadius(52.5, 13.4, 10),))),
            campaign(4),
        ]
    )
    assert ids(built.candidates(VenueProfile("a", latitude=52.5, longitude=13.4))) == [3, 4]
    assert ids(built.candidates(VenueProfile("b", latitude=nan, longitude=13.4))) == [4]
    assert ids(built.candidates(VenueProfile("c", latitude=52.5, longitude=-inf))) == [4]
