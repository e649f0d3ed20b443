"""The fast lane parses raw query strings itself: any bytes get a defined answer, never a bare 500."""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, quote

import httpx
import pytest
from hypothesis import given
from hypothesis import strategies as st

from adslot.api.fastlane import Receive, Scope, Send, fast_lane, read_query
from adslot.environment import Environment
from tests.conftest import LiveServer, free_port, make_settings


def test_non_latin1_percent_escapes_in_a_pixel_query_get_a_400_not_a_500(
    live: LiveServer, http: httpx.Client
) -> None:
    response = http.get(
        f"{live.url}/api/v1/ad/tracking/video/?ad_request_uuid=01a20133-5465-78a2-9c1c-4875341844f0&event=%E2%9C%93"
    )
    assert response.status_code == 400
    assert response.json()["error"]["code"] == "unknown_event"
    bad = http.get(f"{live.url}/api/v1/ad/callback/?ad_request_uuid=%FF%FE%E2%9C")
    assert bad.status_code == 400
    assert bad.json()["error"]["code"] == "malformed_ad_request_uuid"


@given(st.lists(st.tuples(st.text(max_size=6), st.text(max_size=6), st.booleans()), max_size=6))
def test_the_fast_query_reader_reads_what_parse_qsl_reads(pairs: list[tuple[str, str, bool]]) -> None:
    """The fast lane splits unescaped queries itself; it must agree with parse_qsl on every query."""
    raw = "&".join(f"{quote(k)}={quote(v)}" if eq else quote(k) for k, v, eq in pairs).encode("ascii")
    for query in (raw, raw.replace(b"%20", b"+"), b"&" + raw + b"&&"):
        expected: dict[str, str] = {}
        for name, value in parse_qsl(query.decode("latin-1"), keep_blank_values=True, encoding="latin-1"):
            expected.setdefault(name, value.encode("latin-1").decode("utf-8", "replace"))
        assert read_query(query) == expected


def answer_of_an_unstarted_environment(
    tmp_path: Path, path: str, query: bytes, lookup: Callable[[uuid.UUID], Awaitable[Any]] | None = None
) -> tuple[dict[str, Any], Any]:
    """What the fast lane answers on `path` for an environment whose ledger was never started (as during a
    shutdown), with its point reads replaced by `lookup` if given: the start message and the body, as JSON."""
    settings, _ = make_settings(tmp_path, "sqlite", free_port())
    env = Environment(settings, settings.environment("production"))
    if lookup is not None:
        env.lookup = lookup
    fallback_called: list[Scope] = []

    async def fallback(scope: Scope, receive: Receive, send: Send) -> None:
        fallback_called.append(scope)

    sent: list[dict[str, Any]] = []

    async def receive() -> dict[str, Any]:
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(message: dict[str, Any]) -> None:
        sent.append(dict(message))

    scope = {
        "type": "http",
        "method": "GET",
        "path": path,
        "root_path": "",
        "query_string": query,
        "headers": [],
    }
    asyncio.run(fast_lane(env, fallback)(scope, receive, send))  # type: ignore[arg-type]
    assert not fallback_called
    start, body = sent
    assert (b"content-type", b"application/json") in start["headers"]
    return start, json.loads(body["body"])


def test_a_pixel_the_ledger_writer_cannot_take_answers_503_with_retry_after(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """The player fires it again, which is safe: a pixel counts once however often it is fired."""
    start, body = answer_of_an_unstarted_environment(
        tmp_path, "/api/v1/ad/callback/", f"ad_request_uuid={uuid.uuid4()}".encode()
    )
    assert start["status"] == 503
    assert (b"retry-after", b"1") in start["headers"]
    assert body == {
        "status": 503,
        "error": {
            "code": "storage_unavailable",
            "message": "the database cannot take this request right now; retry shortly",
            "field": None,
        },
    }
    assert "the ledger is not running" in caplog.text


def test_an_inline_vast_the_ledger_cannot_read_now_answers_503_with_retry_after(tmp_path: Path) -> None:
    start, body = answer_of_an_unstarted_environment(tmp_path, f"/api/v1/ad/vast/{uuid.uuid4()}", b"")
    assert start["status"] == 503
    assert (b"retry-after", b"1") in start["headers"]
    assert body["error"]["code"] == "storage_unavailable"


def test_an_unexpected_failure_on_a_hot_path_answers_the_500_envelope_not_plain_text(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """An inline VAST whose read fails with an error that says nothing of an outage: a bug, answered 500."""

    async def broken_read(ad_request_id: uuid.UUID) -> Any:
        raise KeyError(ad_request_id)

    start, body = answer_of_an_unstarted_environment(
        tmp_path, f"/api/v1/ad/vast/{uuid.uuid4()}", b"", broken_read
    )
    assert start["status"] == 500
    assert not any(name == b"retry-after" for name, _ in start["headers"])
    assert body == {
        "status": 500,
        "error": {
            "code": "internal_error",
            "message": "an internal error occurred; it has been logged",
            "field": None,
        },
    }
    assert "unhandled error on GET /api/v1/ad/vast/" in caplog.text
