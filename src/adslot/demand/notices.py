"""Win and loss notices (`nurl`, `lurl`): one GET each, sent after the ad request is answered, never awaited.

OpenRTB makes both best effort: a buyer that misses one still learns of the win from the play's billing
notice (`burl`, demand/billing.py, durable) and of a loss from not being billed. So they are sent once, in
the background, each within NOTICE_TIMEOUT_S, at most MAX_IN_FLIGHT at once per process; past that a notice
is dropped and counted, for a slow buyer must not make adslot hold an unbounded number of them. They go
through demand/notice_client.py, a GET on kept-alive connections at a third of aiohttp's CPU.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass, field

from adslot.demand.notice_client import NoticeClient
from adslot.tasks import stop_tasks

log = logging.getLogger(__name__)

NOTICE_TIMEOUT_S = 2.0
MAX_IN_FLIGHT = 256
KEEPALIVE_S = 30.0


@dataclass(slots=True)
class NoticeTally:
    sent: int = 0
    failed: int = 0
    dropped: int = 0
    """Not sent: MAX_IN_FLIGHT notices were already on their way."""
    by_kind: dict[str, int] = field(default_factory=dict)


class Notices:
    """Sends nurl and lurl notices in the background, once each."""

    def __init__(self) -> None:
        self._client: NoticeClient | None = None
        self._tasks: set[asyncio.Task[None]] = set()
        self.tally = NoticeTally()

    def send(self, kind: str, url: str | None) -> None:
        """Queue one notice of `kind` ("win", "loss"); a None or empty URL sends nothing."""
        if not url:
            return
        if len(self._tasks) >= MAX_IN_FLIGHT:
            self.tally.dropped += 1
            return
        if self._client is None:
            self._client = NoticeClient(timeout_s=NOTICE_TIMEOUT_S, keepalive_s=KEEPALIVE_S)
        task = asyncio.get_running_loop().create_task(self._send(kind, url, self._client))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _send(self, kind: str, url: str, client: NoticeClient) -> None:
        failure = await client.get(url)
        tally = self.tally
        tally.by_kind[kind] = tally.by_kind.get(kind, 0) + 1
        if failure is None:
            tally.sent += 1
        else:
            tally.failed += 1
            log.info("%s notice failed: %s", kind, failure)

    async def drain(self) -> None:
        """Wait for the notices on their way (tests, and a clean stop)."""
        while self._tasks:
            await asyncio.gather(*list(self._tasks), return_exceptions=True)

    async def close(self) -> None:
        await stop_tasks(*self._tasks)
        if self._client is not None:
            await self._client.close()
            self._client = None
