"""{host}/healthz and {host}/readyz: alive at once; ready only with the database answering, its migrations
current and the ledger writer running, else 503 with the reason."""

from __future__ import annotations

import os
import signal
import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import psycopg
import pytest
from alembic.script import ScriptDirectory

from adslot.ledger.process_store import ProcessLedgerStore
from adslot.ops.health import migration_state, probe_database, revisions
from adslot.settings import EnvironmentSettings
from adslot.storage.database import asyncpg_dsn, is_sqlite, sqlite_path
from adslot.storage.migrate import MIGRATIONS
from tests.conftest import LiveServer, eventually, free_port, require_postgres, start_server


def host(live: LiveServer) -> str:
    return f"http://127.0.0.1:{live.settings.port}"


def test_healthz_answers_ok_without_a_key_and_without_cors(live: LiveServer, http: httpx.Client) -> None:
    answer = http.get(f"{host(live)}/healthz", headers={"Origin": "https://player.example"})
    assert answer.status_code == 200
    assert answer.json() == {"status": "ok", "worker_pid": os.getpid()}
    assert not any(name.startswith("access-control-") for name in answer.headers)
    assert answer.headers["cache-control"] == "no-store"
    assert http.head(f"{host(live)}/healthz").status_code == 200


def test_readyz_is_ok_with_every_check_of_both_environments(live: LiveServer, http: httpx.Client) -> None:
    answer = http.get(f"{host(live)}/readyz", headers={"Origin": "https://player.example"})
    assert answer.status_code == 200, answer.text
    ok = {"database": "ok", "migrations": "ok", "ledger": "ok"}
    assert answer.json() == {
        "status": "ok",
        "worker_pid": os.getpid(),
        "checks": {"production": ok, "sandbox": ok},
    }
    assert not any(name.startswith("access-control-") for name in answer.headers)


def _previous(head: str) -> str:
    down = ScriptDirectory(str(MIGRATIONS)).get_revision(head).down_revision
    assert isinstance(down, str)
    return down


@contextmanager
def _revision_set_to(env: EnvironmentSettings, revision: str) -> Iterator[None]:
    """The database's alembic_version rewritten to `revision` meanwhile (as after a downgrade)."""
    head = revisions().head
    statement = "UPDATE alembic_version SET version_num = '{}'"
    if is_sqlite(env.database_url):
        conn = sqlite3.connect(sqlite_path(env.database_url), timeout=30, isolation_level=None)

        def run(sql: str) -> None:
            conn.execute(sql)
    else:
        conn = psycopg.connect(  # type: ignore[assignment]
            asyncpg_dsn(env.database_url), autocommit=True, options=f"-c search_path={env.database_schema}"
        )

        def run(sql: str) -> None:
            conn.execute(sql)

    try:
        run(statement.format(revision))
        yield
    finally:
        run(statement.format(head))
        conn.close()


def test_readyz_is_503_while_the_database_is_behind_the_latest_migration(
    live: LiveServer, http: httpx.Client
) -> None:
    head = revisions().head
    older = _previous(head)
    with _revision_set_to(live.settings.environment("production"), older):
        answer = http.get(f"{host(live)}/readyz")
    assert answer.status_code == 503
    body = answer.json()
    assert body["status"] == "unavailable"
    assert body["checks"]["production"] == {
        "database": "ok",
        "migrations": f"behind: {older} < {head}",
        "ledger": "ok",
    }
    assert body["checks"]["sandbox"]["migrations"] == "ok"
    assert http.get(f"{host(live)}/readyz").status_code == 200, "ready again once migrated"


def test_a_revision_this_adslot_does_not_know_is_reported_as_ahead() -> None:
    known = revisions()
    assert migration_state(known.head, known) == "ok"
    assert migration_state("9999", known) == f"ahead: 9999 is newer than this adslot's {known.head}"
    assert migration_state(None, known) == "none: the database has no migration applied"


def test_a_postgresql_server_that_does_not_answer_is_unreachable() -> None:
    url = require_postgres().rsplit("@", 1)[0] + f"@127.0.0.1:{free_port()}/test"
    env = EnvironmentSettings("production", url, "adslot_production", "http://x", "")
    database, migrations = probe_database(env, 1.0)
    assert database.startswith("unreachable: OperationalError") and migrations == "unknown"


@pytest.fixture
def sqlite_server(tmp_path: Path) -> Iterator[LiveServer]:
    server, _ = start_server(tmp_path, "sqlite")
    yield server
    server.stop()


def test_readyz_is_503_when_the_sqlite_database_file_is_gone(
    sqlite_server: LiveServer, http: httpx.Client
) -> None:
    path = sqlite_path(sqlite_server.settings.environment("production").database_url)
    path.rename(path.with_name("moved.sqlite3"))  # as an unmounted volume: the open files go on
    try:
        answer = http.get(f"{host(sqlite_server)}/readyz")
    finally:
        path.with_name("moved.sqlite3").rename(path)
    assert answer.status_code == 503
    production = answer.json()["checks"]["production"]
    assert production["database"].startswith("unreachable: OperationalError: unable to open database file")
    assert production["migrations"] == "unknown"
    assert answer.json()["checks"]["sandbox"]["database"] == "ok"


def test_readyz_connects_an_idle_worker_to_a_new_ledger_writer_when_its_own_died(
    sqlite_server: LiveServer, http: httpx.Client
) -> None:
    assert sqlite_server.app is not None
    store = sqlite_server.app.environments["production"].store
    assert isinstance(store, ProcessLedgerStore)
    first = store.writer_pid()
    assert first is not None
    os.kill(first, signal.SIGKILL)
    assert eventually(lambda: not store.connected()), "the worker saw its writer go"
    answer = http.get(f"{host(sqlite_server)}/readyz")
    assert answer.status_code == 200, answer.text
    assert answer.json()["checks"]["production"]["ledger"] == "ok"
    assert store.writer_pid() not in (None, first)
