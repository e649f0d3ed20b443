"""A framework-free HTTP answer, so hot handlers serve both the ASGI fast lane and Litestar."""

from __future__ import annotations

from dataclasses import dataclass, field

import msgspec

from adslot.errors import ApiError

JSON = "application/json"
XML = "application/xml; charset=utf-8"
NO_STORE = ("cache-control", "no-store")


@dataclass(slots=True)
class Reply:
    status: int
    body: bytes = b""
    content_type: str | None = None
    headers: list[tuple[str, str]] = field(default_factory=list)


def json_reply(status: int, data: object, *headers: tuple[str, str]) -> Reply:
    return Reply(status, msgspec.json.encode({"status": status, "data": data}), JSON, list(headers))


def error_reply(error: ApiError, *headers: tuple[str, str]) -> Reply:
    extra = list(headers)
    if error.status == 401:
        extra.append(("www-authenticate", 'ApiKey header="Ssp-Key"'))
    return Reply(error.status, error.body(), JSON, extra)
