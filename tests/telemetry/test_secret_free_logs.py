"""No log line holds a secret, whatever fails: a real `adslot serve`, in text and in JSON, is made to fail
with 500s while callers send their API keys, console cookies and passwords, and its whole log is searched
for each of them. The failures are real: tables the handlers need are dropped under the running server (a
missing table is a bug, answered 500 with its traceback in the log), and bodies nest deeper than msgspec
reads."""

from __future__ import annotations

import contextlib
import json
import re
import sqlite3
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
import sqlalchemy as sa

from adslot.settings import Settings
from tests.console.conftest import csrf_of
from tests.served import Server, cli, served_setup

PASSWORD = "correct horse battery staple 42"
SMTP_PASSWORD = "smtp relay pass 7f3a"
EMAIL = "ops@example.test"
DEEP = b"[" * 1000 + b"]" * 1000


@pytest.fixture(params=["text", "json"])
def log_format(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def failing(log_format: str, tmp_path: Path) -> Iterator[tuple[Server, str, Settings]]:
    setup = served_setup("sqlite", tmp_path)
    server, key, settings = next(setup)
    server.environ |= {
        "ADSLOT_LOG_FORMAT": log_format,
        "ADSLOT_LOG_LEVEL": "info",
        "ADSLOT_SMTP_HOST": "127.0.0.1",
        "ADSLOT_SMTP_PORT": "9",
        "ADSLOT_SMTP_USER": "alerts@example.test",
        "ADSLOT_SMTP_PASSWORD": SMTP_PASSWORD,
    }
    subprocess.run(
        [
            sys.executable,
            "-m",
            "adslot.cli",
            "users",
            "create",
            "--email",
            EMAIL,
            "--role",
            "admin",
            "--password-stdin",
        ],
        env=server.environ,
        input=PASSWORD + "\n",
        text=True,
        check=True,
        capture_output=True,
        timeout=120,
    )
    yield server, key, settings
    next(setup, None)


def drop(settings: Settings, table: str) -> None:
    """Drop `table` of the production database under the running server: the bug of a missed migration."""
    path = sa.make_url(settings.environment("production").database_url).database
    assert path is not None
    with contextlib.closing(sqlite3.connect(path, timeout=30)) as conn:
        conn.execute("PRAGMA foreign_keys=OFF")
        conn.execute(f"DROP TABLE {table}")
        conn.commit()


def sign_in(http: httpx.Client) -> httpx.Response:
    page = http.get("/console/sign-in")
    return http.post(
        "/console/sign-in", data={"csrf_token": csrf_of(page.text), "email": EMAIL, "password": PASSWORD}
    )


def test_no_key_cookie_password_or_credential_reaches_the_log_of_a_server_failing_with_500s(
    failing: tuple[Server, str, Settings], log_format: str
) -> None:
    server, key, settings = failing
    admin = cli(server.environ, "keys", "create", "--account", "ops", "--scope", "admin").strip()
    server.start()
    partner = "http://bidder:p4rtner-s3cret@127.0.0.1:9/openrtb2/auction"
    statuses: list[int] = []
    with httpx.Client(base_url=server.url, timeout=30, headers={"Ssp-Key": admin}) as api:
        with httpx.Client(base_url=server.url, timeout=30) as console:
            assert sign_in(console).status_code == 303
            session = console.cookies["adslot_console"]
            pre_session = console.cookies["adslot_console_csrf"]
            assert console.get("/console/production/campaigns").status_code == 200
            for table in ("advertisers", "campaigns", "demand_partners", "ad_requests"):
                drop(settings, table)
            statuses.append(console.get("/console/production/campaigns").status_code)
            statuses.append(api.get("/api/v1/advertisers").status_code)
            # A failing INSERT quotes its parameters in the error: here a key and a partner's credentials.
            statuses.append(api.post("/api/v1/advertisers", json={"name": key}).status_code)
            partner_body = {"name": "dsp", "endpoint": partner, "timeout_ms": 100}
            statuses.append(api.post("/api/v1/demand/partners", json=partner_body).status_code)
            player = {"Ssp-Key": key, "Cookie": f"adslot_console={session}"}
            statuses.append(
                api.post(
                    "/api/v1/ad/request",
                    headers=player,
                    json={"venue_id": "lobby", "play_time": int(time.time()) + 60},
                ).status_code
            )
            for body in (DEEP, b'{"venue_id": "lobby", "play_time": 1, "x": ' + DEEP + b"}"):
                deep = api.post(
                    "/api/v1/ad/request",
                    headers={**player, "Content-Type": "application/json"},
                    content=body,
                )
                assert deep.status_code == 400 and deep.json()["error"]["code"] == "nesting_too_deep"
            drop(settings, "console_sessions")
        with httpx.Client(base_url=server.url, timeout=30) as stranger:
            statuses.append(sign_in(stranger).status_code)  # the password is a local of the failing frame
    assert statuses == [500] * 6
    server.terminate()
    log = server.log.read_text(errors="replace")
    assert log.count("unhandled error on") == 4 and log.count("console: ") >= 2, log
    assert "Traceback" in log or '"frames"' in log
    if log_format == "json":
        lines = [json.loads(line) for line in log.splitlines() if line.startswith("{")]
        assert sum(1 for line in lines if "exception" in line) >= 6
    secrets = {
        "the player's key": key,
        "the admin key": admin,
        "the session cookie": session,
        "the sign-in form's CSRF cookie": pre_session,
        "the password": PASSWORD,
        "the partner's credentials": "p4rtner-s3cret",
        "the SMTP password": SMTP_PASSWORD,
    }
    leaked = [what for what, value in secrets.items() if value in log]
    assert not leaked, leaked
    assert "[redacted]" in log  # what the failures quoted was there to leak, and was replaced
    assert not re.search(r"ssp_(live|test)_[0-9a-f]{8}", log)
