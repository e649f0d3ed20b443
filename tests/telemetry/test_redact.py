"""Redaction is pure: every shape a secret travels in a log line is replaced, by its name or by its shape, and
the ids and words around it are kept."""

from __future__ import annotations

import io
import json
import logging
import secrets
from collections.abc import Iterator

import pytest
import structlog

from adslot.telemetry.logs import configure_logging
from adslot.telemetry.redact import REDACTED, redact_text, redact_value

KEY = "ssp_live_" + secrets.token_hex(16)
TEST_KEY = "ssp_test_" + secrets.token_hex(16)
SESSION = secrets.token_urlsafe(32)
CSRF = secrets.token_urlsafe(24)


@pytest.mark.parametrize(
    ("text", "secret"),
    [
        (f"key = '{KEY}'", KEY),
        (f"a sandbox key {TEST_KEY} in prose", TEST_KEY),
        ("password=hunter2&user=ops", "hunter2"),
        ("{'password': 'hunter2', 'x': 1}", "hunter2"),
        ('{\\"password\\": \\"hunter2\\"}', "hunter2"),
        ("[(b'ssp-key', b'abc123'), (b'accept', b'*/*')]", "abc123"),
        (f"[(b'cookie', b'adslot_console={SESSION}')]", SESSION),
        ("Authorization: Bearer abc.def", "abc.def"),
        ("authorization: basic dXNlcjpwYXNz", "dXNlcjpwYXNz"),
        (f"Cookie: theme=dark; adslot_console_csrf={CSRF}", CSRF),
        (f"the session {SESSION} ended", SESSION),
        ("POST to https://bidder:p4ss@dsp.example/openrtb2", "p4ss"),
    ],
    # Named, not shown: the keys are random, and parallel workers must collect the same test ids.
    ids=[
        "live-key",
        "sandbox-key-in-prose",
        "password-in-a-query",
        "password-in-a-repr",
        "password-in-escaped-json",
        "ssp-key-header",
        "console-cookie-header",
        "bearer-authorization",
        "basic-authorization",
        "csrf-cookie",
        "session-in-prose",
        "password-in-a-url",
    ],
)
def test_a_secret_in_any_shape_is_replaced(text: str, secret: str) -> None:
    redacted = redact_text(text)
    assert secret not in redacted and REDACTED in redacted
    assert redact_text(redacted) == redacted  # a line redacted twice is the same line


@pytest.mark.parametrize(
    "text",
    [
        "GET /api/v1/ad/vast/0190f3c2-aaaa-7bbb-8ccc-0123456789ab",
        "md5 0123456789abcdef0123456789abcdef",
        "console: POST /console/sign-in refused: missing or wrong CSRF token",
        "    token = await production.run_sync(",
        "def sign_in(token: str, password: str) -> None",
        "the session, which ended",
        '{"event": "refused: missing or wrong CSRF token", "request_id": "trace-1"}',
    ],
)
def test_ids_prose_and_code_are_kept(text: str) -> None:
    assert redact_text(text) == text


def test_a_value_is_replaced_whole_by_its_name_in_nested_dicts_and_header_pairs() -> None:
    event = {
        "event": "failed",
        "password": "a phrase with spaces",
        "context": {"ssp_key": "anything", "api_key": 1234, "venue": "lobby"},
        "headers": [("Cookie", "theme=dark"), ("Accept", "*/*")],
    }
    assert redact_value(event) == {
        "event": "failed",
        "password": REDACTED,
        "context": {"ssp_key": REDACTED, "api_key": REDACTED, "venue": "lobby"},
        "headers": [("Cookie", REDACTED), ("Accept", "*/*")],
    }


@pytest.fixture
def configured() -> Iterator[io.StringIO]:
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    yield io.StringIO()
    root.handlers[:] = handlers
    root.setLevel(level)
    structlog.reset_defaults()


PHRASE = "a phrase with spaces"


def _fail_holding(key: str, password: str) -> None:
    raise RuntimeError("the storage refused the write")


@pytest.mark.parametrize("log_format", ["text", "json"])
def test_a_traceback_is_written_without_its_frames_locals_and_every_line_is_redacted(
    configured: io.StringIO, log_format: str
) -> None:
    configure_logging(log_format, "info", configured)
    try:
        _fail_holding(KEY, PHRASE)
    except RuntimeError:
        logging.getLogger("adslot.api").exception("unhandled error on %s", f"POST with Ssp-Key: {TEST_KEY}")
    structlog.get_logger("adslot.console").warning("sign-in", password="hunter2", cookie=SESSION)
    out = configured.getvalue()
    assert "_fail_holding" in out and "the storage refused the write" in out  # the traceback is there
    for secret in (KEY, TEST_KEY, "a phrase with spaces", "hunter2", SESSION):
        assert secret not in out
    if log_format == "json":
        lines = [json.loads(line) for line in out.splitlines()]
        frames = [frame for error in lines[0]["exception"] for frame in error["frames"]]
        assert frames and all("locals" not in frame for frame in frames)
        assert lines[1]["password"] == REDACTED and lines[1]["cookie"] == REDACTED
