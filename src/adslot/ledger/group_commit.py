"""Group commit: requests enqueue an operation and await the commit of the batch that carries it.

While one batch is being written, new operations pile up and go together in the next, so a busy server
pays one commit (one fsync) for many requests and nothing is answered before it is durable. The same
batching serves PostgreSQL's point reads (Environment.lookup): one round trip for many concurrent readers.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Sequence
from typing import Generic, TypeVar

Op = TypeVar("Op")
Result = TypeVar("Result")

log = logging.getLogger(__name__)


class GroupCommitter(Generic[Op, Result]):
    def __init__(
        self, apply: Callable[[Sequence[Op]], Awaitable[list[Result]]], max_batch: int = 512
    ) -> None:
        self._apply = apply
        self._max_batch = max_batch
        self._pending: list[tuple[Op, asyncio.Future[Result]]] = []
        self._wakeup = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._closing = False

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._run(), name="adslot-group-commit")

    async def submit(self, op: Op) -> Result:
        if self._closing or self._task is None:
            raise RuntimeError("the ledger writer is not running")
        future: asyncio.Future[Result] = asyncio.get_running_loop().create_future()
        self._pending.append((op, future))
        self._wakeup.set()
        return await future

    async def close(self) -> None:
        """Write everything already submitted, then stop."""
        self._closing = True
        self._wakeup.set()
        if self._task is not None:
            await self._task
            self._task = None

    async def _run(self) -> None:
        while True:
            await self._wakeup.wait()
            self._wakeup.clear()
            while self._pending:
                batch = self._pending[: self._max_batch]
                del self._pending[: self._max_batch]
                await self._write(batch)
            if self._closing:
                return

    async def _write(self, batch: list[tuple[Op, asyncio.Future[Result]]]) -> None:
        try:
            results = await self._apply([op for op, _ in batch])
        except Exception as exc:
            if len(batch) > 1:
                # One bad operation must not fail its neighbours: write them one by one.
                for item in batch:
                    await self._write([item])
                return
            log.exception("ledger write failed")
            _, future = batch[0]
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
        for (_, future), result in zip(batch, results, strict=True):
            if not future.done():
                future.set_result(result)
