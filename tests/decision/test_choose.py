"""Ad selection: which live campaign and creative fill a slot, from the compiled index and a seeded random."""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Callable

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from adslot.decision.choose import Choice, choose
from adslot.decision.dayparts import Daypart, active, compile_dayparts
from adslot.decision.fit import fits
from adslot.decision.index import DecisionIndex
from adslot.decision.model import ALL_HOURS, LiveCampaign, ScreenProfile, Targeting, Tier, VenueProfile
from adslot.decision.slot import Slot
from adslot.decision.targeting import screen_allowed, venue_excluded, venue_matches
from tests.decision.factories import END, HOUR, START, campaign, creative, slot, utc

Accept = Callable[[LiveCampaign], bool]


def chosen_id(index: DecisionIndex, at: Slot, seed: int = 0) -> int | None:
    choice = choose(index, at, random.Random(seed))
    return None if choice is None else choice.campaign.id


def creative_ids(index: DecisionIndex, at: Slot, n: int, seed: int = 0) -> Counter[int]:
    rng = random.Random(seed)
    return Counter(choice.creative.id for choice in (choose(index, at, rng) for _ in range(n)) if choice)


def campaign_shares(
    index: DecisionIndex,
    at: Slot,
    n: int = 10_000,
    seed: int = 0,
    accept: Accept | None = None,
    exclude: frozenset[int] = frozenset(),
) -> dict[int | None, float]:
    rng = random.Random(seed)
    counts: Counter[int | None] = Counter()
    for _ in range(n):
        choice = (
            choose(index, at, rng, exclude=exclude)
            if accept is None
            else choose(index, at, rng, accept, exclude)
        )
        counts[None if choice is None else choice.campaign.id] += 1
    return {key: count / n for key, count in counts.items()}


TOLERANCE = 0.02
"""Absolute tolerance on a share over 10,000 seeded draws: at least 4 standard deviations for any share."""


def assert_shares(observed: dict[int | None, float], expected: dict[int | None, float]) -> None:
    assert set(observed) <= set(expected), observed
    for key, share in expected.items():
        assert abs(observed.get(key, 0.0) - share) <= TOLERANCE, (key, observed)


# --- flights ------------------------------------------------------------------------------------------------


def test_campaign_is_chosen_at_its_flight_start_and_up_to_its_last_second() -> None:
    index = DecisionIndex.build([campaign(1, venues=("v1",))])
    assert chosen_id(index, slot("v1", START)) == 1
    assert chosen_id(index, slot("v1", END - 1)) == 1


def test_campaign_is_not_chosen_at_its_flight_end_or_before_its_start() -> None:
    index = DecisionIndex.build([campaign(1)])
    assert chosen_id(index, slot("v1", END)) is None
    assert chosen_id(index, slot("v1", START - 1)) is None


def test_only_the_campaign_in_flight_is_chosen_when_flights_abut() -> None:
    early = campaign(1, start_at=START, end_at=START + 100)
    late = campaign(2, start_at=START + 100, end_at=START + 200)
    index = DecisionIndex.build([early, late])
    for seed in range(20):
        assert chosen_id(index, slot("v1", START + 99), seed) == 1
        assert chosen_id(index, slot("v1", START + 100), seed) == 2


# --- venue targeting and exclusions -------------------------------------------------------------------------


def test_targeted_campaign_is_chosen_in_its_venues_only() -> None:
    index = DecisionIndex.build([campaign(1, venues=("v1", "v2"))])
    assert chosen_id(index, slot("v1")) == 1
    assert chosen_id(index, slot("v2")) == 1
    assert chosen_id(index, slot("v3")) is None


def test_untargeted_campaign_is_chosen_in_any_venue() -> None:
    index = DecisionIndex.build([campaign(1)])
    for venue in ("v1", "somewhere-else", ""):
        assert chosen_id(index, slot(venue)) == 1


def test_venue_id_match_is_exact() -> None:
    index = DecisionIndex.build([campaign(1, venues=("v1",))])
    for venue in ("V1", "v1 ", "v", "v10"):
        assert chosen_id(index, slot(venue)) is None


def test_excluded_venue_never_gets_the_campaign() -> None:
    index = DecisionIndex.build(
        [campaign(1, exclusions=Targeting(countries=frozenset({"FR"}))), campaign(2, tier="house")]
    )
    for seed in range(20):
        assert chosen_id(index, slot(VenueProfile("paris", country="fr")), seed) == 2
        assert chosen_id(index, slot(VenueProfile("berlin", country="DE")), seed) == 1


# --- dayparts -----------------------------------------------------------------------------------------------


def test_daypart_is_read_in_the_venue_time_zone() -> None:
    mornings = compile_dayparts([Daypart((0, 1, 2, 3, 4, 5, 6), 8, 10)])
    index = DecisionIndex.build([campaign(1, hours_of_week=mornings, end_at=utc(2026, 12, 31))])
    berlin = VenueProfile("v1", timezone="Europe/Berlin")
    assert chosen_id(index, slot(berlin, utc(2026, 3, 30, 6, 30))) == 1  # 08:30 CEST
    assert chosen_id(index, slot(berlin, utc(2026, 3, 30, 8, 30))) is None  # 10:30 CEST
    assert chosen_id(index, slot("v1", utc(2026, 3, 30, 6, 30))) is None  # 06:30 in a UTC venue


# --- creatives ----------------------------------------------------------------------------------------------


def test_campaign_without_creatives_leaves_the_slot_to_one_with_creatives() -> None:
    index = DecisionIndex.build([campaign(1, creatives=0), campaign(2, venues=("v1",))])
    for seed in range(50):
        assert chosen_id(index, slot("v1"), seed) == 2


def test_choice_creative_belongs_to_the_chosen_campaign() -> None:
    index = DecisionIndex.build([campaign(n, creatives=3) for n in range(1, 5)])
    rng = random.Random(3)
    for _ in range(500):
        choice = choose(index, slot("v1"), rng)
        assert isinstance(choice, Choice)
        assert choice.creative in choice.campaign.creatives
        assert choice.creative.campaign_id == choice.campaign.id


# --- nothing to play ----------------------------------------------------------------------------------------


def test_choose_returns_none_from_an_empty_index() -> None:
    assert choose(DecisionIndex.build([]), slot("v1"), random.Random(0)) is None


def test_choose_returns_none_when_no_candidate_is_in_flight() -> None:
    index = DecisionIndex.build(
        [
            campaign(1, venues=("v1",), start_at=START, end_at=START + 10),
            campaign(2, start_at=START + 20, end_at=START + 30),
        ]
    )
    for play_time in (START - 1, START + 10, START + 15, START + 30):
        assert chosen_id(index, slot("v1", play_time)) is None


# --- tiers --------------------------------------------------------------------------------------------------


TIERED = DecisionIndex.build(
    [
        campaign(1, tier="sponsorship", weight=1),
        campaign(2, tier="standard", weight=10_000),
        campaign(3, tier="house", weight=10_000),
    ]
)


def test_sponsorship_wins_every_slot_whatever_the_weights_below() -> None:
    assert campaign_shares(TIERED, slot("v1"), n=2000) == {1: 1.0}


def test_standard_wins_every_slot_over_house_when_no_sponsorship_is_eligible() -> None:
    assert campaign_shares(TIERED, slot("v1"), n=2000, exclude=frozenset({1})) == {2: 1.0}


def test_house_fills_only_when_nothing_above_is_eligible() -> None:
    assert campaign_shares(TIERED, slot("v1"), n=500, exclude=frozenset({1, 2})) == {3: 1.0}


@pytest.mark.parametrize(
    "sponsor",
    [
        campaign(1, tier="sponsorship", start_at=START + HOUR),
        campaign(1, tier="sponsorship", hours_of_week=1 << 5),
        campaign(1, tier="sponsorship", venues=("v2",)),
        campaign(1, tier="sponsorship", exclusions=Targeting(venue_ids=frozenset({"v1"}))),
        campaign(1, tier="sponsorship", targeting=Targeting(screen_ids=frozenset({"s2"}))),
        campaign(1, tier="sponsorship", exclusions=Targeting(screen_ids=frozenset({"s1"}))),
        campaign(1, tier="sponsorship", creatives=(creative(101, 1, width=1080, height=1920),)),
    ],
    ids=["flight", "daypart", "venue", "excluded venue", "screen", "excluded screen", "no fitting creative"],
)
def test_a_lower_tier_fills_when_the_higher_one_is_ineligible(sponsor: LiveCampaign) -> None:
    index = DecisionIndex.build([sponsor, campaign(2, tier="house")])
    at = slot("v1", START, screen=ScreenProfile("v1", "s1", width=1920, height=1080))
    assert campaign_shares(index, at, n=200) == {2: 1.0}


def test_a_lower_tier_fills_when_accept_refuses_the_higher_one() -> None:
    assert campaign_shares(TIERED, slot("v1"), n=500, accept=lambda c: c.tier != "sponsorship") == {2: 1.0}


# --- weights ------------------------------------------------------------------------------------------------


def test_campaigns_are_drawn_in_proportion_to_weight() -> None:
    index = DecisionIndex.build([campaign(1, weight=10), campaign(2, weight=20), campaign(3, weight=70)])
    assert_shares(campaign_shares(index, slot("v1")), {1: 0.1, 2: 0.2, 3: 0.7})


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_equal_weights_split_evenly(seed: int) -> None:
    index = DecisionIndex.build([campaign(1), campaign(2, venues=("v1",)), campaign(3, venues=("v1", "v2"))])
    assert_shares(campaign_shares(index, slot("v1"), seed=seed), {1: 1 / 3, 2: 1 / 3, 3: 1 / 3})


def test_creatives_are_drawn_in_proportion_to_creative_weight() -> None:
    index = DecisionIndex.build(
        [campaign(1, creatives=(creative(11, weight=1), creative(12, weight=3), creative(13, weight=0)))]
    )
    counts = creative_ids(index, slot("v1"), 10_000, seed=4)
    assert set(counts) == {11, 12}
    assert abs(counts[11] / 10_000 - 0.25) <= TOLERANCE, counts


def test_campaign_draw_is_by_campaign_weight_not_by_number_of_creatives() -> None:
    index = DecisionIndex.build([campaign(1, creatives=9), campaign(2, creatives=1)])
    assert_shares(campaign_shares(index, slot("v1")), {1: 0.5, 2: 0.5})


def test_only_fitting_creatives_are_drawn() -> None:
    index = DecisionIndex.build(
        [campaign(1, creatives=(creative(11), creative(12, width=1080, height=1920), creative(13)))]
    )
    portrait = ScreenProfile("v1", "tall", orientation="portrait")
    landscape = ScreenProfile("v1", "wide", orientation="landscape")
    on_portrait = set(creative_ids(index, slot("v1", screen=portrait), 300))
    on_landscape = set(creative_ids(index, slot("v1", screen=landscape), 300))
    assert on_portrait == {12}
    assert on_landscape == {11, 13}


# --- share of voice -----------------------------------------------------------------------------------------


def test_share_of_voice_takes_its_fraction_of_the_tier() -> None:
    index = DecisionIndex.build(
        [campaign(1, share_of_voice=0.3), campaign(2, weight=1), campaign(3, weight=1_000)]
    )
    # Weights split only the remaining 70%: 0.7 * 1/1001 and 0.7 * 1000/1001.
    assert_shares(campaign_shares(index, slot("v1")), {1: 0.3, 2: 0.0007, 3: 0.6993})


def test_several_shares_of_voice_each_take_their_fraction() -> None:
    index = DecisionIndex.build(
        [campaign(1, share_of_voice=0.2), campaign(2, share_of_voice=0.3), campaign(3), campaign(4)]
    )
    assert_shares(campaign_shares(index, slot("v1")), {1: 0.2, 2: 0.3, 3: 0.25, 4: 0.25})


def test_an_ineligible_share_of_voice_campaign_leaves_the_others_their_fraction() -> None:
    index = DecisionIndex.build(
        [
            campaign(1, share_of_voice=0.3, start_at=START + HOUR),
            campaign(2, share_of_voice=0.3),
            campaign(3, share_of_voice=0.2),
            campaign(4),
        ]
    )
    assert_shares(campaign_shares(index, slot("v1")), {2: 0.3, 3: 0.2, 4: 0.5})
    assert_shares(campaign_shares(index, slot("v1"), exclude=frozenset({2})), {3: 0.2, 4: 0.8})


def test_oversold_shares_are_capped_at_one_in_walking_order() -> None:
    index = DecisionIndex.build(
        [campaign(1, share_of_voice=0.7), campaign(2, share_of_voice=0.6), campaign(3)]
    )
    assert_shares(campaign_shares(index, slot("v1")), {1: 0.7, 2: 0.3})


def test_an_oversold_tier_gives_a_refused_campaign_s_segment_to_the_next_eligible_ones() -> None:
    index = DecisionIndex.build(
        [campaign(1, share_of_voice=0.7), campaign(2, share_of_voice=0.6), campaign(3)]
    )
    assert_shares(campaign_shares(index, slot("v1"), accept=lambda c: c.id != 1), {2: 0.6, 3: 0.4})


def test_share_of_voice_campaigns_alone_split_the_slots_in_proportion_to_their_shares() -> None:
    index = DecisionIndex.build([campaign(1, share_of_voice=0.2), campaign(2, share_of_voice=0.3)])
    assert_shares(campaign_shares(index, slot("v1")), {1: 0.4, 2: 0.6})


def test_share_of_voice_campaigns_split_proportionally_when_the_weighted_ones_are_ineligible() -> None:
    index = DecisionIndex.build(
        [campaign(1, share_of_voice=0.1), campaign(2, share_of_voice=0.3), campaign(3), campaign(4)]
    )
    assert_shares(
        campaign_shares(index, slot("v1"), exclude=frozenset({3}), accept=lambda c: c.id != 4),
        {1: 0.25, 2: 0.75},
    )


def test_share_of_voice_is_within_its_own_tier() -> None:
    index = DecisionIndex.build([campaign(1, tier="sponsorship"), campaign(2, share_of_voice=1.0)])
    assert campaign_shares(index, slot("v1"), n=500) == {1: 1.0}


# --- accept and exclude -------------------------------------------------------------------------------------


class Recorder:
    """An accept that says yes except for ``refused``, and remembers whom it was asked about."""

    def __init__(self, refused: frozenset[int] = frozenset()) -> None:
        self.refused = refused
        self.asked: list[int] = []

    def __call__(self, campaign: LiveCampaign) -> bool:
        self.asked.append(campaign.id)
        return campaign.id not in self.refused


def test_accept_is_asked_once_per_decision_when_it_says_yes() -> None:
    index = DecisionIndex.build([campaign(n) for n in range(1, 51)])
    rng = random.Random(0)
    for _ in range(200):
        recorder = Recorder()
        choice = choose(index, slot("v1"), rng, recorder)
        assert choice is not None
        assert recorder.asked == [choice.campaign.id]


def test_accept_is_never_asked_twice_about_a_campaign_in_one_decision() -> None:
    index = DecisionIndex.build([campaign(1, weight=1_000)] + [campaign(n, weight=1) for n in range(2, 12)])
    rng = random.Random(1)
    for _ in range(200):
        recorder = Recorder(refused=frozenset(range(1, 11)))
        choice = choose(index, slot("v1"), rng, recorder)
        assert choice is not None and choice.campaign.id == 11
        assert len(recorder.asked) == len(set(recorder.asked))


def test_accept_is_asked_only_about_campaigns_eligible_on_every_other_rule() -> None:
    index = DecisionIndex.build(
        [
            campaign(1, start_at=START + HOUR),
            campaign(2, hours_of_week=1 << 9),
            campaign(3, venues=("v2",)),
            campaign(4, targeting=Targeting(screen_ids=frozenset({"s9"}))),
            campaign(5),
            campaign(6),
            campaign(7, tier="house"),
        ]
    )
    asked: set[int] = set()
    rng = random.Random(2)
    for _ in range(300):
        recorder = Recorder(refused=frozenset({5, 6}))
        assert choose(index, slot("v1"), rng, recorder, exclude=frozenset({6})) is not None
        asked.update(recorder.asked)
    assert asked == {5, 7}


def test_accept_is_not_asked_about_a_lower_tier_when_a_higher_one_accepts() -> None:
    recorder = Recorder()
    rng = random.Random(0)
    for _ in range(100):
        choose(TIERED, slot("v1"), rng, recorder)
    assert set(recorder.asked) == {1}


def test_refused_and_excluded_campaigns_never_play_and_the_rest_keep_their_proportions() -> None:
    index = DecisionIndex.build(
        [
            campaign(1, weight=970),
            campaign(2, weight=10),
            campaign(3, weight=10),
            campaign(4, weight=10),
            campaign(5, weight=1_000),
        ]
    )
    # 1 is refused and 5 excluded: they hold 98% of the weight, so draws mostly fail and the tier is filtered.
    shares = campaign_shares(index, slot("v1"), accept=lambda c: c.id != 1, exclude=frozenset({5}))
    assert_shares(shares, {2: 1 / 3, 3: 1 / 3, 4: 1 / 3})


def test_no_choice_when_accept_refuses_everything() -> None:
    index = DecisionIndex.build([campaign(n, tier=t) for n, t in enumerate(("sponsorship", "house"), 1)])
    recorder = Recorder(refused=frozenset({1, 2}))
    assert choose(index, slot("v1"), random.Random(0), recorder) is None
    assert sorted(recorder.asked) == [1, 2]


# --- screens ------------------------------------------------------------------------------------------------


def test_screen_targeted_campaign_plays_only_on_its_screen() -> None:
    index = DecisionIndex.build(
        [campaign(1, targeting=Targeting(screen_ids=frozenset({"s1"}))), campaign(2, tier="house")]
    )
    assert chosen_id(index, slot("v1", screen_id="s1")) == 1
    assert chosen_id(index, slot("v1", screen_id="s2")) == 2
    assert chosen_id(index, slot("v1")) == 2


def test_excluded_screen_never_gets_the_campaign() -> None:
    index = DecisionIndex.build(
        [campaign(1, exclusions=Targeting(screen_ids=frozenset({"s1"}))), campaign(2, tier="house")]
    )
    assert chosen_id(index, slot("v1", screen_id="s1")) == 2
    assert chosen_id(index, slot("v1", screen_id="s2")) == 1


# --- randomness ---------------------------------------------------------------------------------------------


MIXED = DecisionIndex.build(
    [
        campaign(1, venues=("v1",), creatives=2),
        campaign(2, creatives=3, share_of_voice=0.2),
        campaign(3, venues=("v1", "v2"), creatives=1, weight=30),
    ]
)


def draws(index: DecisionIndex, seed: int, n: int = 300) -> list[tuple[int, int]]:
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        choice = choose(index, slot("v1"), rng)
        assert choice is not None
        out.append((choice.campaign.id, choice.creative.id))
    return out


def test_same_seed_gives_the_same_sequence_of_choices() -> None:
    assert draws(MIXED, 1234) == draws(MIXED, 1234)


def test_a_fresh_index_gives_the_same_sequence_as_a_warm_one() -> None:
    warm = draws(MIXED, 77)
    fresh = DecisionIndex.build(MIXED.campaigns.values())
    assert draws(fresh, 77) == warm


def test_different_seeds_give_different_sequences() -> None:
    assert draws(MIXED, 1) != draws(MIXED, 2)


def test_choose_draws_only_from_the_given_random_source() -> None:
    random.seed(1)
    first = draws(MIXED, 99)
    random.seed(2)
    assert draws(MIXED, 99) == first


# --- properties ---------------------------------------------------------------------------------------------

VENUES = (
    VenueProfile("v1", venue_type="mall", tags=frozenset({"indoor"}), country="DE"),
    VenueProfile("v2", venue_type="airport", tags=frozenset({"indoor", "premium"}), country="FR"),
    VenueProfile("v3", timezone="America/New_York"),
)
SCREENS: tuple[tuple[str | None, ScreenProfile | None], ...] = (
    (None, None),
    ("s1", ScreenProfile("v", "s1", width=1920, height=1080)),
    ("s2", ScreenProfile("v", "s2", orientation="portrait", max_duration_seconds=10)),
    ("s3", None),
)
TIER_NAMES: tuple[Tier, ...] = ("sponsorship", "standard", "house")
TARGETINGS = (
    Targeting(),
    Targeting(),
    Targeting(),
    Targeting(venue_ids=frozenset({"v1"})),
    Targeting(venue_ids=frozenset({"v2", "v3"})),
    Targeting(venue_types=frozenset({"mall", "airport"})),
    Targeting(venue_tags=frozenset({"premium"})),
    Targeting(countries=frozenset({"de"})),
    Targeting(venue_tags=frozenset({"indoor"}), countries=frozenset({"FR"})),
    Targeting(screen_ids=frozenset({"s1"})),
    Targeting(venue_ids=frozenset({"v1", "v3"}), screen_ids=frozenset({"s2", "s3"})),
)
EXCLUSIONS = (
    Targeting(),
    Targeting(),
    Targeting(),
    Targeting(venue_ids=frozenset({"v1"})),
    Targeting(venue_tags=frozenset({"premium"})),
    Targeting(screen_ids=frozenset({"s1"})),
)
CREATIVE_SPECS = tuple(
    (width, height, duration, weight)
    for width, height in ((1920, 1080), (3840, 2160), (1080, 1920), (1000, 1000))
    for duration in (5, 15)
    for weight in (0, 1, 3)
)


@st.composite
def campaigns_strategy(draw: st.DrawFn, campaign_id: int) -> LiveCampaign:
    specs = draw(st.lists(st.sampled_from(CREATIVE_SPECS), min_size=1, max_size=3))
    creatives = tuple(
        creative(campaign_id * 100 + n, campaign_id, width=w, height=h, duration_seconds=d, weight=cw)
        for n, (w, h, d, cw) in enumerate(specs)
    )
    start = START + draw(st.integers(-2, 2)) * HOUR
    return campaign(
        campaign_id,
        tier=draw(st.sampled_from(TIER_NAMES)),
        weight=draw(st.integers(0, 5)),
        share_of_voice=draw(st.sampled_from((None, None, None, 0.0, 0.1, 0.4, 0.8, 1.0))),
        hours_of_week=draw(st.sampled_from((ALL_HOURS, ALL_HOURS, 0, (1 << 84) - 1, ALL_HOURS ^ 0b1110))),
        start_at=start,
        end_at=start + draw(st.integers(0, 8)) * HOUR,
        targeting=draw(st.sampled_from(TARGETINGS)),
        exclusions=draw(st.sampled_from(EXCLUSIONS)),
        creatives=creatives,
    )


@st.composite
def scenarios(draw: st.DrawFn) -> tuple[list[LiveCampaign], Slot, frozenset[int], frozenset[int], int]:
    count = draw(st.integers(0, 16))
    catalog = [draw(campaigns_strategy(n)) for n in range(1, count + 1)]
    screen_id, screen = draw(st.sampled_from(SCREENS))
    at = slot(
        draw(st.sampled_from(VENUES)),
        START + draw(st.integers(0, 3)) * HOUR + draw(st.integers(0, HOUR - 1)),
        screen_id=screen_id,
        screen=screen,
    )
    ids = list(range(1, count + 1))
    refused = draw(st.frozensets(st.sampled_from(ids), max_size=3)) if ids else frozenset()
    excluded = draw(st.frozensets(st.sampled_from(ids), max_size=2)) if ids else frozenset()
    return catalog, at, refused, excluded, draw(st.integers(0, 2**32))


def eligible_by_the_rules(c: LiveCampaign, at: Slot, excluded: frozenset[int]) -> bool:
    """The definition, rule by rule, without the index: everything but ``accept``."""
    drawable = c.weight > 0 if c.share_of_voice is None else c.share_of_voice > 0
    return (
        drawable
        and c.start_at <= at.play_time < c.end_at
        and active(c.hours_of_week, at.hour_of_week)
        and venue_matches(c.targeting, at.venue)
        and not venue_excluded(c.exclusions, at.venue)
        and screen_allowed(c, at.venue.venue_id, at.screen_id)
        and any(cr.weight > 0 and fits(cr, at.screen) for cr in c.creatives)
        and c.id not in excluded
    )


@settings(max_examples=250, deadline=None)
@given(scenarios())
def test_property_the_choice_is_eligible_from_the_highest_eligible_tier(
    scenario: tuple[list[LiveCampaign], Slot, frozenset[int], frozenset[int], int],
) -> None:
    catalog, at, refused, excluded, seed = scenario
    recorder = Recorder(refused)
    choice = choose(DecisionIndex.build(catalog), at, random.Random(seed), recorder, excluded)
    eligible = [c for c in catalog if eligible_by_the_rules(c, at, excluded) and c.id not in refused]
    if not eligible:
        assert choice is None
        return
    assert choice is not None
    assert choice.campaign in eligible
    assert TIER_NAMES.index(choice.campaign.tier) == min(TIER_NAMES.index(c.tier) for c in eligible)
    assert choice.creative in choice.campaign.creatives
    assert choice.creative.weight > 0 and fits(choice.creative, at.screen)


@settings(max_examples=150, deadline=None)
@given(scenarios())
def test_property_accept_is_asked_at_most_once_per_campaign_and_only_about_otherwise_eligible_ones(
    scenario: tuple[list[LiveCampaign], Slot, frozenset[int], frozenset[int], int],
) -> None:
    catalog, at, refused, excluded, seed = scenario
    recorder = Recorder(refused)
    choose(DecisionIndex.build(catalog), at, random.Random(seed), recorder, excluded)
    by_id = {c.id: c for c in catalog}
    assert len(recorder.asked) == len(set(recorder.asked))
    assert all(eligible_by_the_rules(by_id[i], at, excluded) for i in recorder.asked)


@settings(max_examples=100, deadline=None)
@given(scenarios())
def test_property_the_same_seed_makes_the_same_choice_on_a_fresh_index(
    scenario: tuple[list[LiveCampaign], Slot, frozenset[int], frozenset[int], int],
) -> None:
    catalog, at, refused, excluded, seed = scenario
    first = choose(DecisionIndex.build(catalog), at, random.Random(seed), Recorder(refused), excluded)
    again = choose(DecisionIndex.build(catalog), at, random.Random(seed), Recorder(refused), excluded)
    assert first == again
