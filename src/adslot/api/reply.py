"""A framework-free HTTP answer, so hot handlers serve both the ASGI fast lane and Litestar."""

from __future__ import annotations

import logging
from dataclasses import dataclass, field

import msgspec

from adslot.errors import INTERNAL_ERROR, STORAGE_UNAVAILABLE, ApiError
from adslot.storage.failures import UNAVAILABLE_RETRY_AFTER_SECONDS, OutageLog, unavailable
from adslot.vast.headers import NO_SCRIPT_HEADERS

log = logging.getLogger("adslot.api")
outages = OutageLog(log)
"""The answers of this worker that the storage could not serve: one log line per outage."""

JSON = "application/json"
XML = "application/xml; charset=utf-8"
NO_STORE = ("cache-control", "no-store")
MARKUP_HEADERS = [NO_STORE, *NO_SCRIPT_HEADERS]
"""The headers of an answer carrying VAST markup (vast/headers.py), shared by every such Reply (never
mutated): constants, so the hot lane caches their encoded lines."""


@dataclass(slots=True)
class Reply:
    status: int
    body: bytes = b""
    content_type: str | None = None
    headers: list[tuple[str, str]] = field(default_factory=list)


def json_reply(status: int, data: object, *headers: tuple[str, str]) -> Reply:
    return Reply(status, msgspec.json.encode({"status": status, "data": data}), JSON, list(headers))


def failure_reply(exc: Exception, method: str, path: str, *headers: tuple[str, str]) -> Reply:
    """An exception no handler answered: 503 with Retry-After when the storage cannot serve now, else the
    500 of a bug, with its traceback in the log."""
    if unavailable(exc):
        outages.failed(f"{method} {path}", exc)
        retry = ("retry-after", str(UNAVAILABLE_RETRY_AFTER_SECONDS))
        return error_reply(STORAGE_UNAVAILABLE, *headers, retry)
    log.error("unhandled error on %s %s", method, path, exc_info=exc)
    return error_reply(INTERNAL_ERROR, *headers)


def error_reply(error: ApiError, *headers: tuple[str, str]) -> Reply:
    extra = list(headers)
    if error.status == 401:
        extra.append(("www-authenticate", 'ApiKey header="Ssp-Key"'))
    return Reply(error.status, error.body(), JSON, extra)
