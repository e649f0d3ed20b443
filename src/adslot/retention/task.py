"""The retention task of a worker: every few minutes, one rollup pass over its environment (rollup.py).

A pass rolls batch after batch, resting `pause` seconds after each, so the ledger writer (on SQLite, the
other holder of the write turn) commits many batches of its own between two of ours, and the hot paths never
wait behind more than one of our batches. Every worker runs a task; their batches take turns (rollup.py says
how), so more workers never count twice, they only share the work. The rollup is off unless
ADSLOT_RETENTION_DAYS is set. Each pass also trims the fleet's rows (fleet.py): screen_plays hours past
ADSLOT_SCREEN_PLAYS_RETENTION_DAYS and alerts, deliveries and attempts past ADSLOT_ALERT_RETENTION_DAYS,
both on by default. With every retention off there is no task at all.
"""

from __future__ import annotations

import asyncio
import logging
import random
import time
from collections.abc import Callable

import sqlalchemy as sa

from adslot.retention.fleet import trim_alerts, trim_attempts, trim_screen_plays
from adslot.retention.rollup import BUCKET_SECONDS, DAY, HOUR, cutoff, due, roll_batch, trim_key_stats
from adslot.settings import Settings
from adslot.storage.failures import OutageLog
from adslot.tasks import Threads, stop_tasks

log = logging.getLogger(__name__)

INTERVAL_SECONDS = 300.0
"""Between two passes: the cutoff moves by a 15-minute bucket at a time."""
MAX_BATCHES = 10_000
"""Batches in one pass at most (5 million rows at the default size): a pass always ends."""


Trim = Callable[[sa.Engine, int, int], int]


class RetentionTask:
    """Runs `run_pass` (when `days` is set) and `trim_fleet` every `interval` seconds while started; does
    nothing when every retention is None."""

    def __init__(
        self,
        engine: sa.Engine,
        days: int | None,
        *,
        batch_rows: int,
        pause: float,
        interval: float = INTERVAL_SECONDS,
        now: Callable[[], float] = time.time,
        name: str = "retention",
        screen_plays_days: int | None = None,
        alert_days: int | None = None,
    ) -> None:
        self.engine = engine
        self.days = days
        self.screen_plays_days = screen_plays_days
        self.alert_days = alert_days
        self.batch_rows = batch_rows
        self.pause = pause
        self.interval = interval
        self._now = now
        self._name = name
        self._task: asyncio.Task[None] | None = None
        self._outages = OutageLog(log)
        self._threads = Threads()

    @classmethod
    def of(cls, settings: Settings, engine: sa.Engine, env_name: str) -> RetentionTask:
        return cls(
            engine,
            settings.retention_days,
            batch_rows=settings.retention_batch_rows,
            pause=settings.retention_pause_seconds,
            name=f"retention-{env_name}",
            screen_plays_days=settings.screen_plays_retention_days,
            alert_days=settings.alert_retention_days,
        )

    def start(self) -> None:
        if (self.days, self.screen_plays_days, self.alert_days) != (None, None, None):
            self._task = asyncio.get_running_loop().create_task(self._run(), name=self._name)

    async def stop(self) -> None:
        """Cancel the loop, then wait for a batch in flight (in its thread) to end: it is atomic, and its
        engine is disposed by the caller next."""
        await stop_tasks(self._task)
        self._task = None
        await self._threads.wait()

    async def _run(self) -> None:
        # Workers started together spread their first passes over the first interval.
        await asyncio.sleep(random.uniform(0.1, 1.0) * self.interval)
        while True:
            try:
                if self.days is not None:
                    await self.run_pass()
                await self.trim_fleet()
            except Exception as exc:  # a database hiccup must not end the task
                self._outages.failed(f"the retention pass of {self._name}", exc)
            await asyncio.sleep(self.interval)

    async def run_pass(self, before: int | None = None, progress: Callable[[int], None] | None = None) -> int:
        """Roll up, batch by batch, what was played before `before` (a whole bucket; by default the
        retention's cutoff now); the number of ad requests rolled up. `progress(rows)` is told the number
        rolled up so far after each batch."""
        now = int(self._now())
        if before is None:
            assert self.days is not None, "no retention and no cutoff"
            before = cutoff(now, self.days)
        before -= before % BUCKET_SECONDS
        if not await self._threads.run(due, self.engine, before):
            return 0
        total = 0
        for _ in range(MAX_BATCHES):
            batch = await self._threads.run(roll_batch, self.engine, before, now, self.batch_rows)
            total += batch.rows
            if progress is not None:
                progress(total)
            if batch.busy or batch.rows < self.batch_rows:
                break
            await asyncio.sleep(self.pause)
        for _ in range(MAX_BATCHES):
            trimmed = await self._threads.run(
                trim_key_stats, self.engine, before - before % HOUR, self.batch_rows
            )
            if trimmed < self.batch_rows:
                break
            await asyncio.sleep(self.pause)
        if total:
            log.info("%s: rolled up %d ad requests played before %d", self._name, total, before)
        return total

    async def trim_fleet(self) -> int:
        """Delete, batch by batch, the screen_plays hours and the alerts past their retentions; the number
        of rows (hours, alerts, attempts) deleted."""
        now = int(self._now())
        total = 0
        if self.screen_plays_days is not None:
            edge = now - self.screen_plays_days * DAY
            total += await self._trim(trim_screen_plays, edge - edge % HOUR)
        if self.alert_days is not None:
            edge = now - self.alert_days * DAY
            total += await self._trim(trim_alerts, edge)
            total += await self._trim(trim_attempts, edge)
        return total

    async def _trim(self, trim: Trim, before: int) -> int:
        total = 0
        for _ in range(MAX_BATCHES):
            done = await self._threads.run(trim, self.engine, before, self.batch_rows)
            total += done
            if done < self.batch_rows:
                break
            await asyncio.sleep(self.pause)
        if total:
            log.info(
                "%s: trimmed %d %s rows before %d",
                self._name,
                total,
                trim.__name__.removeprefix("trim_"),
                before,
            )
        return total
