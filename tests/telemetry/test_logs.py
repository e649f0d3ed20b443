"""Logs and request ids: every line in one shape (JSON or text), one id per request, taken from X-Request-Id
when usable, answered back on every lane, and carried by the log lines written while serving it."""

from __future__ import annotations

import io
import json
import logging
import os
import re
import uuid
from collections.abc import Iterator, MutableMapping
from pathlib import Path
from typing import Any

import httpx
import pytest
import structlog

from adslot.edge.request_ids import MAX_LENGTH, REQUEST_ID, new_request_id
from adslot.settings import SettingsError, load_settings
from adslot.telemetry.logs import add_request_id, configure_logging
from tests.api.test_protocol import _exchange, _get, _pixel
from tests.conftest import LiveServer, drop_schemas, start_server
from tests.contract.support import issue
from tests.served import Server

GENERATED = re.compile(r"^[0-9a-f]{12}-[0-9a-f]+$")


@pytest.fixture
def configured() -> Iterator[io.StringIO]:
    """configure_logging on a buffer, undone afterwards (the root logger and structlog are the process's)."""
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    stream = io.StringIO()
    yield stream
    root.handlers[:] = handlers
    root.setLevel(level)
    structlog.reset_defaults()


def test_a_json_line_has_timestamp_level_logger_event_and_the_request_id(configured: io.StringIO) -> None:
    configure_logging("json", "info", configured)
    token = REQUEST_ID.set(b"trace-abc-123")
    try:
        logging.getLogger("adslot.api").warning("storage failed on %s", "/api/v1/ad/callback/")
    finally:
        REQUEST_ID.reset(token)
    logging.getLogger("adslot.api").info("outside a request")
    logging.getLogger("adslot.api").debug("below the level")
    first, second = (json.loads(line) for line in configured.getvalue().splitlines())
    assert set(first) == {"timestamp", "level", "logger", "event", "request_id"}
    assert first["event"] == "storage failed on /api/v1/ad/callback/"
    assert (first["level"], first["logger"], first["request_id"]) == (
        "warning",
        "adslot.api",
        "trace-abc-123",
    )
    assert re.match(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d+Z$", first["timestamp"])
    assert "request_id" not in second and second["event"] == "outside a request"


def test_text_is_the_default_and_readable(configured: io.StringIO) -> None:
    settings = load_settings({})
    assert (settings.log_format, settings.log_level) == ("text", "info")
    configure_logging(settings.log_format, settings.log_level, configured)
    token = REQUEST_ID.set(b"trace-abc-123")
    try:
        logging.getLogger("uvicorn.error").warning("Invalid HTTP request received.")
    finally:
        REQUEST_ID.reset(token)
    [line] = configured.getvalue().splitlines()
    assert not line.startswith("{")
    assert "Invalid HTTP request received." in line
    assert "[warning" in line and "uvicorn.error" in line and "request_id=trace-abc-123" in line


def test_configuring_twice_keeps_one_handler(configured: io.StringIO) -> None:
    configure_logging("json", "info", configured)
    configure_logging("json", "info", configured)
    logging.getLogger("adslot").warning("once")
    assert len(configured.getvalue().splitlines()) == 1


@pytest.mark.parametrize(("name", "raw"), [("ADSLOT_LOG_FORMAT", "xml"), ("ADSLOT_LOG_LEVEL", "loud")])
def test_an_unknown_log_format_or_level_stops_the_start(name: str, raw: str) -> None:
    with pytest.raises(SettingsError, match=name):
        load_settings({name: raw})


def test_new_ids_are_unique_and_differ_in_a_forked_child() -> None:
    ids = {new_request_id() for _ in range(1000)}
    assert len(ids) == 1000 and all(GENERATED.match(i.decode()) for i in ids)
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: its prefix is its own
        os.write(write, new_request_id())
        os._exit(0)
    os.waitpid(pid, 0)
    child = os.read(read, 64)
    os.close(read)
    os.close(write)
    assert child.split(b"-")[0] != new_request_id().split(b"-")[0]


def _ids(answers: list[tuple[int, dict[str, str], bytes]]) -> list[str]:
    return [headers["x-request-id"] for _, headers, _ in answers]


def test_the_sent_id_is_answered_back_on_the_hot_lane_the_asgi_lane_and_the_console(
    live: LiveServer, http: httpx.Client
) -> None:
    ad = issue(http, live)["ad_request_uuid"]
    pixel = _pixel(ad)
    requests = [
        _get(pixel, "X-Request-Id: lane-1"),  # the hot lane
        _get(pixel.replace("-", "%2D"), "X-Request-Id: asgi-1"),  # declined: Litestar
        _get("/console/sign-in", "X-Request-Id: console-1"),
        _get("/nowhere", "X-Request-Id: error-1"),
        _get(pixel),
    ]
    answers = _exchange(live, *requests)
    assert [status for status, _, _ in answers] == [200, 200, 200, 404, 200]
    *sent, generated = _ids(answers)
    assert sent == ["lane-1", "asgi-1", "console-1", "error-1"]
    assert GENERATED.match(generated)


@pytest.mark.parametrize(
    "raw", ["x" * (MAX_LENGTH + 1), "caf\xe9", "tab\there"], ids=["too-long", "non-ascii", "control"]
)
def test_an_unusable_id_is_replaced_by_a_new_one_on_both_lanes(live: LiveServer, raw: str) -> None:
    path = "/api/v1/ad/callback/?ad_request_uuid=not-a-uuid"
    header = f"X-Request-Id: {raw}"
    answers = _exchange(live, _get(path, header), _get(path.replace("-", "%2D"), header))
    lane, asgi = _ids(answers)
    assert GENERATED.match(lane) and GENERATED.match(asgi) and lane != asgi


def test_an_id_of_128_printable_characters_is_kept(live: LiveServer) -> None:
    kept = "a" * (MAX_LENGTH - 6) + " ~!@#$"
    [answer] = _exchange(live, _get("/api/v1/ad/vast/not-a-uuid", f"X-Request-Id: {kept}"))
    assert _ids([answer]) == [kept]


def test_a_refused_request_is_answered_with_a_new_id(live: LiveServer) -> None:
    [(status, headers, _)] = _exchange(live, b"NOT HTTP AT ALL\r\n\r\n")
    assert status == 400 and GENERATED.match(headers["x-request-id"])


def test_a_hot_lane_log_line_carries_its_request_id(
    live: LiveServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An inline VAST whose read fails unexpectedly is logged from the lane's answer callback: with its id."""
    assert live.app is not None

    async def broken_read(ad_request_id: uuid.UUID) -> Any:
        raise KeyError(ad_request_id)

    monkeypatch.setattr(live.app.environments["production"], "lookup", broken_read)
    seen: list[MutableMapping[str, Any]] = []

    class Keep(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            seen.append(add_request_id(None, record.levelname, {"event": record.getMessage()}))

    handler = Keep()
    logger = logging.getLogger("adslot.api")
    logger.addHandler(handler)
    try:
        vast = f"/api/v1/ad/vast/{uuid.uuid4()}"
        [(status, headers, _)] = _exchange(live, _get(vast, "X-Request-Id: vast-bug-7"))
    finally:
        logger.removeHandler(handler)
    assert status == 500 and headers["x-request-id"] == "vast-bug-7"
    assert [event["request_id"] for event in seen] == ["vast-bug-7"]
    assert "unhandled error on GET /api/v1/ad/vast/" in seen[0]["event"]


def test_with_the_fast_lane_off_litestar_answers_the_id(
    backend: str, tmp_path: Path, http: httpx.Client
) -> None:
    server, schemas = start_server(tmp_path, backend, ADSLOT_FAST_LANE="false")
    try:
        ad = issue(http, server)["ad_request_uuid"]
        answers = _exchange(server, _get(_pixel(ad), "X-Request-Id: slow-1"), _get(_pixel(ad, "start")))
        ids = _ids(answers)
        assert ids[0] == "slow-1" and GENERATED.match(ids[1])
    finally:
        server.stop()
        if schemas:
            drop_schemas(schemas)


def test_adslot_serve_writes_json_lines_with_the_request_id_of_the_request_being_served(
    served: tuple[Server, str, Any],
) -> None:
    """A real `adslot serve --workers 2` with ADSLOT_LOG_FORMAT=json: the start-up lines and a console
    refusal logged while serving a request that sent X-Request-Id."""
    server, _, _ = served
    server.environ["ADSLOT_LOG_FORMAT"] = "json"
    server.start(workers=2)
    try:
        answer = httpx.post(
            f"{server.url}/console/sign-in", data={"email": "a"}, headers={"X-Request-Id": "trace-serve-1"}
        )
        assert answer.status_code == 403 and answer.headers["x-request-id"] == "trace-serve-1"
    finally:
        server.terminate()
    lines = [line for line in server.log.read_text().splitlines() if line.startswith("{")]
    events = [json.loads(line) for line in lines]
    assert all({"timestamp", "level", "logger", "event"} <= set(event) for event in events)
    [refused] = [event for event in events if event.get("request_id") == "trace-serve-1"]
    assert refused["level"] == "warning" and refused["logger"] == "adslot.console"
    assert "CSRF" in refused["event"]
    assert any(event["event"].startswith("production ledger:") for event in events)
    not_json = [
        line
        for line in server.log.read_text().splitlines()
        if line and not line.startswith(("{", "adslot stopped"))
    ]
    assert not_json == []


def test_no_access_log_line_is_written_for_any_request() -> None:
    """uvicorn logs every request through its own cycle (the framework's lane) when its access logger reaches
    a handler; adslot keeps none (docs/operations.md#logs)."""
    configure_logging("json", "info")
    assert not logging.getLogger("uvicorn.access").hasHandlers()
    assert logging.getLogger("uvicorn.error").hasHandlers()
