"""The benchmark's floor: a bare ASGI app that does the hot endpoints' serialization work and nothing else.

It answers the same paths with the same bodies as adslot, on the same server stack, but without framework,
authentication, decision or storage: read the body, decode it with msgspec, build the VAST with adslot's own
builders around a fresh uuid, encode the same envelope. adslot's throughput divided by this app's is the ratio
the speed targets are stated in (architecture.md, "Choices already measured").

Run by the benchmark as `uvicorn bench.bare_app:app`; BENCH_BARE_BASE_URL sets the base URL of the VAST links.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any
from urllib.parse import parse_qsl

import msgspec

from adslot import __version__
from adslot.vast.inline import InlineCreative, MediaFile, build_inline
from adslot.vast.wrapper import build_wrapper

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]

BASE_URL = os.environ.get("BENCH_BARE_BASE_URL", "http://127.0.0.1:8000").rstrip("/")
PLAY_WINDOW_SECONDS = 900
AD_REQUEST_PATHS = frozenset({"/api/v1/ad/request", "/ad/request"})
CALLBACK_PATHS = frozenset({"/api/v1/ad/callback/", "/api/v1/ad/callback"})
TRACKING_PATHS = frozenset({"/api/v1/ad/tracking/video/", "/api/v1/ad/tracking/video"})
VAST_PREFIX = "/api/v1/ad/vast/"

CREATIVE = InlineCreative(
    creative_id=1,
    title="Bench 15s",
    duration_seconds=15,
    media=MediaFile(
        url="https://cdn.example.com/bench.mp4",
        mime_type="video/mp4",
        width=1920,
        height=1080,
        bitrate_kbps=4000,
    ),
)
"""The same creative the benchmark registers in adslot, so both inline VASTs have the same size."""

JSON_HEADERS = [(b"content-type", b"application/json"), (b"cache-control", b"no-store")]
XML_HEADERS = [(b"content-type", b"application/xml; charset=utf-8"), (b"cache-control", b"no-store")]
_encode = msgspec.json.encode
_decode = msgspec.json.decode


async def _send(send: Send, status: int, body: bytes, headers: list[tuple[bytes, bytes]]) -> None:
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [(b"content-length", str(len(body)).encode()), *headers],
        }
    )
    await send({"type": "http.response.body", "body": body})


async def _read_body(receive: Receive) -> bytes:
    chunks: list[bytes] = []
    while True:
        message = await receive()
        chunks.append(message.get("body", b""))
        if not message.get("more_body", False):
            return b"".join(chunks)


def _query(scope: Scope) -> dict[str, str]:
    return dict(parse_qsl(scope["query_string"].decode("latin-1"), keep_blank_values=True))


async def _ad_request(scope: Scope, receive: Receive, send: Send) -> None:
    body = _decode(await _read_body(receive))
    ad_request_uuid = str(uuid.uuid4())
    venue_id: str = body["venue_id"]
    screen_id: str | None = body.get("screen_id")
    expires_at = int(body["play_time"]) + PLAY_WINDOW_SECONDS
    vast = build_wrapper(
        base_url=BASE_URL,
        ad_request_uuid=ad_request_uuid,
        venue_id=venue_id,
        screen_id=screen_id,
        ad_system_name="adslot",
        ad_system_version=__version__,
    )
    if _query(scope).get("format") == "xml":
        headers = [
            *XML_HEADERS,
            (b"x-ad-request-uuid", ad_request_uuid.encode()),
            (b"x-ad-request-expired-at", str(expires_at).encode()),
        ]
        return await _send(send, 200, vast.encode(), headers)
    data = {
        "vast_tag": vast,
        "ad_request_uuid": ad_request_uuid,
        "ad_request_expired_at": expires_at,
        "venue_id": venue_id,
        "screen_id": screen_id,
    }
    await _send(send, 200, _encode({"status": 200, "data": data}), JSON_HEADERS)


async def _event(scope: Scope, send: Send, event: str | None) -> None:
    query = _query(scope)
    data = {
        "ad_request_uuid": query.get("ad_request_uuid"),
        "event": event or query.get("event"),
        "result": "counted",
    }
    await _send(send, 200, _encode({"status": 200, "data": data}), JSON_HEADERS)


async def _inline(path: str, send: Send) -> None:
    vast = build_inline(
        base_url=BASE_URL,
        ad_request_uuid=path[len(VAST_PREFIX) :],
        creative=CREATIVE,
        ad_system_name="adslot",
        ad_system_version=__version__,
    )
    await _send(send, 200, vast.encode(), XML_HEADERS)


async def _lifespan(receive: Receive, send: Send) -> None:
    while True:
        message = await receive()
        if message["type"] == "lifespan.startup":
            await send({"type": "lifespan.startup.complete"})
        elif message["type"] == "lifespan.shutdown":
            await send({"type": "lifespan.shutdown.complete"})
            return


async def app(scope: Scope, receive: Receive, send: Send) -> None:
    """Dispatch the four hot paths by exact match, as adslot's fast lane does; anything else is a 404."""
    if scope["type"] == "lifespan":
        return await _lifespan(receive, send)
    if scope["type"] != "http":
        return None
    path: str = scope["path"]
    method: str = scope["method"]
    if method == "POST" and path in AD_REQUEST_PATHS:
        return await _ad_request(scope, receive, send)
    if method == "GET":
        if path in CALLBACK_PATHS:
            return await _event(scope, send, "impression")
        if path in TRACKING_PATHS:
            return await _event(scope, send, None)
        if path.startswith(VAST_PREFIX):
            return await _inline(path, send)
    await _send(send, 404, b'{"status":404}', JSON_HEADERS)
