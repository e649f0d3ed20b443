"""Win and loss notices (`nurl`, `lurl`): one GET each, sent after the ad request is answered, never awaited.

OpenRTB makes both best effort: a buyer that misses one still learns of the win from the play's billing
notice (`burl`, demand/billing.py, durable) and of a loss from not being billed. So they are sent once, in
the background, each within NOTICE_TIMEOUT_S, at most MAX_IN_FLIGHT at once per process; past that a notice
is dropped and counted, for a slow buyer must not make adslot hold an unbounded number of them.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass, field

import httpx

from adslot.tasks import stop_tasks

log = logging.getLogger(__name__)

NOTICE_TIMEOUT_S = 2.0
MAX_IN_FLIGHT = 256
USER_AGENT = "adslot"


@dataclass(slots=True)
class NoticeTally:
    sent: int = 0
    failed: int = 0
    dropped: int = 0
    """Not sent: MAX_IN_FLIGHT notices were already on their way."""
    by_kind: dict[str, int] = field(default_factory=dict)


def http_client(timeout: float = NOTICE_TIMEOUT_S) -> httpx.AsyncClient:
    """A client for notices: kept-alive connections, no redirects followed, no proxy from the environment."""
    return httpx.AsyncClient(
        http1=True,
        follow_redirects=False,
        trust_env=False,
        timeout=timeout,
        headers={"User-Agent": USER_AGENT},
    )


async def get_ok(client: httpx.AsyncClient, url: str) -> str | None:
    """GET `url`: None when it answered 2xx, else why not (a short reason, for logs and the outbox)."""
    try:
        response = await client.get(url)
    except httpx.TimeoutException:
        return "timeout"
    except httpx.HTTPError as error:
        return type(error).__name__.lower()
    if 200 <= response.status_code < 300:
        return None
    return f"http_{response.status_code}"


class Notices:
    """Sends nurl and lurl notices in the background, once each."""

    def __init__(self) -> None:
        self._client: httpx.AsyncClient | None = None
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
            self._client = http_client()
        task = asyncio.get_running_loop().create_task(self._send(kind, url, self._client))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _send(self, kind: str, url: str, client: httpx.AsyncClient) -> None:
        failure = await get_ok(client, url)
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
            await self._client.aclose()
            self._client = None
