"""Every failure leaves as the error envelope of architecture.md, never as a framework default."""

from __future__ import annotations

import re
from typing import Any

from litestar import Request, Response
from litestar.exceptions import HTTPException, ValidationException

from adslot.api.adapters import reply_response
from adslot.api.reply import error_reply, failure_reply
from adslot.errors import ApiError

_FIELD = re.compile(r"`\$\.([A-Za-z0-9_]+)")
_CODES = {
    400: "invalid_request",
    401: "unauthorized",
    403: "forbidden",
    404: "not_found",
    405: "method_not_allowed",
    413: "payload_too_large",
    415: "unsupported_media_type",
    429: "rate_limited",
}


def to_response(error: ApiError) -> Response[bytes]:
    return reply_response(error_reply(error))


def api_error_handler(_: Request[Any, Any, Any], exc: ApiError) -> Response[bytes]:
    return to_response(exc)


def validation_handler(_: Request[Any, Any, Any], exc: ValidationException) -> Response[bytes]:
    field: str | None = None
    message = exc.detail
    if isinstance(exc.extra, list) and exc.extra:
        first = exc.extra[0]
        if isinstance(first, dict):
            message = str(first.get("message", message))
            key = first.get("key")
            match = _FIELD.search(message)
            field = str(key) if key else (match.group(1) if match else None)
    if field is None and "JSON" in message:
        field = "body"
    return to_response(
        ApiError(400, "invalid_field" if field not in (None, "body") else "invalid_body", message, field)
    )


def http_handler(_: Request[Any, Any, Any], exc: HTTPException) -> Response[bytes]:
    status = exc.status_code
    return to_response(ApiError(status, _CODES.get(status, "http_error"), exc.detail))


def internal_handler(request: Request[Any, Any, Any], exc: Exception) -> Response[bytes]:
    return reply_response(failure_reply(exc, request.method, request.url.path))


EXCEPTION_HANDLERS = {
    ApiError: api_error_handler,
    ValidationException: validation_handler,
    HTTPException: http_handler,
    Exception: internal_handler,
}
