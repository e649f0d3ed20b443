"""A lean HTTP/1.1 client for partners' servers: kept-alive connections per origin, one prebuilt request
written at once, the answer's end found by httptools (the parser adslot's server uses).

A programmatic ad request makes two exchanges with its partner, the bid request and the win notice. aiohttp's
client spends about 85 µs of CPU on each (request and response objects, header multidicts, timers, tracing
hooks, a stream reader); this one about 35 µs, measured against the test bidder. It does only what demand
needs: no redirects (a notice goes only where its partner's rules allowed, demand/notice_rules.py), no
cookies, no proxy, no decompression (a body is capped as it arrives, a compressed one could expand past the
cap), and a body kept up to a cap the caller gives or not kept at all. Timeouts are the caller's: it wraps
an exchange in `asyncio.timeout`, and a connection interrupted mid-answer is closed, never reused.
"""

from __future__ import annotations

import asyncio
import ssl
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import cast

import httptools
from yarl import URL

MAX_IDLE_PER_ORIGIN = 64
"""Idle connections kept per origin; one more is closed when its answer ends."""

Origin = tuple[str, str, int]
"""(scheme, host, port)."""


class HttpFailure(Exception):
    """An exchange that produced no HTTP answer; `reason` names why for tallies and logs: `connect` (no
    connection), `protocol` (not HTTP, or closed before the answer ended), `read` (the socket failed)."""

    def __init__(self, reason: str, detail: str = "") -> None:
        super().__init__(f"{reason}: {detail}" if detail else reason)
        self.reason = reason


@dataclass(frozen=True, slots=True)
class Target:
    """A URL as this client sends to it: its origin and the start of its request head."""

    origin: Origin
    path: str
    """Path and query, percent-encoded as yarl sends them (aiohttp's parser and encoder)."""
    host: str
    """The Host header: the host, with its port when it is not the scheme's default."""


def target_of(url: str) -> Target:
    """ValueError for a URL this client cannot send to (not http(s), no host, a bad port)."""
    parsed = URL(url)
    scheme, host, port = parsed.scheme, parsed.raw_host, parsed.port
    if scheme not in ("http", "https") or not host or port is None:
        raise ValueError(f"{url[:200]!r} is not an http(s) URL with a host")
    target = Target((scheme, host, port), parsed.raw_path_qs or "/", parsed.host_port_subcomponent or host)
    (target.path + target.host).encode("ascii")  # yarl percent-encodes; a UnicodeError here is a ValueError
    if any(c in target.path + target.host for c in "\r\n "):
        raise ValueError(f"{url[:200]!r} cannot be written in a request line")
    return target


@dataclass(frozen=True, slots=True)
class Answer:
    status: int
    declared: int | None
    """The Content-Length the answer declared, if any."""
    body: bytes
    """Up to `keep` + 1 bytes of the body (the extra byte tells a body over the cap); empty when not kept,
    or when the answer ended at its head (a status that is not 2xx, a declared length over the cap)."""


class _Connection(asyncio.Protocol):
    """One connection: feeds what arrives to an HTTP response parser and resolves `waiting` when the
    answer ends, or as soon as its head shows the rest is not wanted."""

    def __init__(self) -> None:
        self.transport: asyncio.Transport | None = None
        self.parser = httptools.HttpResponseParser(self)
        self.waiting: asyncio.Future[Answer] | None = None
        self.closed = False
        self.idle_since = 0.0
        self._begin(None)

    def _begin(self, keep: int | None) -> None:
        self.keep = keep
        self.received = False
        """Any byte of the current answer arrived."""
        self.head_done = False
        self.declared: int | None = None
        self.chunked = False
        self.chunks: list[bytes] = []
        self.size = 0
        self.reusable = False
        """The answer ended whole and lets its connection serve another request."""

    def exchange(self, request: bytes, keep: int | None) -> asyncio.Future[Answer]:
        assert self.transport is not None
        self._begin(keep)
        waiting = self.waiting = asyncio.get_running_loop().create_future()
        self.transport.write(request)
        return waiting

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # A stream transport, whose class uvloop does not derive from asyncio's: no isinstance check.
        self.transport = cast(asyncio.Transport, transport)

    def data_received(self, data: bytes) -> None:
        self.received = True
        try:
            self.parser.feed_data(data)
        except httptools.HttpParserError as error:
            self._fail(HttpFailure("protocol", str(error)))

    def on_header(self, name: bytes, value: bytes) -> None:
        name = name.lower()
        if name == b"content-length":
            try:
                self.declared = int(value)
            except ValueError:
                self.declared = None  # the parser itself refuses a malformed length
        elif name == b"transfer-encoding":
            self.chunked = True

    def on_headers_complete(self) -> None:
        self.head_done = True
        status = self.parser.get_status_code()
        keep = self.keep
        if not 200 <= status < 300 or (keep is not None and (self.declared or 0) > keep):
            self._resolve(cut=True)  # the rest is not wanted: the connection is closed, not read on

    def on_body(self, body: bytes) -> None:
        keep = self.keep
        if keep is None:
            return
        self.chunks.append(body)
        self.size += len(body)
        if self.size > keep:
            self._resolve(cut=True)

    def on_message_complete(self) -> None:
        self.reusable = self.parser.should_keep_alive()  # read here: the parser resets after this call
        self._resolve(cut=False)

    def _resolve(self, *, cut: bool) -> None:
        waiting = self.waiting
        if waiting is None or waiting.done():
            return
        body = b"".join(self.chunks) if self.chunks else b""
        if self.keep is not None and len(body) > self.keep + 1:
            body = body[: self.keep + 1]
        if cut:
            self.reusable = False
            self.close()
        waiting.set_result(Answer(self.parser.get_status_code(), self.declared, body))

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        if self.head_done and self.declared is None and not self.chunked:
            self._resolve(cut=True)  # an answer delimited by the connection's close: it ended
        self._fail(HttpFailure("protocol", "the connection closed before the answer ended"))

    def _fail(self, error: HttpFailure) -> None:
        waiting = self.waiting
        if waiting is not None and not waiting.done():
            waiting.set_exception(error)
        self.close()

    def close(self) -> None:
        self.closed = True
        if self.transport is not None:
            self.transport.close()


class Http1Client:
    """Kept-alive HTTP/1.1 connections per origin; one per process and purpose, used from one event loop.
    Bounds no connection count itself: its callers do (a semaphore per host, notices in flight)."""

    def __init__(self, *, keepalive_s: float, clock: Callable[[], float] = time.monotonic) -> None:
        """A connection idle for `keepalive_s` is not used again."""
        self.keepalive_s = keepalive_s
        self.clock = clock
        self._idle: dict[Origin, list[_Connection]] = {}
        self._ssl: ssl.SSLContext | None = None

    async def send(self, origin: Origin, request: bytes, *, keep: int | None = None) -> Answer:
        """Write `request` (a whole HTTP/1.1 request) to `origin` and read its answer, keeping at most
        `keep` + 1 bytes of its body (None: none, the body is parsed past). HttpFailure when no answer
        came. A kept-alive connection the server closed unanswered is replaced once by a new one."""
        connection = self._reuse(origin)
        if connection is not None:
            try:
                return await self._send(origin, connection, request, keep)
            except HttpFailure as failure:
                if connection.received or failure.reason != "protocol":
                    raise
        return await self._send(origin, await self._connect(origin), request, keep)

    async def _send(
        self, origin: Origin, connection: _Connection, request: bytes, keep: int | None
    ) -> Answer:
        try:
            answer = await connection.exchange(request, keep)
        except BaseException:
            connection.close()  # a timeout, a cancellation: the connection's state is unknown
            raise
        finally:
            connection.waiting = None
        if connection.closed or not connection.reusable:
            connection.close()
            return answer
        idle = self._idle.setdefault(origin, [])
        if len(idle) < MAX_IDLE_PER_ORIGIN:
            connection.idle_since = self.clock()
            idle.append(connection)
        else:
            connection.close()
        return answer

    def _reuse(self, origin: Origin) -> _Connection | None:
        """The most recently idled connection still open and within its keep-alive; expired ones closed."""
        idle = self._idle.get(origin)
        if not idle:
            return None
        oldest = self.clock() - self.keepalive_s
        while idle:
            connection = idle.pop()
            if not connection.closed and connection.idle_since >= oldest:
                return connection
            connection.close()
        return None

    async def _connect(self, origin: Origin) -> _Connection:
        scheme, host, port = origin
        loop = asyncio.get_running_loop()
        try:
            if scheme == "https":
                if self._ssl is None:
                    self._ssl = ssl.create_default_context()
                _, connection = await loop.create_connection(
                    _Connection, host, port, ssl=self._ssl, server_hostname=host
                )
            else:
                _, connection = await loop.create_connection(_Connection, host, port)
        except OSError as error:  # refused, unreachable, a name that does not resolve, a TLS failure
            raise HttpFailure("connect", str(error)) from error
        return connection

    async def close(self) -> None:
        """Close every kept-alive connection."""
        for idle in self._idle.values():
            for connection in idle:
                connection.close()
        self._idle.clear()
