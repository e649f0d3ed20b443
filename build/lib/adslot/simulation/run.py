"""The simulator: the real decision engine and ledger, driven by a virtual clock.

Each screen asks for a slot every `slot_seconds` (a minute ahead of play time, as players do); the player
then plays what it got and fires its impression, except for a share of plays whose PoP is lost (offline
player: the reservation is released at expiry) or arrives after expiry (late: kept, not counted). The ledger
is the real SQLite store with group commit; the expiry sweep runs every virtual minute. Only the clock is
simulated: every time the ledger records comes from it.

`simulate` runs this over a synthetic network (scenario.py); the forecast (forecast.py) runs the same loop,
`drive`, over a copy of an environment's real inventory and campaigns.
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import sqlalchemy as sa

from adslot.catalog import Catalog, load_catalog
from adslot.ids import uuid7
from adslot.ledger.budget import DeliveryCache
from adslot.ledger.group_commit import GroupCommitter
from adslot.ledger.records import Fire, Operation, Settle, Verdict
from adslot.ledger.sqlite_store import SqliteLedgerStore
from adslot.serving.fill import SlotRequest, fill_slot
from adslot.simulation.report import SimulationReport, measure
from adslot.simulation.scenario import build_network
from adslot.storage.migrate import upgrade

Place = tuple[str, str | None]
"""A screen the loop drives: (venue id, screen id), or (venue id, None) for requests that name no screen."""


@dataclass(frozen=True, slots=True)
class Drive:
    """The virtual players: when they ask for slots, and how their Proof of Play goes."""

    start: int
    hours: int
    slot_seconds: int = 300
    lead_seconds: int = 60
    play_window_seconds: int = 900
    pop_loss: float = 0.0
    """Share of plays whose PoP never arrives."""
    pop_late: float = 0.0
    """Share of plays whose PoP arrives after the ad request expired."""
    pop_repeat: float = 0.0
    """Share of PoPs the player sends twice (retries)."""
    seed: int = 7
    cache_seconds: float = 5.0
    """How long the worker's cached counters are trusted, in virtual seconds (DeliveryCache's ttl). Each
    minute's requests are decided together, so with 5 seconds the cache is stale at every minute's start and
    the ledger refuses what it would have ruled out."""
    sweep: bool = True
    """Run the expiry sweep every minute. A run in which nothing is released (no PoP lost) can go without:
    settling only moves reserved units to delivered, and admission reads their sum."""
    draw_per_slot: bool = False
    """Give each decision its own random stream, seeded by (seed, venue, screen, play time), instead of one
    stream for the run: two runs that differ in one campaign then draw alike wherever it takes no part, so
    their difference is that campaign's doing rather than noise."""


@dataclass(slots=True)
class Delivery:
    """What the loop counted as it went; delivery itself is read back from the ledger's database."""

    requests: int = 0
    fills: int = 0


@dataclass(frozen=True, slots=True)
class SimulationConfig:
    screens: int = 500
    campaigns: int = 20
    hours: int = 48
    slot_seconds: int = 300
    lead_seconds: int = 60
    play_window_seconds: int = 900
    pop_loss: float = 0.03
    """Share of plays whose PoP never arrives."""
    pop_late: float = 0.02
    """Share of plays whose PoP arrives after the ad request expired."""
    pop_repeat: float = 0.05
    """Share of PoPs the player sends twice (retries)."""
    seed: int = 7
    start: int = 1_795_392_000  # 2026-11-23 00:00 UTC, a Monday

    def drive(self) -> Drive:
        return Drive(
            start=self.start,
            hours=self.hours,
            slot_seconds=self.slot_seconds,
            lead_seconds=self.lead_seconds,
            play_window_seconds=self.play_window_seconds,
            pop_loss=self.pop_loss,
            pop_late=self.pop_late,
            pop_repeat=self.pop_repeat,
            seed=self.seed,
        )


async def simulate(config: SimulationConfig, data_dir: Path) -> SimulationReport:
    data_dir.mkdir(parents=True, exist_ok=True)
    path = data_dir / "simulation.sqlite3"
    path.unlink(missing_ok=True)
    engine = sa.create_engine(f"sqlite:///{path}")
    try:
        upgrade(engine, None)
        with engine.begin() as conn:
            network = build_network(
                conn,
                screens=config.screens,
                campaigns=config.campaigns,
                start=config.start,
                hours=config.hours,
                slot_seconds=config.slot_seconds,
                seed=config.seed,
            )
        with engine.connect() as conn:
            catalog = load_catalog(conn)
        places: list[Place] = list(network.screens)
        delivery = await drive(path, catalog, places, config.drive())
        with engine.connect() as conn:
            return measure(conn, catalog, config.start, config.hours, delivery.requests, delivery.fills)
    finally:
        engine.dispose()


async def drive(
    path: Path,
    catalog: Catalog,
    places: Sequence[Place],
    config: Drive,
    observe: Callable[[SlotRequest], None] | None = None,
) -> Delivery:
    """Run the loop against the ledger in the (migrated) SQLite database at `path`, which holds `catalog`.

    `observe` sees every slot request before it is filled."""
    delivery = Delivery()
    store = SqliteLedgerStore(path)
    await store.start()
    writer: GroupCommitter[Operation, Verdict] = GroupCommitter(store.apply, 512)
    writer.start()
    try:
        await _loop(config, places, catalog, writer, delivery, observe)
    finally:
        await writer.close()
        await store.close()
    return delivery


async def _loop(
    config: Drive,
    places: Sequence[Place],
    catalog: Catalog,
    writer: GroupCommitter[Operation, Verdict],
    delivery: Delivery,
    observe: Callable[[SlotRequest], None] | None,
) -> None:
    rng = random.Random(config.seed)
    decide_rng = random.Random(config.seed + 1)
    clock = [float(config.start)]
    # The cache forgets counters after cache_seconds of the clock it is given: the virtual one here.
    cache = DeliveryCache(ttl_seconds=config.cache_seconds, clock=lambda: clock[0])
    offsets = {p: rng.randrange(config.slot_seconds) for p in places}
    fires: list[tuple[int, int, Fire]] = []  # (due, seq, fire)
    seq = itertools.count()
    end = config.start + config.hours * 3600

    def draws(request: SlotRequest) -> random.Random:
        if not config.draw_per_slot:
            return decide_rng
        return random.Random(f"{config.seed}/{request.venue_id}/{request.screen_id}/{request.play_time}")

    for minute in range(config.start - 120, end + config.play_window_seconds + 120, 60):
        clock[0] = float(minute)
        if minute < end:
            batch = []
            for place in places:
                # Slots whose request time (play_time - lead) falls in this minute.
                first = minute + config.lead_seconds
                phase = (offsets[place] - first) % config.slot_seconds
                play_time = first + phase
                while play_time < first + 60:
                    if config.start <= play_time < end:
                        batch.append(SlotRequest(1, place[0], place[1], play_time))
                    play_time += config.slot_seconds
            if observe is not None:
                for request in batch:
                    observe(request)
            results = await asyncio.gather(
                *(
                    fill_slot(
                        catalog,
                        cache,
                        writer,
                        draws(request),
                        request,
                        now=minute,
                        play_window_seconds=config.play_window_seconds,
                        new_id=uuid7,
                    )
                    for request in batch
                )
            )
            delivery.requests += len(batch)
            for filled in results:
                if filled is None:
                    continue
                delivery.fills += 1
                record = filled[0]
                roll = rng.random()
                if roll < config.pop_loss:
                    continue
                if roll < config.pop_loss + config.pop_late:
                    due = record.expires_at + rng.randrange(1, 1800)
                else:
                    due = record.play_time + rng.randrange(0, 120)
                for _ in range(2 if rng.random() < config.pop_repeat else 1):
                    heapq.heappush(fires, (due, next(seq), Fire(record.id, "impression", "wrapper", due)))
        due_now = []
        while fires and fires[0][0] <= minute + 59:
            due_now.append(heapq.heappop(fires)[2])
        if due_now:
            await asyncio.gather(*(writer.submit(f) for f in due_now))
        if config.sweep:
            verdict = await writer.submit(Settle(minute))
            if verdict.counters:
                cache.update(verdict.counters)
