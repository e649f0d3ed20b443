"""Ad selection: which live campaign and creative fill a slot, from the compiled index and a seeded random."""

from __future__ import annotations

import random
from collections import Counter

import pytest

from adslot.decision.choose import Choice, choose, eligible
from adslot.decision.index import DecisionIndex
from tests.decision.factories import END, START, campaign


def chosen_id(index: DecisionIndex, venue_id: str, play_time: int, seed: int = 0) -> int | None:
    choice = choose(index, venue_id, play_time, random.Random(seed))
    return None if choice is None else choice.campaign.id


# --- flights --------------------------------------------------------------------------------------


def test_eligible_includes_the_flight_start() -> None:
    assert eligible(campaign(1), START)


def test_eligible_excludes_the_flight_end() -> None:
    assert not eligible(campaign(1), END)


def test_eligible_includes_the_last_second_before_the_end() -> None:
    assert eligible(campaign(1), END - 1)


def test_eligible_excludes_the_second_before_the_start() -> None:
    assert not eligible(campaign(1), START - 1)


def test_campaign_is_chosen_at_its_flight_start() -> None:
    index = DecisionIndex.build([campaign(1, venues=("v1",))])
    assert chosen_id(index, "v1", START) == 1


def test_campaign_is_not_chosen_at_its_flight_end() -> None:
    index = DecisionIndex.build([campaign(1, venues=("v1",))])
    assert chosen_id(index, "v1", END) is None
    assert chosen_id(index, "v1", END - 1) == 1


def test_campaign_is_not_chosen_before_its_flight_start() -> None:
    index = DecisionIndex.build([campaign(1, all_venues=True)])
    assert chosen_id(index, "v1", START - 1) is None


def test_only_the_campaign_in_flight_is_chosen_when_flights_abut() -> None:
    early = campaign(1, all_venues=True, start_at=START, end_at=START + 100)
    late = campaign(2, all_venues=True, start_at=START + 100, end_at=START + 200)
    index = DecisionIndex.build([early, late])
    for seed in range(20):
        assert chosen_id(index, "v1", START + 99, seed) == 1
        assert chosen_id(index, "v1", START + 100, seed) == 2


# --- venue targeting ------------------------------------------------------------------------------


def test_targeted_campaign_is_chosen_in_its_venue() -> None:
    index = DecisionIndex.build([campaign(1, venues=("v1", "v2"))])
    assert chosen_id(index, "v1", START) == 1
    assert chosen_id(index, "v2", START) == 1


def test_targeted_campaign_is_not_chosen_in_another_venue() -> None:
    index = DecisionIndex.build([campaign(1, venues=("v1",))])
    assert chosen_id(index, "v2", START) is None


def test_all_venue_campaign_is_chosen_in_any_venue() -> None:
    index = DecisionIndex.build([campaign(1, all_venues=True)])
    for venue in ("v1", "somewhere-else", ""):
        assert chosen_id(index, venue, START) == 1


def test_venue_match_is_exact() -> None:
    index = DecisionIndex.build([campaign(1, venues=("v1",))])
    for venue in ("V1", "v1 ", "v", "v10"):
        assert chosen_id(index, venue, START) is None


def test_all_venue_campaign_that_also_lists_venues_gets_no_extra_share() -> None:
    index = DecisionIndex.build([campaign(1, all_venues=True, venues=("v1",)), campaign(2, venues=("v1",))])
    rng = random.Random(7)
    counts = Counter(
        choice.campaign.id for choice in (choose(index, "v1", START, rng) for _ in range(20_000)) if choice
    )
    assert sum(counts.values()) == 20_000
    assert abs(counts[1] - 10_000) < 500, counts


# --- creatives ------------------------------------------------------------------------------------


def test_campaign_without_creatives_is_never_chosen() -> None:
    index = DecisionIndex.build(
        [campaign(1, venues=("v1",), creatives=0), campaign(2, all_venues=True, creatives=())]
    )
    for seed in range(50):
        assert chosen_id(index, "v1", START, seed) is None


def test_campaign_without_creatives_leaves_the_slot_to_one_with_creatives() -> None:
    index = DecisionIndex.build([campaign(1, all_venues=True, creatives=0), campaign(2, venues=("v1",))])
    for seed in range(50):
        assert chosen_id(index, "v1", START, seed) == 2


def test_choice_creative_belongs_to_the_chosen_campaign() -> None:
    index = DecisionIndex.build([campaign(n, all_venues=True, creatives=3) for n in range(1, 5)])
    rng = random.Random(3)
    for _ in range(500):
        choice = choose(index, "v1", START, rng)
        assert isinstance(choice, Choice)
        assert choice.creative in choice.campaign.creatives
        assert choice.creative.campaign_id == choice.campaign.id


# --- nothing to play ------------------------------------------------------------------------------


def test_choose_returns_none_from_an_empty_index() -> None:
    assert choose(DecisionIndex.build([]), "v1", START, random.Random(0)) is None


def test_choose_returns_none_when_no_candidate_is_in_flight() -> None:
    index = DecisionIndex.build(
        [
            campaign(1, venues=("v1",), start_at=START, end_at=START + 10),
            campaign(2, all_venues=True, start_at=START + 20, end_at=START + 30),
        ]
    )
    for play_time in (START - 1, START + 10, START + 15, START + 30):
        assert chosen_id(index, "v1", play_time) is None


# --- randomness -----------------------------------------------------------------------------------


def draws(index: DecisionIndex, seed: int, n: int = 300) -> list[tuple[int, int]]:
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        choice = choose(index, "v1", START, rng)
        assert choice is not None
        out.append((choice.campaign.id, choice.creative.id))
    return out


MIXED = DecisionIndex.build(
    [
        campaign(1, venues=("v1",), creatives=2),
        campaign(2, all_venues=True, creatives=3),
        campaign(3, venues=("v1", "v2"), creatives=1),
    ]
)


def test_same_seed_gives_the_same_sequence_of_choices() -> None:
    assert draws(MIXED, 1234) == draws(MIXED, 1234)


def test_different_seeds_give_different_sequences() -> None:
    assert draws(MIXED, 1) != draws(MIXED, 2)


def test_choose_draws_only_from_the_given_random_source() -> None:
    random.seed(1)
    first = draws(MIXED, 99)
    random.seed(2)
    assert draws(MIXED, 99) == first


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_campaigns_are_chosen_roughly_uniformly(seed: int) -> None:
    n = 30_000
    counts = Counter(campaign_id for campaign_id, _ in draws(MIXED, seed, n))
    assert set(counts) == {1, 2, 3}
    for campaign_id in (1, 2, 3):
        assert abs(counts[campaign_id] - n / 3) < 0.05 * n / 3, counts


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_creatives_are_chosen_roughly_uniformly_within_a_campaign(seed: int) -> None:
    index = DecisionIndex.build([campaign(1, all_venues=True, creatives=4)])
    n = 20_000
    counts = Counter(creative_id for _, creative_id in draws(index, seed, n))
    assert set(counts) == {100, 101, 102, 103}
    for creative_id in counts:
        assert abs(counts[creative_id] - n / 4) < 0.05 * n / 4, counts


def test_campaign_choice_is_uniform_over_campaigns_not_over_creatives() -> None:
    index = DecisionIndex.build(
        [campaign(1, all_venues=True, creatives=9), campaign(2, all_venues=True, creatives=1)]
    )
    n = 20_000
    counts = Counter(campaign_id for campaign_id, _ in draws(index, 5, n))
    assert abs(counts[1] - n / 2) < 0.05 * n / 2, counts
