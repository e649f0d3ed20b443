"""Stopping a worker's background tasks (sweeps, retention passes, metrics flushes, reloads, lease draws), and
the threads they run blocking work in."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from typing import Any, TypeVar, TypeVarTuple

import anyio.to_thread

T = TypeVar("T")
Ts = TypeVarTuple("Ts")


async def stop_tasks(*tasks: asyncio.Task[Any] | None) -> None:
    """Cancel each task (None: none), then wait until each has unwound: a stop that returned while a task
    still ran would let it touch what its owner closes next."""
    running = [task for task in tasks if task is not None]
    for task in running:
        task.cancel()
    for task in running:
        with contextlib.suppress(asyncio.CancelledError):
            await task


class Threads:
    """The worker threads a background task runs its blocking (database) work in. Cancelling a task that
    awaits `anyio.to_thread.run_sync` abandons the thread, it does not end it: a stop that returned then
    would let the thread go on with an engine its owner disposes next. So a stop cancels the task, then
    `wait`s for what `run` started."""

    def __init__(self) -> None:
        self._running: set[asyncio.Task[Any]] = set()

    async def run(self, func: Callable[[*Ts], T], *args: *Ts) -> T:
        """`func(*args)` in a worker thread; cancelling the caller leaves it to `wait`."""
        thread = asyncio.ensure_future(anyio.to_thread.run_sync(func, *args))
        self._running.add(thread)
        thread.add_done_callback(self._running.discard)
        return await asyncio.shield(thread)

    async def wait(self) -> None:
        """Until every thread started by `run` has returned (its outcome is its caller's, if still there)."""
        while self._running:
            await asyncio.gather(*self._running, return_exceptions=True)
