"""A small ASGI front that serves the exact hot paths without the framework.

Ad requests and pixels are most of the traffic; routing them here saves the framework's per-request cost
(architecture.md measures it). Everything else, and any path it does not recognise exactly, falls through to
Litestar, whose handlers call the same functions and describe these paths in the OpenAPI document.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Coroutine, MutableMapping, Sequence
from functools import partial
from typing import Any
from urllib.parse import parse_qsl

from adslot.api.ad_request import handle_ad_request
from adslot.api.proof_of_play import Pending, answered, begin_event, handle_inline_vast
from adslot.api.reply import NO_STORE, Reply, failure_reply
from adslot.environment import Environment
from adslot.vast.urls import QUARTILE_EVENTS

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]
Handler = Callable[[], Coroutine[Any, Any, Reply]]
Begin = Callable[[], Reply | Pending]
"""A pixel's begin_event with its request's arguments bound."""

AD_REQUEST_PATHS = frozenset({"/api/v1/ad/request", "/ad/request"})
CALLBACK_PATHS = frozenset({"/api/v1/ad/callback/", "/api/v1/ad/callback"})
TRACKING_PATHS = frozenset({"/api/v1/ad/tracking/video/", "/api/v1/ad/tracking/video"})
VAST_PREFIX = "/api/v1/ad/vast/"


def read_query(raw: bytes) -> dict[str, str]:
    """A raw query string's first value per name, as parse_qsl(keep_blank_values=True) reads it."""
    out: dict[str, str] = {}
    if b"%" in raw or b"+" in raw or not raw.isascii():
        for name, value in parse_qsl(raw.decode("latin-1"), keep_blank_values=True, encoding="latin-1"):
            out.setdefault(name, value.encode("latin-1").decode("utf-8", "replace"))
        return out
    # Nothing escaped (a player's pixel URL, as adslot wrote it): a plain split reads the same.
    for pair in raw.decode("ascii").split("&"):
        if pair:
            name, _, value = pair.partition("=")
            out.setdefault(name, value)
    return out


def _header(headers: Sequence[tuple[bytes, bytes]], name: bytes) -> str | None:
    for key, value in headers:
        if key == name:
            return str(value.decode("latin-1"))
    return None


async def _read_body(receive: Receive, limit: int) -> bytes:
    """Read at most limit + 1 bytes: enough for the handler to tell an oversized body."""
    chunks: list[bytes] = []
    size = 0
    while True:
        message = await receive()
        chunk = message.get("body", b"")
        if chunk:
            chunks.append(chunk)
            size += len(chunk)
            if size > limit:
                break
        if not message.get("more_body", False):
            break
    return b"".join(chunks)[: limit + 1]


_tails: dict[tuple[str | None, tuple[tuple[str, str], ...]], list[tuple[bytes, bytes]]] = {}
"""Encoded headers after content-length, per (content type, headers) of the few constant combinations that
nearly every answer sends (a pixel's, a VAST's: content type and cache-control only)."""
_CONSTANT = frozenset({"content-type", "cache-control"})


def _tail(content_type: str | None, headers: list[tuple[str, str]]) -> list[tuple[bytes, bytes]]:
    key = (content_type, tuple(headers))
    tail = _tails.get(key)
    if tail is None:
        tail = [(b"content-type", content_type.encode())] if content_type else []
        tail.extend((k.encode(), v.encode()) for k, v in headers)
        if len(_tails) < 64 and all(k in _CONSTANT for k, _ in headers):
            _tails[key] = tail
    return tail


def response_headers(reply: Reply) -> list[tuple[bytes, bytes]]:
    """The encoded headers of an answer: both lanes send exactly these."""
    tail = _tail(reply.content_type, reply.headers)
    # RFC 9110 8.6: a 204 carries no Content-Length.
    return [*tail] if reply.status == 204 else [(b"content-length", b"%d" % len(reply.body)), *tail]


async def _send(send: Send, reply: Reply, head: bool) -> None:
    await send({"type": "http.response.start", "status": reply.status, "headers": response_headers(reply)})
    await send({"type": "http.response.body", "body": b"" if head else reply.body})


def pixel_route(env: Environment, path: str, query: bytes) -> Begin | None:
    """The begin_event of a pixel (impression or tracking) at `path`, relative to the environment's mount,
    or None: the protocol lane answers it from its verdict's callback, the ASGI lanes await it."""
    if path in CALLBACK_PATHS:
        params = read_query(query)
        return partial(
            begin_event,
            env,
            event="impression",
            ad_request_uuid=params.get("ad_request_uuid"),
            layer=params.get("layer"),
        )
    if path in TRACKING_PATHS:
        params = read_query(query)
        return partial(
            begin_event,
            env,
            event=params.get("event"),
            ad_request_uuid=params.get("ad_request_uuid"),
            layer=params.get("layer"),
            events=QUARTILE_EVENTS,
        )
    return None


async def _pixel(begin: Begin) -> Reply:
    return await answered(begin())


def inline_vast_route(env: Environment, method: str, path: str) -> Handler | None:
    """The handler of a GET of an inline VAST at `path`, relative to the environment's mount, or None."""
    if method == "GET" and path.startswith(VAST_PREFIX) and "/" not in path[len(VAST_PREFIX) :]:
        return partial(handle_inline_vast, env, path[len(VAST_PREFIX) :])
    return None


def bodiless_route(env: Environment, method: str, path: str, query: bytes) -> Handler | None:
    """The handler of a hot GET or HEAD (a pixel, the inline VAST), or None: what both lanes serve
    without a body. `path` is relative to the environment's mount."""
    begin = pixel_route(env, path, query)
    if begin is not None:
        return partial(_pixel, begin)
    return inline_vast_route(env, method, path)


def ad_request_route(
    env: Environment, query: bytes, headers: Sequence[tuple[bytes, bytes]], body: bytes
) -> Handler:
    """The ad request's handler for a POST to one of AD_REQUEST_PATHS, as both lanes call it."""
    return partial(
        handle_ad_request,
        env,
        key=_header(headers, b"ssp-key"),
        fmt=read_query(query).get("format"),
        content_type=_header(headers, b"content-type"),
        body=body,
    )


def fast_lane(env: Environment, fallback: ASGIApp) -> ASGIApp:
    limit = env.settings.max_body_bytes

    async def app(scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return await fallback(scope, receive, send)
        path: str = scope["path"]
        root = scope.get("root_path", "")
        if root and path.startswith(root):
            path = path[len(root) :]
        method = scope["method"]
        try:
            reply: Reply | None = None
            if method == "POST" and path in AD_REQUEST_PATHS:
                body = await _read_body(receive, limit)
                reply = await ad_request_route(env, scope["query_string"], scope["headers"], body)()
            elif method in ("GET", "HEAD"):
                handler = bodiless_route(env, method, path, scope["query_string"])
                if handler is not None:
                    reply = await handler()
        except Exception as exc:
            # As Litestar answers for the same paths: the error envelope, logged; never a bare text/plain 500.
            reply = failure_reply(exc, method, path, NO_STORE)
        if reply is None:
            return await fallback(scope, receive, send)
        await _send(send, reply, method == "HEAD")

    return app
