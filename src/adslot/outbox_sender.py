"""The lifecycle shared by the background senders of an outbox kept in the database (demand/billing.py's
billing notices, fleet/watch.py's alert notices): a named task that makes a pass, then pauses, forever; an
HTTP session made on first use and closed at the stop; the database work done in worker threads.

The database work goes through `in_thread` (tasks.Threads), and a stop waits until every such thread has
returned: cancelling the task does not end them, and the engine is disposed after the stop.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import TypeVar, TypeVarTuple

import aiohttp

from adslot.tasks import Threads, stop_tasks

T = TypeVar("T")
Ts = TypeVarTuple("Ts")


class OutboxSender:
    """Subclasses give `send_due` (one batch: how many went, 0 when nothing more is due now) and
    `new_session`; they may change what a pass does (`run_pass`) and the pause between two (`pause`)."""

    def __init__(self, name: str, interval: float) -> None:
        self.name = name
        self.interval = interval
        self._task: asyncio.Task[None] | None = None
        self._session: aiohttp.ClientSession | None = None
        self._threads = Threads()
        self._log = logging.getLogger(type(self).__module__)

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._run(), name=self.name)

    async def stop(self) -> None:
        """Cancel the loop, wait for the threads it left running, then close the session."""
        await stop_tasks(self._task)
        self._task = None
        await self._threads.wait()
        if self._session is not None:
            await self._session.close()
            self._session = None

    async def _run(self) -> None:
        while True:
            try:
                await self.run_pass()
            except Exception as exc:  # a database hiccup: what is owed stays owed, tried at the next pass
                self._log.warning("%s: %s: %s", self.name, type(exc).__name__, exc)
            await self.pause()

    async def run_pass(self) -> None:
        """Send batch after batch until none is due."""
        while await self.send_due():
            pass

    async def pause(self) -> None:
        await asyncio.sleep(self.interval)

    async def send_due(self) -> int:
        raise NotImplementedError

    def new_session(self) -> aiohttp.ClientSession:
        raise NotImplementedError

    @property
    def session(self) -> aiohttp.ClientSession:
        """The sender's HTTP session, made on first use (a sender that never sends opens no connector)."""
        if self._session is None:
            self._session = self.new_session()
        return self._session

    async def in_thread(self, func: Callable[[*Ts], T], *args: *Ts) -> T:
        """`func(*args)` in a worker thread; a stop that cancels the caller still waits for it to return."""
        return await self._threads.run(func, *args)
