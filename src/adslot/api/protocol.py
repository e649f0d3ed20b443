"""uvicorn's HTTP protocol with a hot lane: ad requests, pixels and the inline VAST answered below ASGI.

A pixel is most of an ad server's traffic, and its own work is tiny: parse a query, hand one fire to the
ledger's group commit, encode a small JSON answer. Through ASGI, uvicorn wraps each request in a scope
dict, a RequestResponseCycle, a task running the app, an asyncio.Event, two `send` messages whose headers it
checks one by one, and two socket writes. On 2 cores with wrk -c64, a bare pixel answered from
`on_message_complete` serves 2.3x the requests a second of the same answer through uvicorn's ASGI path, so
that machinery, not adslot's handler, would be most of a pixel's CPU in the worker.

This protocol serves the exact hot paths (POST of the ad request, GET and HEAD of the impression and
tracking pixels, GET of the inline VAST; routes.py names them, `hot_paths.ad_request_route`, `pixel_route`
and `inline_vast_route` route them to the handlers the framework's routes call too) as soon as a request's
message is complete: one task for the handler (none for a pixel: its fire goes to the ledger's group commit
at once and its answer is made in the verdict's done-callback), one write of status line, headers and body.
An ad request's body is kept up to one byte past ADSLOT_MAX_BODY_BYTES (enough to answer 413), the rest read
and dropped. Anything else, and any request it is not sure of (a percent-escaped or absolute URL, `Expect`,
a connection with a request already in flight or whose client is not reading its answers, access logging or
a concurrency limit switched on), goes the ordinary way through ASGI to Litestar, which answers the same
paths identically.

HTTP/1.1 semantics stay uvicorn's: while a hot answer is pending, a stand-in cycle makes pipelined requests
queue behind it (answers leave in request order), keep-alive and `Connection: close` are honoured, and a
graceful shutdown waits for the answer (the task is in the server's task set, the connection open until it
is written). The default headers (`date`, `server`) are uvicorn's own.

This module is the one place that knows uvicorn's internals: the protocol class it extends, the attributes
of it and of its request cycle that it reads and sets (INTERNALS). pyproject.toml pins uvicorn to the
releases they were checked against; `missing_internals()` names any that a uvicorn release no longer has, a
test fails on it, and `adslot serve` then runs uvicorn's own protocol (every request through Litestar)
instead of a lane that would break.
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Callable
from time import perf_counter
from typing import Any

import httptools
from uvicorn.config import Config
from uvicorn.protocols.http.flow_control import FlowControl
from uvicorn.protocols.http.httptools_impl import STATUS_LINE, HttpToolsProtocol, RequestResponseCycle
from uvicorn.server import ServerState

from adslot.api.hot_paths import (
    Begin,
    Handler,
    ad_request_route,
    inline_vast_route,
    pixel_route,
    response_headers,
)
from adslot.api.proof_of_play import Pending
from adslot.api.reply import NO_STORE, Reply, error_reply, failure_reply
from adslot.api.sources import TRUSTED, sources_for
from adslot.edge.clients import PEER, forwarded_for
from adslot.edge.headers import EdgeHeaders
from adslot.edge.request_ids import REQUEST_ID, new_request_id
from adslot.environment import Environment
from adslot.errors import ApiError
from adslot.routes import AD_REQUEST_PATHS, IMPRESSION_PATHS
from adslot.settings import DEFAULTS, Settings
from adslot.telemetry.metrics import NO_METER, PathMeter

LINGER_SECONDS = 2.0
"""How long a connection whose slow body was refused stays open after its answer (_refuse)."""
UPGRADE_OFFER = frozenset({b"upgrade", b"http2-settings"})
"""An upgrade offer's headers, which its Connection header names too: all dropped when it is ignored."""

INTERNALS: dict[str, tuple[str, ...]] = {
    "HttpToolsProtocol": (
        "data_received",
        "eof_received",
        "on_headers_complete",
        "on_body",
        "on_message_begin",
        "on_message_complete",
        "on_response_complete",
        "timeout_keep_alive_handler",
        "_start_asgi_task",
        "_unset_keepalive_if_required",
        "_should_upgrade",
        "_unsupported_upgrade_warning",
        "handle_websocket_upgrade",
        "app",
        "access_log",
        "client",
        "cycle",
        "expect_100_continue",
        "flow",
        "headers",
        "limit_concurrency",
        "logger",
        "loop",
        "parser",
        "pipeline",
        "scope",
        "server_state",
        "tasks",
        "timeout_keep_alive",
        "transport",
        "url",
    ),
    "FlowControl": ("write_paused",),
    "ServerState": ("default_headers", "total_requests"),
    "RequestResponseCycle": (
        "body",
        "disconnected",
        "keep_alive",
        "message_event",
        "more_body",
        "response_complete",
    ),
}
"""What the hot lane reads, sets or overrides of uvicorn's, by class: its protocol's methods and
attributes, the flow control and server state it reads, and what uvicorn reads of a request cycle (which
_Answering stands in for)."""


def missing_internals() -> list[str]:
    """Each of INTERNALS that this uvicorn no longer has: neither a class member nor an attribute its own
    code sets or reads (`self.name`)."""
    classes: dict[str, type] = {
        "HttpToolsProtocol": HttpToolsProtocol,
        "FlowControl": FlowControl,
        "ServerState": ServerState,
        "RequestResponseCycle": RequestResponseCycle,
    }
    missing = []
    for class_name, names in INTERNALS.items():
        owner = classes[class_name]
        source = inspect.getsource(owner)
        missing += [f"{class_name}.{n}" for n in names if not hasattr(owner, n) and f"self.{n}" not in source]
    return missing


class _NoEvent:
    """What uvicorn sets on a cycle's message_event when the connection goes: nothing waits on it here."""

    def set(self) -> None:
        return None


class _Answering:
    """Stands in for uvicorn's RequestResponseCycle while a hot request awaits its answer: uvicorn reads
    these attributes to queue pipelined requests, to mark a lost connection and to shut down gracefully."""

    __slots__ = (
        "body",
        "disconnected",
        "edge",
        "keep_alive",
        "meter",
        "more_body",
        "request_id",
        "response_complete",
        "started",
    )
    message_event = _NoEvent()

    def __init__(self, keep_alive: bool, request_id: bytes, edge: bytes, meter: PathMeter) -> None:
        self.keep_alive = keep_alive
        self.request_id = request_id
        self.edge = edge
        """The answer's CORS header lines (EdgeHeaders.for_lane)."""
        self.response_complete = False
        self.disconnected = False
        self.meter = meter
        """Its path's metrics (telemetry/metrics.py), told its status and time when it is answered."""
        self.started = 0.0
        """perf_counter() when its message was complete."""
        self.more_body = True
        self.body = b""


async def _read_body() -> Reply:
    raise AssertionError("a placeholder: on_message_complete routes the ad request once its body is read")


_READ_BODY: Handler = _read_body
"""What an ad request's headers route to: its handler is made once its body has been read."""


async def _pixel() -> Reply:
    raise AssertionError("a placeholder: on_message_complete begins the pixel without a task")


_PIXEL: Handler = _pixel
"""What a pixel's headers route to: on_message_complete begins it (fastlane.pixel_route) and answers from its
verdict's callback."""


def _adslot_app(app: Any) -> Any:
    """The adslot app under uvicorn's middleware (what has `lanes` and `settings`), or None."""
    for _ in range(8):
        if callable(getattr(app, "lanes", None)):
            return app
        app = getattr(app, "app", None)
        if app is None:
            break
    return None


class _Refused(Exception):
    """Raised from a parser callback to stop reading a request that is answered with `reply` and closed."""

    def __init__(self, reply: Reply) -> None:
        super().__init__(reply.status)
        self.reply = reply


def _refusal(status: int, code: str, message: str, field: str | None = None) -> Reply:
    return error_reply(ApiError(status, code, message, field), NO_STORE)


def _uri_too_long(limits: Settings) -> Reply:
    return _refusal(414, "uri_too_long", f"the request target may be at most {limits.max_url_bytes} bytes")


class _DefaultLines:
    """uvicorn's default headers (`date`, `server`) as encoded lines: uvicorn sets a new list once a second,
    so they are encoded once per list, not once per answer."""

    __slots__ = ("lines", "source")

    def __init__(self) -> None:
        self.source: list[tuple[bytes, bytes]] | None = None
        self.lines = b""

    def of(self, default_headers: list[tuple[bytes, bytes]]) -> bytes:
        if default_headers is not self.source:
            self.lines = b"".join(b"%s: %s\r\n" % header for header in default_headers)
            self.source = default_headers
        return self.lines


_default_lines = _DefaultLines()


def encode_response(
    reply: Reply,
    head: bool,
    default_headers: list[tuple[bytes, bytes]],
    keep_alive: bool,
    request_id: bytes,
    edge: bytes = b"",
) -> bytes:
    """The whole HTTP/1.1 answer, as uvicorn would write it for the same ASGI messages (edge/asgi.py adding
    the request id and `edge`, the CORS header lines, there), in one buffer."""
    return b"".join(
        (
            STATUS_LINE[reply.status],
            _default_lines.of(default_headers),
            response_headers(reply),
            b"x-request-id: ",
            request_id,
            b"\r\n",
            edge,
            b"\r\n" if keep_alive else b"connection: close\r\n\r\n",
            b"" if head else reply.body,
        )
    )


def _failed(answering: _Answering, exc: Exception, method: str, url: bytes) -> Reply:
    """As the ASGI lane answers an exception: the error envelope (a 503 when the storage cannot serve), logged
    with the request's id and its path only (a query's uuid is a capability)."""
    bound = REQUEST_ID.set(answering.request_id)
    try:
        return failure_reply(exc, method, url.partition(b"?")[0].decode("ascii"), NO_STORE)
    finally:
        REQUEST_ID.reset(bound)


class AdslotHttpProtocol(HttpToolsProtocol):
    """`uvicorn.Config(http=AdslotHttpProtocol)`: what `adslot serve` runs."""

    def __init__(
        self,
        config: Config,
        server_state: ServerState,
        app_state: dict[str, Any],
        _loop: asyncio.AbstractEventLoop | None = None,
    ) -> None:
        super().__init__(config, server_state, app_state, _loop)
        access_log = config.access_log and self.access_log  # the lane writes no access log line
        usable = not config.root_path and self.limit_concurrency is None and not access_log
        adslot = _adslot_app(self.app)
        self._lanes: list[tuple[bytes, Environment]] = (
            [(mount.encode("ascii"), env) for mount, env in adslot.lanes()] if adslot and usable else []
        )
        self._limits: Settings = getattr(adslot, "settings", None) or DEFAULTS
        """The head's limits and timeout (ADSLOT_MAX_HEAD_BYTES and the rest); defaults for another app."""
        self._sources = sources_for(self._limits)
        self._peer_network: int | None = None
        """The peer's network (api/sources.py), found on the connection's first hot request."""
        self._edge: EdgeHeaders | None = getattr(adslot, "edge", None)
        """The request id and CORS headers of the lane's answers (AdslotApp.edge)."""
        self._reading_body = False
        """Between a request's headers and its end: its bytes are the body's, not a head's."""
        self._head_bytes = 0
        """Bytes of the head being read that came in earlier packets than the one being parsed."""
        self._in_head = False
        self._messages_begun = 0
        self._head_timer: asyncio.TimerHandle | None = None
        self._body_timer: asyncio.TimerHandle | None = None
        """Armed when a packet ends inside a request's body, cancelled when the body is complete: a body
        that arrives with its head (most) costs no timer."""
        self._received = False
        self._refused = False
        self._handler: Handler | None = None
        """The hot handler of the request being read, from its headers until its message is complete."""
        self._meter: PathMeter = NO_METER
        """The metrics of the hot path being read (telemetry/metrics.py), until it is answered."""
        self._method = "GET"
        self._post: tuple[Environment, bytes] | None = None
        """An ad request being read: its environment and query, until its body is complete."""
        self._body: list[bytes] = []
        self._body_size = 0
        self._begin: Begin | None = None
        """A pixel being read: its begin_event, until its message is complete."""
        self._idle_since: float | None = None
        """loop.time() when the connection's last hot answer left it idle; None while a request is read or
        served. One timer per connection (_idle_timer) checks it, where uvicorn arms a new timer after every
        answer and cancels it at the next request's first bytes (a timer made and cancelled per request)."""
        self._idle_timer: asyncio.TimerHandle | None = None
        self._ignored_upgrade = False
        """The request being read offers an upgrade this server does not take (`Upgrade: h2c`, as Java's
        HttpClient and `curl --http2` send on every cleartext request): RFC 9110 7.8 lets a server ignore
        it, so its head is read again without the offer and its body read as HTTP/1.1's. httptools would
        take the rest of the stream as the new protocol's and end the request before its body."""

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        # A connection that never sends a request is closed, so that idle sockets cannot pile up.
        self._head_timer = self.loop.call_later(self._limits.head_timeout_seconds, self._head_timed_out)

    def connection_lost(self, exc: Exception | None) -> None:
        self._stop_head_timer()
        self._stop_body_timer()
        if self._idle_timer is not None:
            self._idle_timer.cancel()
            self._idle_timer = None
        super().connection_lost(exc)

    def data_received(self, data: bytes) -> None:
        """uvicorn's, with the head's limits enforced as its bytes arrive (before the parser keeps them),
        and an upgrade offer it does not take ignored rather than taken as the end of HTTP/1.1."""
        if self._refused:
            return
        self._received = True
        self._idle_since = None
        self._unset_keepalive_if_required()
        reading_head = not self._reading_body
        if (
            reading_head
            and self._head_bytes + len(data) > self._limits.max_head_bytes
            and not self._head_ends(data)
        ):
            self._refuse(self._head_too_large(data))
            return
        begun = self._messages_begun
        try:
            self.parser.feed_data(data)
        except httptools.HttpParserError as error:
            if isinstance(error.__context__, _Refused):  # raised by a callback, passed on by httptools
                self._refuse(error.__context__.reply)
                return
            self.logger.warning("Invalid HTTP request received.")
            self._refuse(_refusal(400, "malformed_request", "the request is not valid HTTP/1.1"))
            return
        except httptools.HttpParserUpgrade as upgrade:
            if self._ignored_upgrade:
                self._read_again_without_upgrade(data[upgrade.args[0] :])
            elif self._should_upgrade():
                self.handle_websocket_upgrade()
            else:  # pragma: no cover - every upgrade not taken is ignored above
                self._unsupported_upgrade_warning()
            return
        if not self._in_head:
            self._head_bytes = 0
            if self._reading_body and self._body_timer is None:
                self._body_timer = self.loop.call_later(
                    self._limits.body_timeout_seconds, self._body_timed_out
                )
            return
        # A head is still incomplete: its bytes so far count against the limit (those of a head that began
        # in this packet from the next one on), and it may not take longer than the head timeout.
        self._head_bytes = 0 if self._messages_begun != begun else self._head_bytes + len(data)
        if self._head_timer is None:
            self._head_timer = self.loop.call_later(self._limits.head_timeout_seconds, self._head_timed_out)

    def _head_ends(self, data: bytes) -> bool:
        """Whether the head being read ends in `data` within the limit (a blank line there)."""
        allowed = self._limits.max_head_bytes - self._head_bytes
        return data.find(b"\r\n\r\n", 0, max(0, allowed) + 4) != -1

    def _has_host(self) -> bool:
        """RFC 9112 3.2: an HTTP/1.1 request must carry Host (nearly every client sends it first)."""
        headers = self.headers
        if headers and headers[0][0] == b"host":
            return True
        return self.parser.get_http_version() != "1.1" or any(name == b"host" for name, _ in headers)

    def _head_refusal(self) -> Reply:
        limits = self._limits
        if len(self.url) > limits.max_url_bytes:
            return _uri_too_long(limits)
        if len(self.headers) > limits.max_headers:
            return _refusal(
                431, "too_many_headers", f"a request may carry at most {limits.max_headers} headers"
            )
        return _refusal(400, "missing_host", "an HTTP/1.1 request must carry a Host header", "Host")

    def _head_too_large(self, data: bytes) -> Reply:
        if not (self._in_head and self.headers) and b"\r\n" not in data:  # in the request line: a long target
            return _uri_too_long(self._limits)
        return _refusal(
            431, "headers_too_large", f"the request's head may be at most {self._limits.max_head_bytes} bytes"
        )

    def _refuse(self, reply: Reply, linger: bool = False) -> None:
        """Answer `reply` and close: the rest of what the client sends is not read. `linger`: end the
        sending side at once but close only when the client does or LINGER_SECONDS later, dropping what it
        still sends, since a close with its bytes unread would reset the connection and could discard the
        answer before the client reads it."""
        self._refused = True
        self._stop_head_timer()
        transport = self.transport
        if not transport.is_closing():
            default_headers = self.server_state.default_headers
            transport.write(encode_response(reply, False, default_headers, False, new_request_id()))
            if linger and transport.can_write_eof():
                transport.write_eof()
                self._body_timer = self.loop.call_later(LINGER_SECONDS, transport.close)
            else:
                transport.close()

    def _stop_head_timer(self) -> None:
        if self._head_timer is not None:
            self._head_timer.cancel()
            self._head_timer = None

    def _stop_body_timer(self) -> None:
        if self._body_timer is not None:
            self._body_timer.cancel()
            self._body_timer = None

    def _body_timed_out(self) -> None:
        """The body did not arrive in time: 408 and close, or only close when its answer has begun (an app
        that answered without reading it); the app still waiting for it is told the client went."""
        self._body_timer = None
        if not self._reading_body or self.transport.is_closing():
            return
        if getattr(self.cycle, "response_started", False):
            self.transport.close()
            return
        seconds = self._limits.body_timeout_seconds
        message = f"the request's body took longer than {seconds:g} s to arrive"
        self._refuse(_refusal(408, "body_timeout", message), linger=True)

    def _head_timed_out(self) -> None:
        self._head_timer = None
        if self._reading_body or self.transport.is_closing():
            return
        if not self._received:
            self.transport.close()  # nothing was sent: nothing to answer
            return
        self._refuse(_refusal(408, "request_timeout", "the request's head took too long to arrive"))

    def on_message_begin(self) -> None:
        """uvicorn's, less the ASGI scope (two dicts and a copy of the app state): the hot lane needs none,
        and a request it does not take gets its scope once its head is read (_begin_asgi)."""
        self.url = b""
        self.expect_100_continue = False
        self.headers = []
        self._in_head = True
        self._messages_begun += 1

    def _begin_asgi(self) -> None:
        """uvicorn's on_message_begin for a request that goes through ASGI, run once its head is read: the
        scope it makes, with the head read so far."""
        url, headers, expect_100_continue = self.url, self.headers, self.expect_100_continue
        super().on_message_begin()
        self.url, self.headers, self.expect_100_continue = url, headers, expect_100_continue
        self.scope["headers"] = headers
        self.scope[PEER] = self.client  # type: ignore[literal-required]  # before uvicorn's proxy headers

    def _read_again_without_upgrade(self, rest: bytes) -> None:
        """Parse the request whose upgrade offer is ignored again, from a head without the offer, then
        `rest` (its body and whatever followed) on the same new parser."""
        self._ignored_upgrade = False
        method, version = self.parser.get_method(), self.parser.get_http_version()
        lines = [b"%s %s HTTP/%s\r\n" % (method, self.url, version.encode("ascii"))]
        for name, value in self.headers:
            if name in UPGRADE_OFFER:
                continue
            if name == b"connection":
                tokens = [t.strip() for t in value.split(b",")]
                value = b", ".join(t for t in tokens if t and t.lower() not in UPGRADE_OFFER)
                if not value:
                    continue
            lines.append(b"%s: %s\r\n" % (name, value))
        lines.append(b"\r\n")
        self.parser = httptools.HttpRequestParser(self)
        self.parser.set_dangerous_leniencies(lenient_data_after_close=True)  # as uvicorn makes its parser
        self.data_received(b"".join(lines) + rest)

    def eof_received(self) -> bool | None:  # type: ignore[override]  # asyncio.Protocol allows a bool
        """Keep the connection open for writing while the requests that came before the end are answered: a
        client that half-closes after its request (a shell script, a simple player) still gets its answer,
        then the connection closes, as after the last answer of a `Connection: close` request. One that
        ends inside a request is closed at once: that request can never be complete."""
        if self._reading_body or self._in_head:
            return None
        if self.pipeline:  # the newest queued request answers last
            self.pipeline[0][0].keep_alive = False
            return True
        if self.cycle is not None and not self.cycle.response_complete:
            self.cycle.keep_alive = False
            return True
        return None

    def on_headers_complete(self) -> None:
        self._in_head = False
        self._reading_body = True
        if self._head_timer is not None:
            self._stop_head_timer()
        limits = self._limits
        # The head's bytes were bounded as they came; its parts are checked once it is whole.
        if (
            len(self.headers) > limits.max_headers
            or len(self.url) > limits.max_url_bytes
            or not self._has_host()
        ):
            raise _Refused(self._head_refusal())
        if self.parser.should_upgrade() and not self._should_upgrade():
            self._ignored_upgrade = True  # read again without the offer once the parser stops at its end
            return
        idle = (self.cycle is None or self.cycle.response_complete) and not self.pipeline
        # A client that does not read its answers pauses writing: then uvicorn's cycle, which waits for the
        # drain, answers, so that answers never pile up in the transport's buffer.
        if self._lanes and idle and not self.flow.write_paused and self._edge is not None:
            handler = self._hot_handler()
            if handler is not None:
                self._handler = handler
                keep_alive = self.parser.get_http_version() != "1.0" and self.parser.should_keep_alive()
                request_id, edge = self._edge.for_lane(self.headers)
                self.cycle = _Answering(keep_alive, request_id, edge, self._meter)  # type: ignore[assignment]
                return
        self._begin_asgi()
        super().on_headers_complete()

    def _hot_handler(self) -> Handler | None:
        if self.expect_100_continue:
            return None
        method = self.parser.get_method()
        if method != b"GET" and method != b"HEAD" and method != b"POST":
            return None
        url = self.url
        if url[:1] != b"/" or b"%" in url or b"#" in url or not url.isascii():
            return None
        raw_path, _, query = url.partition(b"?")
        for mount, env in self._lanes:
            if not mount or raw_path.startswith(mount + b"/"):
                path = raw_path[len(mount) :].decode("ascii")
                self._method = method.decode("ascii")
                if method != b"POST":
                    begin = pixel_route(env, path, query, self._source_network())
                    if begin is not None:
                        self._begin = begin
                        meters = env.meters
                        self._meter = meters.impression if path in IMPRESSION_PATHS else meters.tracking
                        return _PIXEL
                    self._meter = env.meters.vast
                    return inline_vast_route(env, self._method, path)
                if path not in AD_REQUEST_PATHS:
                    return None
                self._post = (env, query)
                self._meter = env.meters.ad_request
                self._body = []
                self._body_size = 0
                return _READ_BODY
        return None

    def _source_network(self) -> int:
        """The client's network: the peer's, once per connection, or a trusted proxy's X-Forwarded-For's."""
        network = self._peer_network
        if network is None:
            network = self._peer_network = self._sources.peer(self.client)
        if network == TRUSTED:
            return self._sources.forwarded(forwarded_for(self.headers))
        return network

    def on_body(self, body: bytes) -> None:
        if self._ignored_upgrade:
            return
        if self._handler is None:
            super().on_body(body)
        elif self._post is not None and self._body_size <= self._post[0].settings.max_body_bytes:
            # Kept up to one byte past the limit: enough for the handler to answer 413; the rest is dropped.
            self._body.append(body)
            self._body_size += len(body)
        # A hot GET's body means nothing to it, as to the ASGI lane: read and dropped.

    def on_message_complete(self) -> None:
        self._reading_body = False
        if self._body_timer is not None:
            self._stop_body_timer()
        if self._ignored_upgrade:
            return  # the offer's head alone: the request is read again, body and all
        handler = self._handler
        if handler is None:
            return super().on_message_complete()
        self._handler = None
        if self._post is not None:
            (env, query), self._post = self._post, None
            handler = ad_request_route(env, query, self.headers, b"".join(self._body), self._source_network())
            self._body = []
        answering: _Answering = self.cycle  # type: ignore[assignment]
        answering.started = perf_counter()
        method = self._method
        url = self.url
        if handler is _PIXEL:
            # No task, and no line is logged but a failure's, which binds the request id itself (_failed).
            self._begin_pixel(answering, method, url)
            return
        # The task, callbacks and log lines of this request carry its id: each copies the context now.
        bound = REQUEST_ID.set(answering.request_id)
        try:
            task: asyncio.Task[Reply] = self.loop.create_task(handler())
            self.tasks.add(task)  # type: ignore[arg-type]  # uvicorn types its set for ASGI tasks
            task.add_done_callback(lambda done: self._answer(answering, method, url, done))
        finally:
            REQUEST_ID.reset(bound)

    def _begin_pixel(self, answering: _Answering, method: str, url: bytes) -> None:
        """Hand the pixel to the ledger and answer from its verdict's callback: no task, no coroutine."""
        begin, self._begin = self._begin, None
        assert begin is not None
        try:
            started = begin()
        except Exception as exc:  # the ledger is stopping: answered as the ASGI lane would
            started = _failed(answering, exc, method, url)
        if isinstance(started, Pending):
            verdict, finish = started
            # In the server's task set, as a task would be: a graceful shutdown waits for it, and cancels it
            # when it times out.
            self.tasks.add(verdict)  # type: ignore[arg-type]
            verdict.add_done_callback(lambda done: self._answer(answering, method, url, done, finish))
        else:  # refused before the ledger: answered on the loop's next pass, as a task's answer would be
            self.loop.call_soon(self._respond, answering, method, started)

    def _answer(
        self,
        answering: _Answering,
        method: str,
        url: bytes,
        done: asyncio.Future[Any],
        finish: Callable[[Any], Reply] | None = None,
    ) -> None:
        """Answer from a finished task (its Reply) or verdict future (`finish` makes its Reply)."""
        self.tasks.discard(done)
        try:
            result = done.result()
            reply = result if finish is None else finish(result)
        except Exception as exc:
            reply = _failed(answering, exc, method, url)
        except BaseException:  # cancelled (a graceful shutdown timed out), SystemExit: close as uvicorn does
            answering.response_complete = True
            self.transport.close()
            return
        self._respond(answering, method, reply)

    def _respond(self, answering: _Answering, method: str, reply: Reply) -> None:
        answering.response_complete = True
        answering.meter.done(reply.status, answering.started)  # its one count (telemetry/metrics.py)
        transport = self.transport
        if transport.is_closing():
            return  # the player went away; what it fired is stored, and its retry is a duplicate
        keep_alive = answering.keep_alive
        head = method == "HEAD"
        default_headers = self.server_state.default_headers
        transport.write(
            encode_response(reply, head, default_headers, keep_alive, answering.request_id, answering.edge)
        )
        if not keep_alive:
            transport.close()
        self._answered()

    def _answered(self) -> None:
        """uvicorn's on_response_complete after a hot answer, with the keep-alive timeout kept by one timer
        per connection (_idle_since)."""
        self.server_state.total_requests += 1
        if self.transport.is_closing():
            return
        self.flow.resume_reading()
        if self.pipeline:  # a request that came while this one was answered, queued for ASGI: now its turn
            cycle, app = self.pipeline.pop()
            self._start_asgi_task(cycle, app)
            return
        self._idle_since = self.loop.time()
        if self._idle_timer is None:
            self._idle_timer = self.loop.call_later(self.timeout_keep_alive, self._idle_check)

    def _idle_check(self) -> None:
        """Close the connection once it has been idle for uvicorn's keep-alive timeout since its last hot
        answer; else look again when it would be."""
        self._idle_timer = None
        since = self._idle_since
        if since is None:  # a request is being read or served: its answer arms the timer again
            return
        left = since + self.timeout_keep_alive - self.loop.time()
        if left > 0:
            self._idle_timer = self.loop.call_later(left, self._idle_check)
        else:
            self.timeout_keep_alive_handler()
