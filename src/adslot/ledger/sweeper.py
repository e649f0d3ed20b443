"""The expiry sweep: every few seconds, settle the ad requests that expired, returning unplayed reservations
and delivering played ones.

Without it, an ad request whose player never fired would hold its reserved units until forever, and a
campaign could starve at its cap with nothing delivered. The sweep goes through the same group committer as
everything else, so it is one more operation in a batch, under the same lock; a sweep that settles a full
Settle's worth goes again at once, so a backlog (after downtime) drains without waiting for the next tick.
Every worker runs one: on SQLite they take turns at the write lock, on PostgreSQL their Settles lock
disjoint rows (SKIP LOCKED), so more workers only drain faster.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable

from adslot.ledger.budget import DeliveryCache
from adslot.ledger.records import COUNTER_RETENTION_SECONDS, Settle, Verdict
from adslot.storage.failures import OutageLog
from adslot.tasks import stop_tasks

log = logging.getLogger(__name__)

MAX_ROUNDS = 100
"""Full Settles in a row before waiting for the next tick: a huge backlog must not monopolise the writer."""


async def sweep_once(
    submit: Callable[[Settle], Awaitable[Verdict]],
    now: Callable[[], int],
    cache: DeliveryCache | None = None,
    retention: int = COUNTER_RETENTION_SECONDS,
) -> int:
    """Settle what has expired, a Settle at a time while they come back full; the number settled."""
    total = 0
    for _ in range(MAX_ROUNDS):
        op = Settle(now(), retention=retention)
        verdict = await submit(op)
        total += verdict.settled
        if cache is not None and verdict.counters:
            cache.update(verdict.counters)
        if verdict.settled < op.limit:
            break
    return total


class ExpirySweeper:
    """Runs sweep_once every `interval` seconds until stopped; a failed sweep is logged and retried later."""

    def __init__(
        self,
        submit: Callable[[Settle], Awaitable[Verdict]],
        interval: float,
        *,
        cache: DeliveryCache | None = None,
        now: Callable[[], int] = lambda: int(time.time()),
        name: str = "expiry-sweep",
        retention: int = COUNTER_RETENTION_SECONDS,
    ) -> None:
        self._submit = submit
        self._retention = retention
        self._interval = interval
        self._cache = cache
        self._now = now
        self._name = name
        self._task: asyncio.Task[None] | None = None
        self._outages = OutageLog(log)

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._run(), name=self._name)

    async def stop(self) -> None:
        """Cancel the loop (a sweep in flight is abandoned; its batch commits or not, atomically)."""
        await stop_tasks(self._task)
        self._task = None

    async def _run(self) -> None:
        while True:
            await asyncio.sleep(self._interval)
            try:
                await sweep_once(self._submit, self._now, self._cache, self._retention)
            except Exception as exc:  # a database hiccup must not end the sweeps
                self._outages.failed(f"the expiry sweep of {self._name}", exc)
