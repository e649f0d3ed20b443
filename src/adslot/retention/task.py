"""The retention task of a worker: every few minutes, one rollup pass over its environment (rollup.py).

A pass rolls batch after batch, resting `pause` seconds after each, so the ledger writer (on SQLite, the
other holder of the write turn) commits many batches of its own between two of ours, and the hot paths never
wait behind more than one of our batches. Every worker runs a task; their batches take turns (rollup.py says
how), so more workers never count twice, they only share the work. Off (no task at all) unless
ADSLOT_RETENTION_DAYS is set.
"""

from __future__ import annotations

import asyncio
import logging
import random
import time
from collections.abc import Callable

import anyio.to_thread
import sqlalchemy as sa

from adslot.retention.rollup import BUCKET_SECONDS, HOUR, cutoff, due, roll_batch, trim_key_stats
from adslot.settings import Settings
from adslot.storage.failures import OutageLog
from adslot.tasks import stop_tasks

log = logging.getLogger(__name__)

INTERVAL_SECONDS = 300.0
"""Between two passes: the cutoff moves by a 15-minute bucket at a time."""
MAX_BATCHES = 10_000
"""Batches in one pass at most (5 million rows at the default size): a pass always ends."""


class RetentionTask:
    """Runs `run_pass` every `interval` seconds while started; does nothing when `days` is None."""

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
    ) -> None:
        self.engine = engine
        self.days = days
        self.batch_rows = batch_rows
        self.pause = pause
        self.interval = interval
        self._now = now
        self._name = name
        self._task: asyncio.Task[None] | None = None
        self._outages = OutageLog(log)

    @classmethod
    def of(cls, settings: Settings, engine: sa.Engine, env_name: str) -> RetentionTask:
        return cls(
            engine,
            settings.retention_days,
            batch_rows=settings.retention_batch_rows,
            pause=settings.retention_pause_seconds,
            name=f"retention-{env_name}",
        )

    def start(self) -> None:
        if self.days is not None:
            self._task = asyncio.get_running_loop().create_task(self._run(), name=self._name)

    async def stop(self) -> None:
        """Cancel the loop; a batch in flight finishes first (its thread is waited for), atomically."""
        await stop_tasks(self._task)
        self._task = None

    async def _run(self) -> None:
        # Workers started together spread their first passes over the first interval.
        await asyncio.sleep(random.uniform(0.1, 1.0) * self.interval)
        while True:
            try:
                await self.run_pass()
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
        if not await anyio.to_thread.run_sync(due, self.engine, before):
            return 0
        total = 0
        for _ in range(MAX_BATCHES):
            batch = await anyio.to_thread.run_sync(roll_batch, self.engine, before, now, self.batch_rows)
            total += batch.rows
            if progress is not None:
                progress(total)
            if batch.busy or batch.rows < self.batch_rows:
                break
            await asyncio.sleep(self.pause)
        for _ in range(MAX_BATCHES):
            trimmed = await anyio.to_thread.run_sync(
                trim_key_stats, self.engine, before - before % HOUR, self.batch_rows
            )
            if trimmed < self.batch_rows:
                break
            await asyncio.sleep(self.pause)
        if total:
            log.info("%s: rolled up %d ad requests played before %d", self._name, total, before)
        return total
