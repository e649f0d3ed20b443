"""The hot paths' routing, free of any server: which handler a request to one of routes.py's paths gets.

The HTTP protocol's hot lane (api/protocol.py) calls these as soon as a request is read; the framework's
handlers (api/hot_routes.py), which serve whatever the lane declines and describe these paths in the OpenAPI
document, call the same handlers, so both lanes answer alike.
"""

from __future__ import annotations

from collections.abc import Callable, Coroutine, Sequence
from functools import partial
from typing import Any
from urllib.parse import parse_qsl

from adslot.api.ad_request import handle_ad_request
from adslot.api.proof_of_play import Pending, begin_event, handle_inline_vast
from adslot.api.reply import MARKUP_HEADERS, XML, Reply
from adslot.environment import Environment
from adslot.routes import IMPRESSION_PATHS, TRACKING_PATHS, VAST
from adslot.vast.urls import QUARTILE_EVENTS

Handler = Callable[[], Coroutine[Any, Any, Reply]]
Begin = Callable[[], Reply | Pending]
"""A pixel's begin_event with its request's arguments bound."""


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


_tails: dict[tuple[str | None, tuple[tuple[str, str], ...]], bytes] = {}
"""Encoded header lines after content-length, per (content type, headers) of the few constant combinations
that nearly every answer sends (a pixel's: content type and cache-control)."""
_CONSTANT = frozenset({"content-type", "cache-control"})


def _encode(content_type: str | None, headers: list[tuple[str, str]]) -> bytes:
    lines = [(b"content-type", content_type.encode())] if content_type else []
    lines.extend((k.encode(), v.encode()) for k, v in headers)
    return b"".join(b"%s: %s\r\n" % line for line in lines)


_MARKUP_TAIL = _encode(XML, MARKUP_HEADERS)
"""An inline VAST's header lines (reply.py's MARKUP_HEADERS), encoded once: recognised by identity."""


def _tail(content_type: str | None, headers: list[tuple[str, str]]) -> bytes:
    if headers is MARKUP_HEADERS and content_type is XML:
        return _MARKUP_TAIL
    key = (content_type, tuple(headers))
    tail = _tails.get(key)
    if tail is None:
        tail = _encode(content_type, headers)
        if len(_tails) < 64 and all(k in _CONSTANT for k, _ in headers):
            _tails[key] = tail
    return tail


def response_headers(reply: Reply) -> bytes:
    """The encoded header lines of the hot lane's answer: those the framework writes for the same Reply."""
    tail = _tail(reply.content_type, reply.headers)
    # RFC 9110 8.6: a 204 carries no Content-Length.
    return tail if reply.status == 204 else b"content-length: %d\r\n%s" % (len(reply.body), tail)


def pixel_route(env: Environment, path: str, query: bytes, source: int = 0) -> Begin | None:
    """The begin_event of a pixel (impression or tracking) at `path`, relative to the environment's mount,
    or None: the hot lane answers it from its verdict's callback, without a task. `source`: the client's
    network (api/sources.py)."""
    if path in IMPRESSION_PATHS:
        params = read_query(query)
        return partial(
            begin_event,
            env,
            event="impression",
            ad_request_uuid=params.get("ad_request_uuid"),
            layer=params.get("layer"),
            source=source,
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
            source=source,
        )
    return None


def inline_vast_route(env: Environment, method: str, path: str) -> Handler | None:
    """The handler of a GET of an inline VAST at `path`, relative to the environment's mount, or None."""
    if method == "GET" and path.startswith(VAST) and "/" not in path[len(VAST) :]:
        return partial(handle_inline_vast, env, path[len(VAST) :])
    return None


def ad_request_route(
    env: Environment, query: bytes, headers: Sequence[tuple[bytes, bytes]], body: bytes, source: int = 0
) -> Handler:
    """The ad request's handler for a POST to one of AD_REQUEST_PATHS, once its body is read; `source`: the
    client's network (api/sources.py)."""
    return partial(
        handle_ad_request,
        env,
        key=_header(headers, b"ssp-key"),
        fmt=read_query(query).get("format"),
        content_type=_header(headers, b"content-type"),
        content_encoding=_header(headers, b"content-encoding"),
        body=body,
        source=source,
    )
