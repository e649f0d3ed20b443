"""What each demand partner was asked and answered, per UTC hour of the slots' play time, in the database.

`PartnerCaller` tallies its partners in memory, for /metrics, and forgets them with the process. The demand
report needs them per hour and across workers and restarts, so each worker also counts every ask here (pure
in memory, on the event loop: the hot path never waits for the database) and a background task adds what was
counted to `demand_stats` every few seconds, one upsert per (partner, hour, metric) in one transaction. Every
worker adds to the same rows, so their counts add up.

A flush takes the counts out under a lock before writing them; a flush that fails puts them back (added to
those counted meanwhile), so a count is written exactly once whatever the database does, and the loop goes
on. Only a process that dies between two flushes loses what it counted since the last one.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections import Counter
from typing import Any

import anyio.to_thread
import sqlalchemy as sa
from sqlalchemy.dialects import postgresql, sqlite

from adslot.demand.caller import AskResult
from adslot.storage.database import write_transaction
from adslot.storage.tables import demand_stats
from adslot.tasks import stop_tasks

log = logging.getLogger(__name__)

HOUR = 3600
METRIC_LENGTH = 64
"""demand_stats.metric's width: a longer `error:<reason>` is cut to it rather than refused."""
OUTCOME_METRICS = {
    "bid": "bids",
    "no_bid": "no_bids",
    "dropped": "dropped",
    "timeout": "timeouts",
    "error": "errors",
    "skipped_qps": "skipped_qps",
    "skipped_breaker": "skipped_breaker",
}
"""The metric each `PartnerOutcome.outcome` adds 1 to."""
SKIPS = frozenset({"skipped_qps", "skipped_breaker"})
"""Outcomes of partners that were not asked: they are not requests."""

Key = tuple[str, int, str]
"""(partner, hour, metric): demand_stats' primary key."""


def hour_of(play_time: int) -> int:
    """The UTC hour a slot's play_time falls in, as the epoch seconds of its start."""
    return play_time - play_time % HOUR


def _metric(name: str) -> str:
    return name[:METRIC_LENGTH]


class DemandStats:
    """One per process and environment: counts asks in memory and adds them to `demand_stats` every
    `interval_seconds` (once started) and when stopped."""

    def __init__(
        self, engine: sa.Engine, *, interval_seconds: float = 5.0, name: str = "demand-stats"
    ) -> None:
        self.engine = engine
        self.interval_seconds = interval_seconds
        self.name = name
        self._counts: Counter[Key] = Counter()
        # count() runs on the event loop, a flush's write in a worker thread, which puts back what it could
        # not write: the lock keeps the two from losing each other's additions.
        self._lock = threading.Lock()
        self._flushing = threading.Lock()
        self._task: asyncio.Task[None] | None = None
        self._failing = False

    def count(self, result: AskResult, play_time: int) -> None:
        """Count what came of each partner asked (or skipped) for one slot played at `play_time`."""
        hour = hour_of(play_time)
        with self._lock:
            counts = self._counts
            for item in result.outcomes:
                partner, kind = item.partner, item.outcome
                counts[(partner, hour, OUTCOME_METRICS[kind])] += 1
                if kind in SKIPS:
                    continue
                counts[(partner, hour, "requests")] += 1
                if kind == "error":
                    counts[(partner, hour, _metric(f"error:{item.reason or 'unknown'}"))] += 1
                for drop in item.checked.drops if item.checked is not None else ():
                    if drop.reason != "no_bid":
                        counts[(partner, hour, f"drop:{drop.reason}")] += 1

    def lost(self, partner: str, play_time: int, n: int = 1) -> None:
        """Count `n` of the partner's bids for a slot played at `play_time` that lost the auction."""
        with self._lock:
            self._counts[(partner, hour_of(play_time), "lost")] += n

    def notice_dropped(self, partner: str, play_time: int, fault: str) -> None:
        """Count a notice of the partner's (nurl, lurl or burl) not sent, for `fault` (notice_rules.py)."""
        with self._lock:
            self._counts[(partner, hour_of(play_time), _metric(f"notice:{fault}"))] += 1

    def pending(self) -> dict[Key, int]:
        """A copy of what was counted and not yet written."""
        with self._lock:
            return dict(self._counts)

    def start(self) -> None:
        """Flush every interval_seconds from the running event loop until stopped."""
        self._task = asyncio.get_running_loop().create_task(self._run(), name=self.name)

    async def stop(self) -> None:
        """Stop the loop (a write in flight finishes first), then write what is left."""
        await stop_tasks(self._task)
        self._task = None
        await self.flush()

    async def flush(self) -> bool:
        """Write what was counted so far, in a worker thread; False (the counts kept) if it failed."""
        return await anyio.to_thread.run_sync(self.flush_now)

    def flush_now(self) -> bool:
        """Write what was counted so far, in this thread; False (the counts kept for the next flush, a warning
        logged for the first failure in a row) if the database refused. One flush at a time: a stop that
        cancels the loop abandons (does not end) a flush running in its thread, and the stop's own flush
        must wait for that one to put back what it could not write before it takes what is left."""
        with self._flushing:
            with self._lock:
                taken, self._counts = self._counts, Counter()
            if not taken:
                return True
            try:
                write_counts(self.engine, taken)
            except Exception as exc:  # kept and retried: the loop must go on whatever the database does
                with self._lock:
                    self._counts.update(taken)
                if not self._failing:
                    log.warning(
                        "%s: could not write demand stats (kept for the next flush): %s", self.name, exc
                    )
                self._failing = True
                return False
            if self._failing:
                log.info("%s: demand stats written again", self.name)
            self._failing = False
            return True

    async def _run(self) -> None:
        while True:
            await asyncio.sleep(self.interval_seconds)
            await self.flush()


def write_counts(engine: sa.Engine, counts: Counter[Key] | dict[Key, int]) -> None:
    """Add the counts to demand_stats in one transaction, creating the rows that are new."""
    rows: list[dict[str, Any]] = [
        {"partner": partner, "hour": hour, "metric": metric, "count": n}
        for (partner, hour, metric), n in sorted(counts.items())
        if n
    ]
    if not rows:
        return
    dialect = postgresql if engine.dialect.name == "postgresql" else sqlite
    insert = dialect.insert(demand_stats)
    statement = insert.on_conflict_do_update(
        index_elements=["partner", "hour", "metric"],
        set_={"count": demand_stats.c["count"] + insert.excluded["count"]},
    )
    with write_transaction(engine) as conn:
        conn.execute(statement, rows)
