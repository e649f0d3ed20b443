"""A migrated ledger database on SQLite or PostgreSQL, for tests that drive the real stores."""

from __future__ import annotations

import asyncio
import collections
import contextlib
import itertools
import random
import sqlite3
import uuid
from collections.abc import Awaitable, Callable, Iterator, Sequence
from dataclasses import dataclass
from multiprocessing import Queue
from pathlib import Path
from typing import Any, TypeVar

import sqlalchemy as sa

from adslot.ids import uuid7
from adslot.ledger.backends import database_store, ledger_for
from adslot.ledger.claims import Claim, Claims, PacePlan, Spacing, claims_json, parse_claims
from adslot.ledger.group_commit import GroupCommitter
from adslot.ledger.records import AdRequest, Fire, Issue, NoFill, Operation, Release, Settle, Verdict
from adslot.ledger.resolve import TIME_INDEX, Times
from adslot.ledger.store import LedgerStore
from adslot.settings import EnvironmentSettings
from adslot.storage.database import sqlite_path
from adslot.storage.tables import (
    ad_requests,
    delivery_counters,
    demand_wins,
    key_stats,
    ledger_answers,
    request_stats,
    screen_plays,
    screen_status,
)

T = TypeVar("T")
PLAY = 1_800_000_000
WINDOW = 900


@dataclass
class LedgerDatabase:
    backend: str
    env: EnvironmentSettings
    engine: sa.Engine

    def store(self) -> LedgerStore:
        return database_store(self.env.database_url, self.env.database_schema)

    def counters(self) -> dict[str, tuple[int | None, int, int, int | None]]:
        with self.engine.connect() as conn:
            rows = conn.execute(sa.select(delivery_counters)).all()
        return {r.key: (r.cap, r.reserved, r.delivered, r.last_at) for r in rows}

    def rows(self) -> dict[uuid.UUID, dict[str, Any]]:
        with self.engine.connect() as conn:
            rows = conn.execute(sa.select(ad_requests)).mappings().all()
        return {r["id"]: dict(r) for r in rows}

    def stats(self) -> dict[tuple[str, str, int], tuple[int, int]]:
        with self.engine.connect() as conn:
            rows = conn.execute(sa.select(request_stats)).all()
        return {(r.venue_id, r.screen_id, r.hour): (r.requests, r.fills) for r in rows}

    def key_stats(self) -> dict[tuple[int, int], tuple[int, int]]:
        """(requests, fills) by (key id, hour)."""
        with self.engine.connect() as conn:
            rows = conn.execute(sa.select(key_stats)).all()
        return {(r.key_id, r.hour): (r.requests, r.fills) for r in rows}

    @contextlib.contextmanager
    def write_lock(self) -> Iterator[None]:
        """Hold what a ledger batch must take to commit, so that no writer can answer until it is let go."""
        if self.backend == "sqlite":
            conn = sqlite3.connect(sqlite_path(self.env.database_url), isolation_level=None)
            conn.execute("BEGIN IMMEDIATE")
            try:
                yield
            finally:
                conn.execute("ROLLBACK")
                conn.close()
        else:
            with self.engine.begin() as held:
                held.exec_driver_sql("LOCK TABLE ad_requests IN ACCESS EXCLUSIVE MODE")
                yield

    def clear(self) -> None:
        with self.engine.begin() as conn:
            for table in (
                ad_requests,
                delivery_counters,
                request_stats,
                key_stats,
                ledger_answers,
                demand_wins,
                screen_status,
                screen_plays,
            ):
                conn.execute(sa.delete(table))

    def run(self, scenario: Callable[[LedgerStore], Awaitable[T]]) -> T:
        """Run `scenario` against a started store, then close it."""

        async def main() -> T:
            store = self.store()
            await store.start()
            try:
                return await scenario(store)
            finally:
                await store.close()

        return asyncio.run(main())

    def apply(self, operations: Sequence[Operation]) -> list[Verdict]:
        """One batch, in one transaction, as the group committer would hand it over."""

        async def batch(store: LedgerStore) -> list[Verdict]:
            return await store.apply(operations)

        return self.run(batch)


def record(
    play_time: int = PLAY,
    *,
    account_id: int = 5,
    venue_id: str = "lobby",
    screen_id: str | None = "s1",
    campaign_id: int = 1,
    claims: Claims | None = None,
    impressions: float = 1.0,
    key_id: int | None = None,
) -> AdRequest:
    return AdRequest(
        id=uuid7(),
        account_id=account_id,
        venue_id=venue_id,
        screen_id=screen_id,
        play_time=play_time,
        created_at=play_time - 60,
        expires_at=play_time + WINDOW,
        campaign_id=campaign_id,
        creative_id=1,
        impressions=impressions,
        claims=claims_json(claims),
        key_id=key_id,
    )


# --- a concurrent workload of several workers on one database ----------------------------------------


def claims_for(campaign_id: int, screen_id: str, play_time: int, impressions: float) -> Claims:
    """What the workload's three campaigns claim, recomputable from a stored row (so a checker can).

    Campaign 1: a lifetime cap paced evenly, and separation (category "cars", 5 minutes) per screen;
    campaign 2: a daily impressions cap and at most 2 plays per screen and hour; campaign 3: nothing.
    """
    hour = play_time - play_time % 3600
    if campaign_id == 1:
        counts = (
            Claim("c1:life:plays", 1, 12),
            Claim(f"c1:hour:{hour}", 1, None, PacePlan("c1:life:plays", 12, 3)),
        )
        return Claims(counts, (Spacing(f"s:v/{screen_id}:cars", play_time, 300),))
    if campaign_id == 2:
        return Claims(
            (
                Claim("c2:day:2027-01-15:impressions", round(impressions * 1000), 12_000),
                Claim(f"f2:v/{screen_id}:h:{hour}", 1, 2),
            )
        )
    return Claims()


@dataclass
class Clock:
    """The workload's virtual time: every operation moves it on a little, shared by all workers."""

    now: int

    def tick(self, rng: random.Random) -> int:
        self.now += rng.randint(0, 15)
        return self.now


async def _task(
    writer: GroupCommitter[Operation, Verdict],
    rng: random.Random,
    clock: Clock,
    operations: int,
    seen: collections.Counter[str],
) -> None:
    mine: list[AdRequest] = []
    for _ in range(operations):
        now = clock.tick(rng)
        roll = rng.random()
        if roll < 0.5 or not mine:
            campaign_id = rng.choice((1, 1, 2, 2, 3))
            screen_id = rng.choice(("s1", "s2"))
            impressions = rng.uniform(0.5, 3.0)
            play_time = now + rng.randint(0, 600)
            claims = claims_for(campaign_id, screen_id, play_time, impressions)
            rec = AdRequest(
                id=uuid7(),
                account_id=5,
                venue_id="v",
                screen_id=screen_id,
                play_time=play_time,
                created_at=now,
                expires_at=play_time + WINDOW,
                campaign_id=campaign_id,
                creative_id=1,
                impressions=impressions,
                claims=claims_json(claims),
            )
            verdict = await writer.submit(Issue(rec, claims if claims else None))
            assert verdict.outcome in ("issued", "rejected")
            seen[verdict.reason or verdict.outcome] += 1
            if verdict.outcome == "issued":
                mine.append(rec)
            else:
                await writer.submit(NoFill("v", screen_id, play_time))
        elif roll < 0.8:
            rec = rng.choice(mine)
            event = "impression" if rng.random() < 0.8 else "complete"
            verdict = await writer.submit(Fire(rec.id, event, rng.choice(("wrapper", "inline")), now))
            seen[f"{event} {verdict.outcome}"] += 1
        elif roll < 0.92:
            verdict = await writer.submit(Release(rng.choice(mine).id, 5, now))
            seen[f"release {verdict.outcome}"] += 1
        else:
            verdict = await writer.submit(Settle(now, limit=rng.randint(1, 20)))
            seen["settled"] += verdict.settled


async def workload(
    env: EnvironmentSettings,
    seed: int,
    workers: int,
    tasks: int,
    operations: int,
    writer_process: bool = False,
    socket_dir: Path | None = None,
) -> collections.Counter[str]:
    """`workers` stores (each its own connection or pool and group committer, as worker processes have),
    each running `tasks` concurrent request loops of `operations` random operations; what came of them.
    `writer_process` gives each store a writer process of its own (SQLite's ledger as an app outside `adslot
    serve` runs it); with `socket_dir` they all dial the one shared writer there, as `adslot serve` does."""
    rng = random.Random(seed)
    seen: collections.Counter[str] = collections.Counter()
    clock = Clock(PLAY)
    stores = [
        ledger_for(env, socket_dir)
        if writer_process
        else database_store(env.database_url, env.database_schema)
        for _ in range(workers)
    ]
    writers: list[GroupCommitter[Operation, Verdict]] = []
    for store in stores:
        await store.start()
        writer: GroupCommitter[Operation, Verdict] = GroupCommitter(
            store.apply, rng.choice((1, 4, 16, 64)), 2 if writer_process else 1
        )
        writer.start()
        writers.append(writer)
    try:
        await asyncio.gather(
            *(
                _task(writer, random.Random(rng.random()), clock, operations, seen)
                for writer in writers
                for _ in range(tasks)
            )
        )
    finally:
        for writer in writers:
            await writer.close()
        for store in stores:
            await store.close()
    return seen


def run_workload_process(env: EnvironmentSettings, seed: int, results: Queue[dict[str, int]]) -> None:
    """Entry point of a worker process in the multi-process test: runs the workload, reports what it saw."""
    results.put(dict(asyncio.run(workload(env, seed, workers=2, tasks=3, operations=80))))


def over_cap(engine: sa.Engine) -> list[tuple[str, int, int, int]]:
    """Counters whose delivered + reserved exceeds their cap, as committed right now."""
    query = sa.select(
        delivery_counters.c.key,
        delivery_counters.c.cap,
        delivery_counters.c.reserved,
        delivery_counters.c.delivered,
    ).where(
        delivery_counters.c.cap.is_not(None),
        delivery_counters.c.reserved + delivery_counters.c.delivered > delivery_counters.c.cap,
    )
    with engine.connect() as conn:
        return [tuple(r) for r in conn.execute(query)]


def check_accounting(db: LedgerDatabase) -> int:
    """Every counter holds exactly what the stored ad requests account for, none is over its cap, and no two
    plays of a category on a screen are closer than their gap. Returns how many ad requests were checked."""
    rows = db.rows()
    reserved: dict[str, int] = {}
    delivered: dict[str, int] = {}
    plays: dict[str, list[tuple[int, int]]] = {}
    for row in rows.values():
        claims = claims_for(row["campaign_id"], row["screen_id"], row["play_time"], row["impressions"])
        assert row["claims"] == claims_json(claims)
        # A played ad request holds its units until the sweep settles it as played, which delivers them.
        holding = row["settle_reason"] is None
        delivering = row["settle_reason"] == "played"
        for key, units in parse_claims(row["claims"]):
            if holding:
                reserved[key] = reserved.get(key, 0) + units
            if delivering:
                delivered[key] = delivered.get(key, 0) + units
        for s in claims.spacings:
            plays.setdefault(s.key, []).append((s.play_time, s.gap_seconds))
    counters = db.counters()
    for key, (cap, res, dlv, _) in counters.items():
        assert res == reserved.get(key, 0), f"{key}: reserved {res}, ad requests hold {reserved.get(key, 0)}"
        assert dlv == delivered.get(key, 0), (
            f"{key}: delivered {dlv}, ad requests played {delivered.get(key, 0)}"
        )
        if cap is not None and not key.startswith("s:"):
            assert res + dlv <= cap, f"{key}: {res} + {dlv} > {cap}"
    assert set(reserved) | set(delivered) <= set(counters)
    for key, times in plays.items():
        for (t1, g1), (t2, g2) in itertools.combinations(times, 2):
            assert abs(t1 - t2) >= max(g1, g2), f"{key}: plays at {t1} and {t2}"
    return len(rows)


def times_of(columns: dict[str, int]) -> Times:
    """An ad request's event times with the given columns set, the others None."""
    return tuple(columns.get(column) for column in TIME_INDEX)
