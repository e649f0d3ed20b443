"""The hot paths' routing: raw query strings read as parse_qsl reads them, and every failure on a hot path
answered with the error envelope by the framework too, never a bare 500."""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, quote

import httpx
import pytest
from hypothesis import given
from hypothesis import strategies as st

from adslot.api import reply
from adslot.api.hot_paths import read_query
from adslot.api.http import build_litestar
from adslot.environment import Environment
from adslot.storage.failures import OutageLog
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
    """The hot lane splits unescaped queries itself; it must agree with parse_qsl on every query."""
    raw = "&".join(f"{quote(k)}={quote(v)}" if eq else quote(k) for k, v, eq in pairs).encode("ascii")
    for query in (raw, raw.replace(b"%20", b"+"), b"&" + raw + b"&&"):
        expected: dict[str, str] = {}
        for name, value in parse_qsl(query.decode("latin-1"), keep_blank_values=True, encoding="latin-1"):
            expected.setdefault(name, value.encode("latin-1").decode("utf-8", "replace"))
        assert read_query(query) == expected


@pytest.fixture
def api_log(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    """The messages of the API's logger, read straight from it: the framework's logging configuration
    sends its records through a queue that pytest's capture does not see. Its outage log starts afresh, so
    an outage an earlier test logged does not silence this one's."""
    messages: list[str] = []
    monkeypatch.setattr(reply, "outages", OutageLog(logging.getLogger("adslot.api")))

    class Keep(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            messages.append(record.getMessage())

    handler = Keep()
    logger = logging.getLogger("adslot.api")
    logger.addHandler(handler)
    try:
        yield messages
    finally:
        logger.removeHandler(handler)


def answer_of_an_unstarted_environment(
    tmp_path: Path, path: str, query: bytes, lookup: Callable[[uuid.UUID], Awaitable[Any]] | None = None
) -> tuple[httpx.Response, Any]:
    """What the framework answers on a hot `path` (as for every request the hot lane declines) for an
    environment whose ledger was never started (as during a shutdown), with its point reads replaced by
    `lookup` if given: the answer and its body, as JSON."""
    settings, _ = make_settings(tmp_path, "sqlite", free_port())
    env = Environment(settings, settings.environment("production"))
    if lookup is not None:
        env.lookup = lookup

    async def get() -> httpx.Response:
        transport = httpx.ASGITransport(app=build_litestar(env))
        async with httpx.AsyncClient(transport=transport, base_url="http://adslot") as client:
            return await client.get(f"{path}?{query.decode()}")

    response = asyncio.run(get())
    assert response.headers["content-type"] == "application/json"
    return response, response.json()


def test_a_pixel_the_ledger_writer_cannot_take_answers_503_with_retry_after(
    tmp_path: Path, api_log: list[str]
) -> None:
    """The player fires it again, which is safe: a pixel counts once however often it is fired."""
    response, body = answer_of_an_unstarted_environment(
        tmp_path, "/api/v1/ad/callback/", f"ad_request_uuid={uuid.uuid4()}".encode()
    )
    assert response.status_code == 503
    assert response.headers["retry-after"] == "1"
    assert body == {
        "status": 503,
        "error": {
            "code": "storage_unavailable",
            "message": "the database cannot take this request right now; retry shortly",
            "field": None,
        },
    }
    assert "the ledger is not running" in "\n".join(api_log)


def test_an_inline_vast_the_ledger_cannot_read_now_answers_503_with_retry_after(tmp_path: Path) -> None:
    response, body = answer_of_an_unstarted_environment(tmp_path, f"/api/v1/ad/vast/{uuid.uuid4()}", b"")
    assert response.status_code == 503
    assert response.headers["retry-after"] == "1"
    assert body["error"]["code"] == "storage_unavailable"


def test_an_unexpected_failure_on_a_hot_path_answers_the_500_envelope_not_plain_text(
    tmp_path: Path, api_log: list[str]
) -> None:
    """An inline VAST whose read fails with an error that says nothing of an outage: a bug, answered 500."""

    async def broken_read(ad_request_id: uuid.UUID) -> Any:
        raise KeyError(ad_request_id)

    response, body = answer_of_an_unstarted_environment(
        tmp_path, f"/api/v1/ad/vast/{uuid.uuid4()}", b"", broken_read
    )
    assert response.status_code == 500
    assert "retry-after" not in response.headers
    assert body == {
        "status": 500,
        "error": {
            "code": "internal_error",
            "message": "an internal error occurred; it has been logged",
            "field": None,
        },
    }
    assert "unhandled error on GET /api/v1/ad/vast/" in "\n".join(api_log)
