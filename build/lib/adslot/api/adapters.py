"""The seams between Litestar and adslot's framework-free pieces: the environment and the Reply."""

from __future__ import annotations

from typing import Any

from litestar import Request, Response

from adslot.api.reply import Reply
from adslot.environment import Environment


def env_of(request: Request[Any, Any, Any]) -> Environment:
    """The Environment that build_litestar put in the application's state."""
    env: Environment = request.app.state.env
    return env


def reply_response(reply: Reply) -> Response[bytes]:
    return Response(
        reply.body, status_code=reply.status, media_type=reply.content_type, headers=dict(reply.headers)
    )
