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
import gc
import heapq
import itertools
import math
import random
import uuid
from collections.abc import Callable, Coroutine, Generator, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import sqlalchemy as sa

from adslot.catalog import Catalog, load_catalog
from adslot.ids import uuid7
from adslot.ledger.budget import DeliveryCache
from adslot.ledger.group_commit import GroupCommitter
from adslot.ledger.records import AdRequest, Fire, Operation, Settle, Verdict
from adslot.ledger.sqlite_store import SqliteLedgerStore
from adslot.serving.fill import SlotRequest, fill_slot
from adslot.simulation.claims_memo import Planner, TrustedCache
from adslot.simulation.memory_ledger import MemoryLedger
from adslot.simulation.report import SimulationReport, measure
from adslot.simulation.scenario import build_network
from adslot.storage.migrate import upgrade

MAX_BATCH = 512
"""Operations per ledger batch, as the simulator's group committer takes them."""

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
    writer: GroupCommitter[Operation, Verdict] = GroupCommitter(store.apply, MAX_BATCH)
    writer.start()
    try:
        await _loop(config, places, catalog, writer, delivery, observe)
    finally:
        await writer.close()
        await store.close()
    return delivery


def _offsets(config: Drive, places: Sequence[Place], rng: random.Random) -> dict[Place, int]:
    """Each screen's phase within a slot, drawn first from the run's stream."""
    return {p: rng.randrange(config.slot_seconds) for p in places}


def _minutes(config: Drive) -> range:
    return range(
        config.start - 120, config.start + config.hours * 3600 + config.play_window_seconds + 120, 60
    )


def _requests(
    config: Drive, places: Sequence[Place], offsets: dict[Place, int], minute: int
) -> list[SlotRequest]:
    """The slots whose request time (play_time - lead) falls in this minute, screen by screen."""
    batch: list[SlotRequest] = []
    end = config.start + config.hours * 3600
    if minute >= end:
        return batch
    first = minute + config.lead_seconds
    for place in places:
        phase = (offsets[place] - first) % config.slot_seconds
        play_time = first + phase
        while play_time < first + 60:
            if config.start <= play_time < end:
                batch.append(SlotRequest(1, place[0], place[1], play_time))
            play_time += config.slot_seconds
    return batch


def _draws(config: Drive, shared: random.Random) -> Callable[[SlotRequest], random.Random]:
    """The stream each decision draws from: the run's, or one of its own (Drive.draw_per_slot)."""
    if not config.draw_per_slot:
        return lambda request: shared
    seed = config.seed
    return lambda request: random.Random(f"{seed}/{request.venue_id}/{request.screen_id}/{request.play_time}")


def _schedule_fires(
    config: Drive,
    rng: random.Random,
    results: Sequence[tuple[AdRequest, object] | None],
    fires: list[tuple[int, int, Fire]],
    seq: Iterator[int],
    delivery: Delivery,
) -> None:
    """Count the minute's fills and queue each played one's impression (lost, late or on time, repeated)."""
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


def _due(fires: list[tuple[int, int, Fire]], minute: int) -> list[Fire]:
    due_now = []
    while fires and fires[0][0] <= minute + 59:
        due_now.append(heapq.heappop(fires)[2])
    return due_now


async def _loop(
    config: Drive,
    places: Sequence[Place],
    catalog: Catalog,
    writer: GroupCommitter[Operation, Verdict],
    delivery: Delivery,
    observe: Callable[[SlotRequest], None] | None,
) -> None:
    rng = random.Random(config.seed)
    draws = _draws(config, random.Random(config.seed + 1))
    clock = [float(config.start)]
    # The cache forgets counters after cache_seconds of the clock it is given: the virtual one here.
    cache = DeliveryCache(ttl_seconds=config.cache_seconds, clock=lambda: clock[0])
    offsets = _offsets(config, places, rng)
    fires: list[tuple[int, int, Fire]] = []  # (due, seq, fire)
    seq = itertools.count()
    for minute in _minutes(config):
        clock[0] = float(minute)
        batch = _requests(config, places, offsets, minute)
        if batch:
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
            _schedule_fires(config, rng, results, fires, seq, delivery)
        due_now = _due(fires, minute)
        if due_now:
            await asyncio.gather(*(writer.submit(f) for f in due_now))
        if config.sweep:
            verdict = await writer.submit(Settle(minute))
            if verdict.counters:
                cache.update(verdict.counters)


class _Ask:
    """An operation a fill_slot coroutine waits on; drive_in_memory answers it with coroutine.send, so the
    same fill_slot runs without an event loop."""

    __slots__ = ("operation",)

    def __init__(self, operation: Operation) -> None:
        self.operation = operation

    def __await__(self) -> Generator[_Ask, Verdict, Verdict]:
        verdict = yield self
        return verdict


class _Asks:
    """fill_slot's writer in drive_in_memory: each submit is handed back to the drive."""

    def submit(self, operation: Operation) -> _Ask:
        return _Ask(operation)


_Filling = Coroutine[Any, Any, tuple[AdRequest, Any] | None]


def drive_in_memory(
    ledger: MemoryLedger,
    catalog: Catalog,
    places: Sequence[Place],
    config: Drive,
    observe: Callable[[SlotRequest], None] | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> Delivery:
    """drive() on a MemoryLedger, with no event loop and no thread: the same slots, draws and fill_slot,
    whose ledger operations reach the ledger in the batches and the order drive()'s group committer gives
    them (each minute's slots in screen order, at most MAX_BATCH at a time, a refused one retried after the
    verdicts before it), so the outcome is drive()'s. For runs without the expiry sweep (config.sweep
    False).

    `progress(done, total)` is told after each virtual minute."""
    try:
        return _in_memory(ledger, catalog, places, config, observe, progress)
    finally:
        gc.unfreeze()


def _in_memory(
    ledger: MemoryLedger,
    catalog: Catalog,
    places: Sequence[Place],
    config: Drive,
    observe: Callable[[SlotRequest], None] | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> Delivery:
    """drive_in_memory's loop; it leaves the collector frozen (the caller unfreezes it)."""
    if config.sweep:
        raise ValueError("drive_in_memory runs without the expiry sweep")
    delivery = Delivery()
    rng = random.Random(config.seed)
    draws = _draws(config, random.Random(config.seed + 1))
    clock = [float(config.start)]
    cache = (
        TrustedCache(lambda: clock[0])
        if config.cache_seconds == math.inf
        else DeliveryCache(ttl_seconds=config.cache_seconds, clock=lambda: clock[0])
    )
    offsets = _offsets(config, places, rng)
    fires: list[tuple[int, int, Fire]] = []
    seq = itertools.count()
    asks = _Asks()
    # Ids only need to be unique within the run: a counter, not uuid7's random bytes (a system call each).
    numbers = itertools.count(1)

    def new_id() -> uuid.UUID:
        return uuid.UUID(int=next(numbers))

    plan = Planner()
    minutes = _minutes(config)
    # With no PoP lost or late every fill plays, and no decision depends on when its fire comes (admission
    # reads delivered + reserved): the fires are counted at the end, each as its impression would count.
    every_play_counts = config.pop_loss == 0 and config.pop_late == 0
    for done, minute in enumerate(minutes, 1):
        clock[0] = float(minute)
        batch = _requests(config, places, offsets, minute)
        if batch:
            if observe is not None:
                for request in batch:
                    observe(request)
            results: list[tuple[AdRequest, Any] | None] = [None] * len(batch)
            pending: list[tuple[Operation, int, _Filling]] = []
            for i, request in enumerate(batch):
                filling = fill_slot(
                    catalog,
                    cache,
                    asks,
                    draws(request),
                    request,
                    now=minute,
                    play_window_seconds=config.play_window_seconds,
                    new_id=new_id,
                    plan=plan,
                )
                _step(filling, i, None, results, pending)
            while pending:
                chunk = pending[:MAX_BATCH]
                del pending[:MAX_BATCH]
                verdicts = ledger.apply([operation for operation, _, _ in chunk])
                for (_, i, filling), verdict in zip(chunk, verdicts, strict=True):
                    _step(filling, i, verdict, results, pending)
            delivery.requests += len(batch)
            if every_play_counts:
                delivery.fills += sum(filled is not None for filled in results)
            else:
                _schedule_fires(config, rng, results, fires, seq, delivery)
        due_now = _due(fires, minute)
        for i in range(0, len(due_now), MAX_BATCH):
            ledger.apply(due_now[i : i + MAX_BATCH])
        if progress is not None:
            progress(done, len(minutes))
        if minute % 3600 == 0:
            # The next minute's slots play from minute + 60 on: the plans and answers of earlier hours are
            # not asked for again.
            plan.forget_before(minute + config.lead_seconds)
            if isinstance(cache, TrustedCache):
                cache.forget()
        if done % 60 == 0:
            # The ledger's records and states only grow, and the collector's full passes would scan them
            # all, again and again (a fifth of a week's forecast): what is there now is left out of them.
            gc.freeze()
    if every_play_counts:
        ledger.play_all()
    return delivery


def _step(
    filling: _Filling,
    i: int,
    verdict: Verdict | None,
    results: list[tuple[AdRequest, Any] | None],
    pending: list[tuple[Operation, int, _Filling]],
) -> None:
    """Run one fill_slot until it asks the ledger again (queued) or returns (its result kept)."""
    try:
        ask = filling.send(verdict)
    except StopIteration as finished:
        results[i] = finished.value
        return
    pending.append((ask.operation, i, filling))
