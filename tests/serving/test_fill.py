"""fill_slot: the decision, the reservation in the real ledger, and what happens when the ledger refuses."""

from __future__ import annotations

import asyncio
import random

import pytest

from adslot.catalog import Catalog
from adslot.decision.index import DecisionIndex
from adslot.decision.model import Cap, LiveCampaign, VenueProfile
from adslot.ids import uuid7
from adslot.ledger.budget import DeliveryCache
from adslot.ledger.group_commit import GroupCommitter
from adslot.ledger.records import Operation, Verdict
from adslot.ledger.store import LedgerStore
from adslot.serving.fill import SlotRequest, Timing, fill_slot
from tests.decision.factories import START, campaign
from tests.ledger.stores import LedgerDatabase

PLAY = START + 3600


def capped(campaign_id: int, plays: int, *, tier: str = "standard") -> LiveCampaign:
    base = campaign(campaign_id, tier=tier)  # type: ignore[arg-type]
    return LiveCampaign(
        **{f: getattr(base, f) for f in LiveCampaign.__slots__ if f != "caps"},  # type: ignore[attr-defined]
        caps=(Cap("lifetime", "plays", plays),),
    )


def catalog_of(*campaigns: LiveCampaign) -> Catalog:
    return Catalog(
        version=1,
        keys={},
        venues={"v1": VenueProfile("v1", impressions_per_play=2.5)},
        screens={},
        index=DecisionIndex.build(campaigns),
        creatives={c.id: c for lc in campaigns for c in lc.creatives},
    )


def run_fills(
    db: LedgerDatabase,
    catalog: Catalog,
    count: int,
    *,
    concurrent: bool,
    cache: DeliveryCache | None = None,
    key_id: int | None = None,
) -> list[int | None]:
    """Fill `count` slots (all at once, or one after another), asked for with `key_id`; the campaign id of
    each, None for no fill."""
    shared = cache if cache is not None else DeliveryCache()

    async def scenario(store: LedgerStore) -> list[int | None]:
        writer: GroupCommitter[Operation, Verdict] = GroupCommitter(store.apply)
        writer.start()
        rng = random.Random(5)

        async def one(n: int) -> int | None:
            filled = await fill_slot(
                catalog,
                shared,
                writer,
                rng,
                SlotRequest(1, "v1", f"s{n}", PLAY, key_id),
                now=PLAY - 60,
                play_window_seconds=900,
                new_id=uuid7,
            )
            return None if filled is None else filled[0].campaign_id

        try:
            if concurrent:
                return list(await asyncio.gather(*(one(n) for n in range(count))))
            return [await one(n) for n in range(count)]
        finally:
            await writer.close()

    return db.run(scenario)


def test_a_capped_sponsorship_fills_until_its_cap_then_the_house_campaign_fills(db: LedgerDatabase) -> None:
    catalog = catalog_of(capped(1, 3, tier="sponsorship"), campaign(2, tier="house"))
    assert run_fills(db, catalog, 5, concurrent=False) == [1, 1, 1, 2, 2]
    cap, reserved, delivered, _ = db.counters()["c1:life:plays"]
    assert (cap, reserved, delivered) == (3, 3, 0)


def test_the_issued_record_keeps_its_claims_and_the_venue_audience(db: LedgerDatabase) -> None:
    catalog = catalog_of(capped(1, 3))
    run_fills(db, catalog, 1, concurrent=False)
    (row,) = db.rows().values()
    assert row["claims"] == '[["c1:life:plays",1]]'
    assert row["impressions"] == pytest.approx(2.5)


@pytest.mark.parametrize("racers", [12, 40])
def test_concurrent_requests_racing_for_the_last_units_fill_every_slot_without_passing_a_cap(
    db: LedgerDatabase, racers: int
) -> None:
    """A worker whose cache never knows (as after other workers took the units) sees most reservations
    refused, more times than a slot retries: each slot still fills, from the campaigns with room or finally
    the house campaign, and no cap is passed."""
    limited = [capped(n, 1) for n in range(1, 9)]
    catalog = catalog_of(*limited, campaign(99, tier="house"))
    stale = DeliveryCache(ttl_seconds=-1.0)
    filled = run_fills(db, catalog, racers, concurrent=True, cache=stale)
    assert None not in filled
    for n in range(1, 9):
        assert filled.count(n) == 1
    assert filled.count(99) == racers - 8
    counters = db.counters()
    assert all(reserved + delivered <= cap for cap, reserved, delivered, _ in counters.values() if cap)


def test_a_slot_nobody_can_fill_is_answered_no_ad_and_counted_as_a_request(db: LedgerDatabase) -> None:
    catalog = catalog_of(capped(1, 1))
    assert run_fills(db, catalog, 3, concurrent=False) == [1, None, None]
    hour = PLAY - PLAY % 3600
    requests = sum(r for (venue, _, h), (r, _) in db.stats().items() if venue == "v1" and h == hour)
    fills = sum(f for (venue, _, h), (_, f) in db.stats().items() if venue == "v1" and h == hour)
    assert (requests, fills) == (3, 1)


def test_the_asking_key_is_stored_with_its_ad_request_and_counts_its_fills_and_no_fills(
    db: LedgerDatabase,
) -> None:
    catalog = catalog_of(capped(1, 1))
    assert run_fills(db, catalog, 3, concurrent=False, key_id=42) == [1, None, None]
    (row,) = db.rows().values()
    assert row["key_id"] == 42
    assert db.key_stats() == {(42, PLAY - PLAY % 3600): (3, 1)}


def test_the_timing_header_tells_the_auction_and_the_record_only_once_partners_were_asked() -> None:
    timing = Timing()
    assert timing.header() is None  # no partner asked: nothing to tell
    timing.record_ms = 2.04
    assert timing.header() is None
    timing.demand_ms = 151.26
    assert timing.header() == ("server-timing", "demand;dur=151.3, record;dur=2.0")
