"""The GET of a win or loss notice: the status and nothing else, on demand/http1.py's kept-alive connections.

A notice's answer carries nothing adslot needs, so its body is parsed past, never kept, and its size costs no
memory; the timeout bounds a body that never ends. Billing notices keep aiohttp (demand/http.py), whose
outbox counts their retries.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

from adslot.demand.http import USER_AGENT
from adslot.demand.http1 import Http1Client, HttpFailure, target_of


class NoticeClient:
    """GETs for notices; one per process, used from one event loop."""

    def __init__(
        self, *, timeout_s: float, keepalive_s: float, clock: Callable[[], float] = time.monotonic
    ) -> None:
        """Each GET ends within `timeout_s`, connecting included; a connection idle for `keepalive_s` is not
        used again."""
        self.timeout_s = timeout_s
        self._client = Http1Client(keepalive_s=keepalive_s, clock=clock)

    async def get(self, url: str) -> str | None:
        """GET `url`: None when it answered 2xx, else why not (`timeout`, `http_404`, `connect`,
        `protocol`, `bad_url`). Never raises for what the server does."""
        try:
            target = target_of(url)
        except ValueError:
            return "bad_url"
        request = (
            f"GET {target.path} HTTP/1.1\r\nHost: {target.host}\r\n"
            f"User-Agent: {USER_AGENT}\r\nAccept-Encoding: identity\r\n\r\n"
        ).encode("ascii")
        try:
            async with asyncio.timeout(self.timeout_s):
                answer = await self._client.send(target.origin, request)
        except TimeoutError:
            return "timeout"
        except HttpFailure as failure:
            return failure.reason
        return None if 200 <= answer.status < 300 else f"http_{answer.status}"

    async def close(self) -> None:
        """Close every kept-alive connection."""
        await self._client.close()
