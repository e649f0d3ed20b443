"""Every bad request gets the exact error envelope (status, code, field) and changes nothing it should not.

One table walks bad input across the ad request, the pixels, the inline VAST and the record lookup. Each
case asserts its status, `error.code` and `error.field`, that neither environment's ledger gained a row, and
that the real ad request each environment holds (the pixels' target) kept every counter. The last test
compares the row counts after the whole table with those before it.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import httpx
import pytest
import sqlalchemy as sa

from adslot.storage.tables import ad_requests
from tests.conftest import PROD_VENUE, LiveServer
from tests.contract.support import (
    AD_REQUEST,
    ENVIRONMENTS,
    assert_empty_vast_error,
    assert_error,
    base_of,
    issue,
    key_of,
    stored_fires,
)

CALLBACK = "/api/v1/ad/callback/"
TRACKING = "/api/v1/ad/tracking/video/"
VAST = "/api/v1/ad/vast/"
RECORD = "/api/v1/ad/request/"
TARGET = "{target}"
"""Stands for the uuid of the real ad request that the environment under test holds."""
OTHER_TARGET = "{other_target}"
"""Stands for the uuid of the real ad request that the *other* environment holds."""
UNKNOWN_UUID = "0190a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5b"
DROP = object()


def body(**changes: Any) -> Callable[[int], Any]:
    """A valid ad request body for the seeded production venue, with fields changed (DROP removes one)."""

    def build(now: int) -> dict[str, Any]:
        out: dict[str, Any] = {"venue_id": PROD_VENUE, "screen_id": "screen-1", "play_time": now + 120}
        for name, value in changes.items():
            if value is DROP:
                out.pop(name)
            else:
                out[name] = value(now) if callable(value) else value
        return out

    return build


VALID = body()


def raw(data: bytes) -> Callable[[int], bytes]:
    return lambda _now: data


@dataclass(frozen=True)
class Case:
    id: str
    status: int
    code: str
    field: str | None
    method: str = "POST"
    path: str = AD_REQUEST
    env: str = "production"
    key: str | None = "own"
    """`own` is the environment's ad-request key, another name is a `live.keys` attribute, `raw:<text>` is
    sent as is, None sends no Ssp-Key header."""
    body: Callable[[int], Any] | None = VALID
    content_type: str | None = "application/json"
    params: dict[str, str] | None = None
    vast: bool = False
    """The VAST URL answers errors as an empty VAST document with the code in the x-adslot-error header."""


def pixel(
    id: str, status: int, code: str, field: str | None, path: str, env: str = "production", **params: str
) -> Case:
    return Case(
        id,
        status,
        code,
        field,
        method="GET",
        path=path,
        env=env,
        key=None,
        body=None,
        content_type=None,
        params=params,
    )


def vast(id: str, status: int, code: str, uuid_text: str, env: str = "production") -> Case:
    return Case(
        id,
        status,
        code,
        None,
        method="GET",
        path=VAST + uuid_text,
        env=env,
        key=None,
        body=None,
        content_type=None,
        vast=True,
    )


def lookup(
    id: str,
    status: int,
    code: str,
    field: str | None,
    uuid_text: str = TARGET,
    key: str | None = "own",
    env: str = "production",
) -> Case:
    return Case(
        id,
        status,
        code,
        field,
        method="GET",
        path=RECORD + uuid_text,
        env=env,
        key=key,
        body=None,
        content_type=None,
    )


LONG = "v" * 129
SKEW = 60
LEAD = 3600

CASES = [
    # --- ad request: the body is not a JSON object
    Case("invalid-json-truncated", 400, "invalid_json", "body", body=raw(b'{"venue_id": "venue-1", ')),
    Case("invalid-json-garbage", 400, "invalid_json", "body", body=raw(b"venue_id=venue-1&play_time=1")),
    Case("invalid-json-trailing-data", 400, "invalid_json", "body", body=raw(b'{"venue_id": "venue-1"} {}')),
    Case("invalid-json-empty-body", 400, "invalid_json", "body", body=raw(b"")),
    Case(
        "invalid-json-number-out-of-range",
        400,
        "invalid_json",
        "body",
        body=raw(b'{"venue_id": "venue-1", "play_time": 1e400}'),
    ),
    Case(
        "invalid-utf8-body",
        400,
        "invalid_json",
        "body",
        body=raw(b'{"venue_id": "venue-\xc3", "play_time": 1}'),
    ),
    Case(
        "body-is-array",
        400,
        "invalid_body",
        "body",
        body=lambda now: [{"venue_id": PROD_VENUE, "play_time": now}],
    ),
    Case("body-is-string", 400, "invalid_body", "body", body=lambda _now: "venue-1"),
    Case("body-is-number", 400, "invalid_body", "body", body=lambda _now: 42),
    Case("body-is-null", 400, "invalid_body", "body", body=raw(b"null")),
    Case("body-is-true", 400, "invalid_body", "body", body=raw(b"true")),
    # --- ad request: venue_id
    Case("empty-object", 400, "missing_field", "venue_id", body=lambda _now: {}),
    Case("missing-venue-id", 400, "missing_field", "venue_id", body=body(venue_id=DROP)),
    Case("venue-id-int", 400, "invalid_type", "venue_id", body=body(venue_id=1)),
    Case("venue-id-float", 400, "invalid_type", "venue_id", body=body(venue_id=1.5)),
    Case("venue-id-list", 400, "invalid_type", "venue_id", body=body(venue_id=[PROD_VENUE])),
    Case("venue-id-object", 400, "invalid_type", "venue_id", body=body(venue_id={"id": PROD_VENUE})),
    Case("venue-id-bool", 400, "invalid_type", "venue_id", body=body(venue_id=True)),
    Case("venue-id-null", 400, "invalid_type", "venue_id", body=body(venue_id=None)),
    Case("venue-id-empty", 400, "empty_value", "venue_id", body=body(venue_id="")),
    Case("venue-id-whitespace", 400, "empty_value", "venue_id", body=body(venue_id="   ")),
    Case("venue-id-only-tabs-and-newlines", 400, "empty_value", "venue_id", body=body(venue_id="\t\r\n")),
    Case("venue-id-129-chars", 400, "too_long", "venue_id", body=body(venue_id=LONG)),
    Case("venue-id-nul", 400, "invalid_characters", "venue_id", body=body(venue_id="venue\x001")),
    Case("venue-id-newline", 400, "invalid_characters", "venue_id", body=body(venue_id="venue\n1")),
    Case("venue-id-escape", 400, "invalid_characters", "venue_id", body=body(venue_id="venue\x1b[31m")),
    Case("venue-id-delete", 400, "invalid_characters", "venue_id", body=body(venue_id="venue\x7f")),
    # --- ad request: screen_id
    Case("screen-id-int", 400, "invalid_type", "screen_id", body=body(screen_id=7)),
    Case("screen-id-list", 400, "invalid_type", "screen_id", body=body(screen_id=["s"])),
    Case("screen-id-bool", 400, "invalid_type", "screen_id", body=body(screen_id=False)),
    Case("screen-id-empty", 400, "empty_value", "screen_id", body=body(screen_id="")),
    Case("screen-id-whitespace", 400, "empty_value", "screen_id", body=body(screen_id=" \t ")),
    Case("screen-id-129-chars", 400, "too_long", "screen_id", body=body(screen_id="s" * 129)),
    Case("screen-id-control-char", 400, "invalid_characters", "screen_id", body=body(screen_id="screen\x07")),
    # --- ad request: play_time
    Case("missing-play-time", 400, "missing_field", "play_time", body=body(play_time=DROP)),
    Case(
        "play-time-string", 400, "invalid_type", "play_time", body=body(play_time=lambda now: str(now + 120))
    ),
    Case("play-time-float", 400, "invalid_type", "play_time", body=body(play_time=lambda now: now + 120.0)),
    Case(
        "play-time-fractional", 400, "invalid_type", "play_time", body=body(play_time=lambda now: now + 120.5)
    ),
    Case("play-time-bool", 400, "invalid_type", "play_time", body=body(play_time=True)),
    Case("play-time-null", 400, "invalid_type", "play_time", body=body(play_time=None)),
    Case("play-time-list", 400, "invalid_type", "play_time", body=body(play_time=lambda now: [now + 120])),
    Case(
        "play-time-past-beyond-skew",
        400,
        "play_time_in_past",
        "play_time",
        body=body(play_time=lambda now: now - SKEW - 30),
    ),
    Case(
        "play-time-an-hour-ago",
        400,
        "play_time_in_past",
        "play_time",
        body=body(play_time=lambda now: now - 3600),
    ),
    Case("play-time-zero", 400, "play_time_in_past", "play_time", body=body(play_time=0)),
    Case("play-time-negative", 400, "play_time_in_past", "play_time", body=body(play_time=-1)),
    Case(
        "play-time-milliseconds",
        400,
        "play_time_too_far",
        "play_time",
        body=body(play_time=lambda now: (now + 120) * 1000),
    ),
    Case(
        "play-time-beyond-max-lead",
        400,
        "play_time_too_far",
        "play_time",
        body=body(play_time=lambda now: now + LEAD + 60),
    ),
    Case("play-time-huge-int", 400, "play_time_too_far", "play_time", body=body(play_time=10**30)),
    Case(
        "play-time-huge-negative-int", 400, "play_time_in_past", "play_time", body=body(play_time=-(10**30))
    ),
    # --- ad request: format, media type, size
    Case("format-html", 400, "invalid_format", "format", params={"format": "html"}),
    Case("format-upper-case-json", 400, "invalid_format", "format", params={"format": "JSON"}),
    Case("format-upper-case-xml", 400, "invalid_format", "format", params={"format": "XML"}),
    Case("format-empty", 400, "invalid_format", "format", params={"format": ""}),
    Case("format-vast", 400, "invalid_format", "format", params={"format": "vast"}),
    Case(
        "format-invalid-on-short-path",
        400,
        "invalid_format",
        "format",
        path="/ad/request",
        params={"format": "csv"},
    ),
    Case(
        "body-over-max-body-bytes",
        413,
        "payload_too_large",
        "body",
        body=body(screen_id="s" * 100, padding=" " * (16 * 1024)),
    ),
    Case("content-type-text-plain", 415, "unsupported_media_type", "Content-Type", content_type="text/plain"),
    Case(
        "content-type-form",
        415,
        "unsupported_media_type",
        "Content-Type",
        content_type="application/x-www-form-urlencoded",
    ),
    Case(
        "content-type-multipart",
        415,
        "unsupported_media_type",
        "Content-Type",
        content_type="multipart/form-data; boundary=x",
    ),
    Case("content-type-missing", 415, "unsupported_media_type", "Content-Type", content_type=None),
    Case(
        "content-type-latin1-charset",
        415,
        "unsupported_media_type",
        "Content-Type",
        content_type="application/json; charset=latin-1",
    ),
    Case(
        "content-type-json-lookalike",
        415,
        "unsupported_media_type",
        "Content-Type",
        content_type="application/jsonp",
    ),
    # --- ad request: keys and registration
    Case("missing-key", 401, "missing_api_key", "Ssp-Key", key=None),
    Case("empty-key", 401, "missing_api_key", "Ssp-Key", key="raw:"),
    Case("unknown-live-key", 401, "invalid_api_key", "Ssp-Key", key="raw:ssp_live_" + "0" * 32),
    Case("unknown-key-without-prefix", 401, "invalid_api_key", "Ssp-Key", key="raw:secret"),
    Case("sandbox-key-on-production", 401, "wrong_environment", "Ssp-Key", key="sandbox"),
    Case(
        "production-key-without-ad-request-scope",
        403,
        "insufficient_scope",
        "Ssp-Key",
        key="production_admin_only",
    ),
    Case("missing-key-checked-before-bad-body", 401, "missing_api_key", "Ssp-Key", key=None, body=raw(b"[")),
    Case("production-unknown-venue", 422, "unknown_venue", "venue_id", body=body(venue_id="venue-nowhere")),
    Case(
        "production-sandbox-magic-venue-is-unknown",
        422,
        "unknown_venue",
        "venue_id",
        body=body(venue_id="sandbox-no-fill"),
    ),
    # --- ad request on the sandbox
    Case("sandbox-production-key", 401, "wrong_environment", "Ssp-Key", env="sandbox", key="production"),
    Case(
        "sandbox-key-without-ad-request-scope",
        403,
        "insufficient_scope",
        "Ssp-Key",
        env="sandbox",
        key="sandbox_admin_only",
    ),
    Case(
        "sandbox-unknown-key",
        401,
        "invalid_api_key",
        "Ssp-Key",
        env="sandbox",
        key="raw:ssp_test_" + "f" * 32,
    ),
    Case(
        "sandbox-missing-venue-id", 400, "missing_field", "venue_id", env="sandbox", body=body(venue_id=DROP)
    ),
    Case(
        "sandbox-no-fill-venue-still-validates-play-time",
        400,
        "play_time_in_past",
        "play_time",
        env="sandbox",
        body=body(venue_id="sandbox-no-fill", play_time=lambda now: now - 7200),
    ),
    Case("sandbox-invalid-format", 400, "invalid_format", "format", env="sandbox", params={"format": "yaml"}),
    # --- impression pixel
    pixel("impression-missing-uuid", 400, "missing_ad_request_uuid", "ad_request_uuid", CALLBACK),
    pixel(
        "impression-empty-uuid",
        400,
        "missing_ad_request_uuid",
        "ad_request_uuid",
        CALLBACK,
        ad_request_uuid="",
    ),
    pixel(
        "impression-malformed-uuid",
        400,
        "malformed_ad_request_uuid",
        "ad_request_uuid",
        CALLBACK,
        ad_request_uuid="not-a-uuid",
    ),
    pixel(
        "impression-uuid-without-hyphens",
        400,
        "malformed_ad_request_uuid",
        "ad_request_uuid",
        CALLBACK,
        ad_request_uuid=UNKNOWN_UUID.replace("-", ""),
    ),
    pixel(
        "impression-uuid-with-trailing-text",
        400,
        "malformed_ad_request_uuid",
        "ad_request_uuid",
        CALLBACK,
        ad_request_uuid=UNKNOWN_UUID + "x",
    ),
    pixel(
        "impression-uuid-non-hex",
        400,
        "malformed_ad_request_uuid",
        "ad_request_uuid",
        CALLBACK,
        ad_request_uuid="zzzzzzzz-zzzz-zzzz-zzzz-zzzzzzzzzzzz",
    ),
    pixel(
        "impression-uuid-in-braces",
        400,
        "malformed_ad_request_uuid",
        "ad_request_uuid",
        CALLBACK,
        ad_request_uuid="{" + UNKNOWN_UUID.replace("-", "", 2) + "}",
    ),
    pixel(
        "impression-uuid-hyphens-moved",
        400,
        "malformed_ad_request_uuid",
        "ad_request_uuid",
        CALLBACK,
        ad_request_uuid=UNKNOWN_UUID.replace("-", "") + "----",
    ),
    pixel(
        "impression-uuid-underscore-separator",
        400,
        "malformed_ad_request_uuid",
        "ad_request_uuid",
        CALLBACK,
        ad_request_uuid=UNKNOWN_UUID[:-2] + "_b",
    ),
    pixel(
        "impression-uuid-urn-form",
        400,
        "malformed_ad_request_uuid",
        "ad_request_uuid",
        CALLBACK,
        ad_request_uuid="urn:uuid:" + UNKNOWN_UUID.replace("-", "")[:27],
    ),
    pixel(
        "impression-unknown-uuid",
        404,
        "unknown_ad_request",
        "ad_request_uuid",
        CALLBACK,
        ad_request_uuid=UNKNOWN_UUID,
    ),
    pixel(
        "impression-invalid-layer",
        400,
        "invalid_layer",
        "layer",
        CALLBACK,
        ad_request_uuid=TARGET,
        layer="bogus",
    ),
    pixel(
        "impression-layer-wrong-case",
        400,
        "invalid_layer",
        "layer",
        CALLBACK,
        ad_request_uuid=TARGET,
        layer="Inline",
    ),
    pixel(
        "impression-other-environments-uuid",
        404,
        "unknown_ad_request",
        "ad_request_uuid",
        CALLBACK,
        ad_request_uuid=OTHER_TARGET,
    ),
    pixel(
        "sandbox-impression-other-environments-uuid",
        404,
        "unknown_ad_request",
        "ad_request_uuid",
        CALLBACK,
        env="sandbox",
        ad_request_uuid=OTHER_TARGET,
    ),
    pixel(
        "sandbox-impression-malformed-uuid",
        400,
        "malformed_ad_request_uuid",
        "ad_request_uuid",
        CALLBACK,
        env="sandbox",
        ad_request_uuid="123",
    ),
    # --- tracking pixel
    pixel(
        "tracking-missing-uuid", 400, "missing_ad_request_uuid", "ad_request_uuid", TRACKING, event="start"
    ),
    pixel(
        "tracking-malformed-uuid",
        400,
        "malformed_ad_request_uuid",
        "ad_request_uuid",
        TRACKING,
        ad_request_uuid="{" + UNKNOWN_UUID + "}",
        event="start",
    ),
    pixel(
        "tracking-unknown-uuid",
        404,
        "unknown_ad_request",
        "ad_request_uuid",
        TRACKING,
        ad_request_uuid=UNKNOWN_UUID,
        event="midpoint",
    ),
    pixel("tracking-missing-event", 400, "missing_event", "event", TRACKING, ad_request_uuid=TARGET),
    pixel("tracking-empty-event", 400, "missing_event", "event", TRACKING, ad_request_uuid=TARGET, event=""),
    pixel(
        "tracking-unknown-event",
        400,
        "unknown_event",
        "event",
        TRACKING,
        ad_request_uuid=TARGET,
        event="pause",
    ),
    pixel(
        "tracking-event-wrong-case",
        400,
        "unknown_event",
        "event",
        TRACKING,
        ad_request_uuid=TARGET,
        event="Start",
    ),
    pixel(
        "tracking-event-snake-case",
        400,
        "unknown_event",
        "event",
        TRACKING,
        ad_request_uuid=TARGET,
        event="first_quartile",
    ),
    pixel(
        "tracking-event-impression-belongs-to-the-callback",
        400,
        "unknown_event",
        "event",
        TRACKING,
        ad_request_uuid=TARGET,
        event="impression",
    ),
    pixel(
        "tracking-invalid-layer",
        400,
        "invalid_layer",
        "layer",
        TRACKING,
        ad_request_uuid=TARGET,
        event="complete",
        layer="vast",
    ),
    pixel(
        "sandbox-tracking-unknown-event",
        400,
        "unknown_event",
        "event",
        TRACKING,
        env="sandbox",
        ad_request_uuid=TARGET,
        event="skip",
    ),
    # --- inline VAST
    vast("vast-malformed-uuid", 400, "malformed_ad_request_uuid", "not-a-uuid"),
    vast("vast-uuid-without-hyphens", 400, "malformed_ad_request_uuid", UNKNOWN_UUID.replace("-", "")),
    vast("vast-uuid-hyphens-moved", 400, "malformed_ad_request_uuid", UNKNOWN_UUID.replace("-", "") + "----"),
    vast("vast-unknown-uuid", 404, "unknown_ad_request", UNKNOWN_UUID),
    vast("vast-other-environments-uuid", 404, "unknown_ad_request", OTHER_TARGET),
    vast("sandbox-vast-malformed-uuid", 400, "malformed_ad_request_uuid", "12345", env="sandbox"),
    vast("sandbox-vast-other-environments-uuid", 404, "unknown_ad_request", OTHER_TARGET, env="sandbox"),
    # --- record lookup
    lookup("record-missing-key", 401, "missing_api_key", "Ssp-Key", key=None),
    lookup("record-unknown-key", 401, "invalid_api_key", "Ssp-Key", key="raw:ssp_live_" + "1" * 32),
    lookup("record-sandbox-key-on-production", 401, "wrong_environment", "Ssp-Key", key="sandbox"),
    lookup(
        "record-key-without-ad-request-scope",
        403,
        "insufficient_scope",
        "Ssp-Key",
        key="production_admin_only",
    ),
    lookup("record-malformed-uuid", 400, "malformed_ad_request_uuid", "ad_request_uuid", uuid_text="nope"),
    lookup(
        "record-uuid-in-braces",
        400,
        "malformed_ad_request_uuid",
        "ad_request_uuid",
        uuid_text="{" + UNKNOWN_UUID.replace("-", "", 2) + "}",
    ),
    lookup("record-unknown-uuid", 404, "unknown_ad_request", "ad_request_uuid", uuid_text=UNKNOWN_UUID),
    lookup("record-of-another-account", 404, "unknown_ad_request", "ad_request_uuid", key="other_account"),
    lookup(
        "record-other-environments-uuid", 404, "unknown_ad_request", "ad_request_uuid", uuid_text=OTHER_TARGET
    ),
    lookup(
        "sandbox-record-production-key", 401, "wrong_environment", "Ssp-Key", key="production", env="sandbox"
    ),
]

assert len({case.id for case in CASES}) == len(CASES), "case ids must be unique"


@dataclass
class Ledgers:
    """The two databases as the table found them, and the real ad request each environment holds."""

    engines: dict[str, sa.Engine]
    targets: dict[str, str]
    rows_before: dict[str, tuple[int, int]]

    def rows(self) -> dict[str, tuple[int, int]]:
        return {env: self._read(env)[0] for env in self.engines}

    def snapshot(self) -> dict[str, Any]:
        """Row counts of both ledgers, and each target's whole stored row and its fires."""
        return {env: self._read(env) for env in self.engines}

    def _read(self, env: str) -> tuple[tuple[int, int], dict[str, Any] | None, int]:
        """(ad_requests rows, stored fires), the target's stored row, the target's fires; one connection."""
        target = uuid.UUID(self.targets[env])
        with self.engines[env].connect() as conn:
            count = int(conn.execute(sa.select(sa.func.count()).select_from(ad_requests)).scalar_one())
            row = conn.execute(sa.select(ad_requests).where(ad_requests.c.id == target)).mappings().first()
            fires = stored_fires(conn, ad_requests.c.id == target)
            every_fire = stored_fires(conn)
        stored = {str(k): v for k, v in row.items()} if row else None
        return (count, every_fire), stored, fires


@pytest.fixture(scope="module")
def ledgers(live: LiveServer, dbs: dict[str, sa.Engine]) -> Iterator[Ledgers]:
    with httpx.Client(timeout=30) as http:
        targets = {env: issue(http, live, env)["ad_request_uuid"] for env in ENVIRONMENTS}
    state = Ledgers(dbs, targets, {})
    state.rows_before = state.rows()
    yield state


def resolve_key(live: LiveServer, case: Case) -> str | None:
    assert live.keys
    if case.key is None:
        return None
    if case.key == "own":
        return key_of(live, case.env)
    if case.key.startswith("raw:"):
        return case.key[len("raw:") :]
    return str(getattr(live.keys, case.key))


def send(http: httpx.Client, live: LiveServer, case: Case, ledgers: Ledgers) -> httpx.Response:
    other = "sandbox" if case.env == "production" else "production"

    def fill(text: str) -> str:
        return text.replace(TARGET, ledgers.targets[case.env]).replace(OTHER_TARGET, ledgers.targets[other])

    headers: dict[str, str] = {}
    key = resolve_key(live, case)
    if key is not None:
        headers["Ssp-Key"] = key
    if case.content_type is not None:
        headers["Content-Type"] = case.content_type
    content: bytes | None = None
    if case.body is not None:
        value = case.body(int(time.time()))
        content = value if isinstance(value, bytes) else json.dumps(value).encode()
    params = {name: fill(value) for name, value in (case.params or {}).items()}
    return http.request(
        case.method,
        base_of(live, case.env) + fill(case.path),
        params=params,
        headers=headers,
        content=content,
    )


@pytest.mark.parametrize("case", CASES, ids=[case.id for case in CASES])
def test_bad_request_gets_its_exact_error_and_changes_nothing(
    live: LiveServer, http: httpx.Client, ledgers: Ledgers, case: Case
) -> None:
    if case.id == "body-over-max-body-bytes":
        assert live.settings.max_body_bytes == 16 * 1024, "the case is sized for the default limit"
    assert (live.settings.play_time_skew_seconds, live.settings.play_time_max_lead_seconds) == (SKEW, LEAD)
    before = ledgers.snapshot()
    response = send(http, live, case, ledgers)
    if case.vast:
        assert_empty_vast_error(response, case.status, case.code)
    else:
        assert_error(response, case.status, case.code, case.field)
    assert response.headers["cache-control"] == "no-store"
    after = ledgers.snapshot()
    assert after == before, "a refused request must leave no record and move no counter"


def test_the_table_has_at_least_forty_distinct_bad_requests() -> None:
    def body_of(case: Case) -> bytes | str | None:
        value = case.body(0) if case.body else None
        return value if value is None or isinstance(value, bytes) else json.dumps(value, sort_keys=True)

    distinct = {
        (c.method, c.path, c.env, c.key, c.content_type, json.dumps(c.params, sort_keys=True), body_of(c))
        for c in CASES
    }
    assert len(distinct) == len(CASES) >= 40


def test_the_whole_bad_input_table_left_both_ledgers_without_new_rows(ledgers: Ledgers) -> None:
    """Runs after the table (pytest keeps file order): no bad request stored an ad request or a fire."""
    assert ledgers.rows() == ledgers.rows_before
