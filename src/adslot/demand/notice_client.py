"""A lean HTTP/1.1 GET for the win and loss notices: kept-alive connections per origin, the status and nothing
else.

A notice is a GET whose answer carries nothing adslot needs, sent once per sold or lost slot. aiohttp's
client spends about 85 µs of CPU on one (its request and response objects, header multidicts, timers,
tracing hooks); this one writes a prebuilt request on a kept-alive connection and lets httptools (the
parser adslot's server uses) find the end of the answer, about 35 µs. Its body is parsed past, never kept,
so its size costs no memory; the timeout bounds a body that never ends. Redirects are not followed (a
notice goes only where its partner's rules allowed, demand/notice_rules.py). Bid requests and billing
notices keep aiohttp (demand/http.py): they need the answer's body, or retries an outbox counts.
"""

from __future__ import annotations

import asyncio
import ssl
import time
from collections.abc import Callable
from typing import cast

import httptools
from yarl import URL

from adslot.demand.http import USER_AGENT

MAX_IDLE_PER_ORIGIN = 64
"""Idle connections kept per origin; one more is closed when its answer ends."""

Origin = tuple[str, str, int]
"""(scheme, host, port)."""


class _Lost(ConnectionError):
    """The connection closed before the whole answer came: on a reused connection, the server may have
    closed it while it was idle, and the notice is sent again once on a new one."""

    def __init__(self, answered: bool) -> None:
        super().__init__("the connection closed before the answer ended")
        self.answered = answered


class _Answer(asyncio.Protocol):
    """One connection: feeds what arrives to an HTTP response parser; `waiting` learns the status when the
    answer ends."""

    def __init__(self) -> None:
        self.transport: asyncio.Transport | None = None
        self.parser = httptools.HttpResponseParser(self)
        self.waiting: asyncio.Future[int] | None = None
        self.closed = False
        self.received = False
        """Any byte of the current answer arrived."""
        self.keep_alive = False
        """The last answer lets its connection be used again."""
        self.idle_since = 0.0

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # A stream transport, whose class uvloop does not derive from asyncio's: no isinstance check.
        self.transport = cast(asyncio.Transport, transport)

    def data_received(self, data: bytes) -> None:
        self.received = True
        try:
            self.parser.feed_data(data)
        except httptools.HttpParserError as error:
            self._fail(error)

    def on_message_complete(self) -> None:
        self.keep_alive = self.parser.should_keep_alive()  # read here: the parser resets after this call
        waiting = self.waiting
        if waiting is not None and not waiting.done():
            waiting.set_result(self.parser.get_status_code())

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        self._fail(_Lost(self.received))

    def _fail(self, error: Exception) -> None:
        self.closed = True
        waiting = self.waiting
        if waiting is not None and not waiting.done():
            waiting.set_exception(error)
        if self.transport is not None:
            self.transport.close()

    def close(self) -> None:
        self.closed = True
        if self.transport is not None:
            self.transport.close()


class NoticeClient:
    """GETs for notices over kept-alive connections; one per process, used from one event loop."""

    def __init__(
        self, *, timeout_s: float, keepalive_s: float, clock: Callable[[], float] = time.monotonic
    ) -> None:
        """Each GET ends within `timeout_s` (connecting included); a connection idle for `keepalive_s` is
        not used again."""
        self.timeout_s = timeout_s
        self.keepalive_s = keepalive_s
        self.clock = clock
        self._idle: dict[Origin, list[_Answer]] = {}
        self._ssl: ssl.SSLContext | None = None

    async def get(self, url: str) -> str | None:
        """GET `url`: None when it answered 2xx, else why not (`timeout`, `http_404`, `connect`,
        `protocol`, `bad_url`...). Never raises for what the server does."""
        try:
            parsed = URL(url)
            scheme = parsed.scheme
            host = parsed.raw_host
            port = parsed.port
            if scheme not in ("http", "https") or not host or port is None:
                return "bad_url"
            request = (
                f"GET {parsed.raw_path_qs or '/'} HTTP/1.1\r\nHost: {parsed.host_port_subcomponent}\r\n"
                f"User-Agent: {USER_AGENT}\r\nAccept-Encoding: identity\r\n\r\n"
            ).encode("ascii")
        except (ValueError, UnicodeError):
            return "bad_url"
        try:
            async with asyncio.timeout(self.timeout_s):
                status = await self._exchange((scheme, host, port), request)
        except TimeoutError:
            return "timeout"
        except httptools.HttpParserError:
            return "protocol"
        except _Lost:
            return "disconnected"
        except OSError as error:
            return "connect" if isinstance(error, ConnectionRefusedError) else type(error).__name__.lower()
        return None if 200 <= status < 300 else f"http_{status}"

    async def _exchange(self, origin: Origin, request: bytes) -> int:
        answer = self._reuse(origin)
        if answer is not None:
            try:
                return await self._send(origin, answer, request)
            except _Lost as lost:
                if lost.answered:
                    raise
                # closed by the server while it was idle: once more, on a new connection
        return await self._send(origin, await self._connect(origin), request)

    async def _send(self, origin: Origin, answer: _Answer, request: bytes) -> int:
        assert answer.transport is not None
        answer.waiting = asyncio.get_running_loop().create_future()
        answer.received = False
        try:
            answer.transport.write(request)
            status = await answer.waiting
        except BaseException:
            answer.close()  # a timeout or an error mid-answer: the connection's state is unknown
            raise
        finally:
            answer.waiting = None
        if answer.closed or not answer.keep_alive:
            answer.close()
            return status
        idle = self._idle.setdefault(origin, [])
        if len(idle) < MAX_IDLE_PER_ORIGIN:
            answer.idle_since = self.clock()
            idle.append(answer)
        else:
            answer.close()
        return status

    def _reuse(self, origin: Origin) -> _Answer | None:
        """The most recently idled connection still open and within its keep-alive; expired ones closed."""
        idle = self._idle.get(origin)
        if not idle:
            return None
        oldest = self.clock() - self.keepalive_s
        while idle:
            answer = idle.pop()
            if not answer.closed and answer.idle_since >= oldest:
                return answer
            answer.close()
        return None

    async def _connect(self, origin: Origin) -> _Answer:
        scheme, host, port = origin
        loop = asyncio.get_running_loop()
        if scheme == "https":
            if self._ssl is None:
                self._ssl = ssl.create_default_context()
            _, answer = await loop.create_connection(_Answer, host, port, ssl=self._ssl, server_hostname=host)
        else:
            _, answer = await loop.create_connection(_Answer, host, port)
        return answer

    async def close(self) -> None:
        """Close every kept-alive connection."""
        for idle in self._idle.values():
            for answer in idle:
                answer.close()
        self._idle.clear()
