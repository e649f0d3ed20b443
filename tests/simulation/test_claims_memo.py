"""The forecast's remembered plans and cache answers are plan_claims' and the DeliveryCache's: same claims,
same verdicts, through counters that change, are learnt anew and are forgotten for room."""

from __future__ import annotations

import math
import random
from collections.abc import Iterator

import pytest

from adslot.catalog import Catalog, load_catalog
from adslot.ledger.budget import DeliveryCache, Snapshot
from adslot.ledger.claims import Claim, Claims, PacePlan, Spacing, plan_claims
from adslot.serving.fill import SlotRequest, slot_for
from adslot.simulation.claims_memo import Planner, TrustedCache
from adslot.simulation.scenario import build_network
from tests.conftest import migrated_engine

START = 1_795_392_000  # 2026-11-23 00:00 UTC, a Monday
COUNT_KEYS = [f"c{i}" for i in range(6)]
SPACING_KEYS = [f"s:{i}" for i in range(3)]


def random_claims(rng: random.Random) -> Claims:
    """Count claims on distinct counters (as plan_claims makes them), some paced on another's counter, some
    with a separation; caps small enough that one claim alone can exceed them."""
    counts = []
    for key in rng.sample(COUNT_KEYS, rng.randint(0, 3)):
        cap = rng.choice([None, 0, 1, 3, 8])
        pace = None
        if rng.random() < 0.3:
            pace = PacePlan(rng.choice(COUNT_KEYS), rng.randint(0, 20), rng.randint(1, 5))
            cap = None
        counts.append(Claim(key, rng.randint(1, 4), cap, pace))
    spacings: tuple[Spacing, ...] = ()
    if rng.random() < 0.4:
        spacings = (Spacing(rng.choice(SPACING_KEYS), 0, rng.choice([60, 600])),)
    return Claims(tuple(counts), spacings)


def random_counters(rng: random.Random) -> dict[str, Snapshot]:
    counters: dict[str, Snapshot] = {}
    for key in rng.sample(COUNT_KEYS + SPACING_KEYS, rng.randint(1, 3)):
        last_at = rng.choice([None, rng.randrange(0, 3000)]) if key.startswith("s:") else None
        counters[key] = (rng.choice([None, 0, 2, 5, 9]), rng.randint(0, 4), rng.randint(0, 6), last_at)
    return counters


@pytest.mark.parametrize("max_keys", [50_000, 4], ids=["room for all", "forgetting for room"])
def test_the_trusted_cache_answers_as_the_delivery_cache_does(max_keys: int) -> None:
    rng = random.Random(73)
    reference = DeliveryCache(max_keys=max_keys, ttl_seconds=math.inf, clock=lambda: 0.0)
    trusted = TrustedCache(lambda: 0.0, max_keys=max_keys)
    pool = [random_claims(rng) for _ in range(40)]  # asked again and again, as the planner's are
    answers = []
    for step in range(6000):
        roll = rng.random()
        if roll < 0.15:
            counters = random_counters(rng)
            reference.update(counters)
            trusted.update(counters)
        elif roll < 0.16:
            trusted.forget()
        else:
            claims = rng.choice(pool) if roll < 0.9 else random_claims(rng)
            play_time = rng.randrange(0, 3600)
            answer = trusted.accepts(claims, play_time)
            assert answer == reference.accepts(claims, play_time), (step, claims, play_time)
            answers.append(answer)
    assert answers.count(True) > 500 and answers.count(False) > 500, "both answers are exercised"


@pytest.fixture(scope="module")
def catalog(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Catalog]:
    """The simulator's network: caps, even pacing, frequency and separation, in three time zones."""
    for engine in migrated_engine(tmp_path_factory.mktemp("memo"), "sqlite"):
        with engine.begin() as conn:
            build_network(conn, screens=20, campaigns=20, start=START, hours=48, slot_seconds=300, seed=7)
        with engine.connect() as conn:
            yield load_catalog(conn)


def test_the_planner_hands_out_the_claims_plan_claims_plans_one_object_for_equal_claims(
    catalog: Catalog,
) -> None:
    planner = Planner()
    places = sorted(catalog.screens)
    campaigns = sorted(catalog.index.campaigns.values(), key=lambda c: c.id)
    assert any(c.frequency for c in campaigns) and any(c.separation_minutes for c in campaigns)
    shared = 0
    for play_time in range(START + 40, START + 2 * 86_400, 7 * 60 + 13):
        planner.forget_before(play_time)
        claimed: dict[Claim, Claim] = {}
        for venue_id, screen_id in places[: 1 + play_time % 7]:
            slot = slot_for(catalog, SlotRequest(1, venue_id, screen_id, play_time))
            for impressions in (12.5, 3.0):
                for campaign in campaigns:
                    planned = planner(campaign, slot, impressions)
                    assert planned == plan_claims(campaign, slot, impressions)
                    for claim in planned.counts:
                        if claim in claimed:
                            assert claimed[claim] is claim, "equal claims are one object"
                            shared += 1
                        claimed[claim] = claim
    assert shared > 1000, "a campaign's cap and pacing claims are the same on every screen"
