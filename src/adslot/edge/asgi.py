"""The edge on the ASGI lane: every request that reaches the app (the console, both environments' Litestar,
errors, and whatever the hot lane declines) gets its id, answered back and bound while it is served; a
player path gets its CORS headers, and its preflight is answered here, so that Litestar's own OPTIONS
answers (without any Access-Control-* header) stay those of every other path."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

from adslot.edge.headers import ORIGIN, EdgeHeaders
from adslot.edge.request_ids import HEADER, REQUEST_ID, accept

Message = MutableMapping[str, Any]
Send = Callable[[Message], Awaitable[None]]
Receive = Callable[[], Awaitable[Message]]
App = Callable[[MutableMapping[str, Any], Receive, Send], Awaitable[None]]
PREFLIGHT = b"access-control-request-method"


async def serve_with_edge(
    edge: EdgeHeaders, scope: MutableMapping[str, Any], receive: Receive, send: Send, app: App
) -> None:
    sent = origin = requested_method = None
    for name, value in scope["headers"]:
        if name == HEADER:
            sent = value
        elif name == ORIGIN:
            origin = value
        elif name == PREFLIGHT:
            requested_method = value
    request_id = accept(sent)
    extra = [(HEADER, request_id)]
    if edge.player(scope["path"]):
        if scope["method"] == "OPTIONS" and origin is not None and requested_method is not None:
            status, headers, body = edge.cors.preflight(origin)
            await send({"type": "http.response.start", "status": status, "headers": [*headers, *extra]})
            await send({"type": "http.response.body", "body": body})
            return
        extra += edge.answer_headers(origin)

    async def send_with_edge(message: Message) -> None:
        if message["type"] == "http.response.start":
            message = {**message, "headers": [*message.get("headers", ()), *extra]}
        await send(message)

    token = REQUEST_ID.set(request_id)
    try:
        await app(scope, receive, send_with_edge)
    finally:
        REQUEST_ID.reset(token)
