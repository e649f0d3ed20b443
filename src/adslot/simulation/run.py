"""The simulator: the real decision engine and ledger, driven by a virtual clock.

Each screen asks for a slot every `slot_seconds` (a minute ahead of play time, as players do); the player
then plays what it got and fires its impression, except for a share of plays whose PoP is lost (offline
player: the reservation is released at expiry) or arrives after expiry (late: kept, not counted). The ledger
is the real SQLite store with group commit; the expiry sweep runs every virtual minute. Only the clock is
simulated: every time the ledger records comes from it.
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
import random
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
        store = SqliteLedgerStore(path)
        await store.start()
        writer: GroupCommitter[Operation, Verdict] = GroupCommitter(store.apply, 512)
        writer.start()
        try:
            requests, fills = await _drive(config, network.screens, catalog, writer)
        finally:
            await writer.close()
            await store.close()
        with engine.connect() as conn:
            return measure(conn, catalog, config.start, config.hours, requests, fills)
    finally:
        engine.dispose()


async def _drive(
    config: SimulationConfig,
    screens: list[tuple[str, str]],
    catalog: Catalog,
    writer: GroupCommitter[Operation, Verdict],
) -> tuple[int, int]:
    rng = random.Random(config.seed)
    decide_rng = random.Random(config.seed + 1)
    clock = [float(config.start)]
    # The cache forgets counters after a few seconds of the clock it is given: the virtual one here.
    cache = DeliveryCache(clock=lambda: clock[0])
    offsets = {s: rng.randrange(config.slot_seconds) for s in screens}
    fires: list[tuple[int, int, Fire]] = []  # (due, seq, fire)
    seq = itertools.count()
    requests = fills = 0
    end = config.start + config.hours * 3600

    for minute in range(config.start - 120, end + config.play_window_seconds + 120, 60):
        clock[0] = float(minute)
        if minute < end:
            batch = []
            for screen in screens:
                # Slots whose request time (play_time - lead) falls in this minute.
                first = minute + config.lead_seconds
                phase = (offsets[screen] - first) % config.slot_seconds
                play_time = first + phase
                while play_time < first + 60:
                    if config.start <= play_time < end:
                        batch.append(SlotRequest(1, screen[0], screen[1], play_time))
                    play_time += config.slot_seconds
            results = await asyncio.gather(
                *(
                    fill_slot(
                        catalog,
                        cache,
                        writer,
                        decide_rng,
                        request,
                        now=minute,
                        play_window_seconds=config.play_window_seconds,
                        new_id=uuid7,
                    )
                    for request in batch
                )
            )
            requests += len(batch)
            for filled in results:
                if filled is None:
                    continue
                fills += 1
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
        verdict = await writer.submit(Settle(minute))
        if verdict.counters:
            cache.update(verdict.counters)
    return requests, fills
