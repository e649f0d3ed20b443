"""Group commit: requests enqueue an operation and await the commit of the batch that carries it.

While one batch is being written, new operations pile up and go together in the next, so a busy server
pays one commit (one fsync) for many requests and nothing is answered before it is durable. The same
batching serves PostgreSQL's point reads (Environment.lookup): one round trip for many concurrent readers.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Sequence
from typing import Generic, TypeVar

from adslot.storage.failures import LedgerUnavailable, OutcomeUnknown, unavailable

Op = TypeVar("Op")
Result = TypeVar("Result")

log = logging.getLogger(__name__)


class GroupCommitter(Generic[Op, Result]):
    def __init__(
        self,
        apply: Callable[[Sequence[Op]], Awaitable[list[Result]]],
        max_batch: int = 512,
        in_flight: int = 1,
        contended: Callable[[Op], bool] | None = None,
        observe: Callable[[int, float], None] | None = None,
    ) -> None:
        """`in_flight` batches may be handed to `apply` before the first is answered; an apply that keeps
        them in order (the writer process's pipe) then never idles while the next batch is gathered.

        A batch holding an op that `contended` picks (one that locks rows every such batch locks: a capped
        campaign's counters) waits until no other such batch is in flight, and only then takes what has
        gathered: two of them would wait for each other's commit in the database anyway, each paying its own
        commit for a small batch, where one batch pays one for all of them.

        `observe(size, seconds)` is told of each batch applied: its operations and its round trip
        (telemetry/metrics.py)."""
        self._apply = apply
        self._observe = observe
        self._max_batch = max_batch
        self._slots = asyncio.Semaphore(in_flight)
        self._contended = contended
        self._alone = asyncio.Semaphore(1)
        self._writing: set[asyncio.Task[None]] = set()
        self._pending: list[tuple[Op, asyncio.Future[Result]]] = []
        self._wakeup = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        """Kept from start(): asyncio.get_running_loop() makes a getpid() system call on every call (CPython
        3.11, a fork check), once per request here (measured with strace: ~1 per pixel)."""
        self._closing = False

    def start(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._task = self._loop.create_task(self._run(), name="adslot-group-commit")

    async def submit(self, op: Op) -> Result:
        return await self.enqueue(op)

    def enqueue(self, op: Op) -> asyncio.Future[Result]:
        """submit() without a coroutine: the future of `op`'s result, for a caller that answers from a
        done-callback instead of a task (the protocol lane's pixels: a task per request costs ~3 µs)."""
        if self._closing or self._task is None or self._loop is None:
            raise LedgerUnavailable("the ledger is not running (not yet started, or stopping)")
        future: asyncio.Future[Result] = self._loop.create_future()
        self._pending.append((op, future))
        self._wakeup.set()
        return future

    def running(self) -> bool:
        """Whether its loop takes operations (started, not stopping, not dead): for /readyz."""
        return self._task is not None and not self._task.done() and not self._closing

    def depth(self) -> int:
        """Operations waiting for the next batch."""
        return len(self._pending)

    async def close(self) -> None:
        """Write everything already submitted, then stop."""
        self._closing = True
        self._wakeup.set()
        if self._task is not None:
            await self._task
            self._task = None

    async def _run(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            await self._wakeup.wait()
            self._wakeup.clear()
            while self._pending:
                await self._slots.acquire()
                alone = self._contended is not None and any(
                    map(self._contended, (op for op, _ in self._pending[: self._max_batch]))
                )
                if alone:
                    await self._alone.acquire()  # what arrives meanwhile joins this batch
                batch = self._pending[: self._max_batch]
                del self._pending[: self._max_batch]
                task = loop.create_task(self._write_then_free(batch, alone))
                self._writing.add(task)
                task.add_done_callback(self._writing.discard)
            if self._closing:
                while self._writing:
                    await asyncio.gather(*self._writing)
                return

    async def _write_then_free(self, batch: list[tuple[Op, asyncio.Future[Result]]], alone: bool) -> None:
        try:
            await self._write(batch)
        finally:
            if alone:
                self._alone.release()
            self._slots.release()

    async def _write(self, batch: list[tuple[Op, asyncio.Future[Result]]]) -> None:
        started = time.perf_counter()
        try:
            results = await self._apply([op for op, _ in batch])
        except OutcomeUnknown as exc:
            # Perhaps committed: applying its operations again could count them twice.
            for _, future in batch:
                if not future.done():
                    future.set_exception(exc)
            return
        except Exception as exc:
            if len(batch) > 1 and not unavailable(exc):
                # One bad operation must not fail its neighbours: write them one by one. (A storage that
                # cannot serve fails them all alike: each gets the outage, logged once by who answers it.)
                log.warning(
                    "a ledger batch of %d failed (%s: %s); writing it op by op",
                    len(batch),
                    type(exc).__name__,
                    exc,
                )
                for item in batch:
                    await self._write([item])
                return
            # Not logged here: whoever awaits it logs it with its answer (failure_reply, the sweeper), once.
            for _, future in batch:
                if not future.done():
                    future.set_exception(exc)
            return
        if len(results) != len(batch):
            # A store bug, not the requests' fault: fail them rather than guess, and keep the writer alive.
            error = RuntimeError(f"ledger store returned {len(results)} outcomes for {len(batch)} operations")
            for _, future in batch:
                if not future.done():
                    future.set_exception(error)
            return
        if self._observe is not None:
            self._observe(len(batch), time.perf_counter() - started)
        for (_, future), result in zip(batch, results, strict=True):
            if not future.done():
                future.set_result(result)
