"""What counts as a database that cannot serve now (a 503 to retry) and what stays a bug (a 500).

Every exception here is the real one, raised by SQLite or PostgreSQL themselves."""

from __future__ import annotations

import asyncio
import logging
import sqlite3
from pathlib import Path

import asyncpg
import psycopg
import pytest
import sqlalchemy as sa

from adslot.ledger.wire import WireError, decode_verdicts
from adslot.ledger.writer_rules import failure
from adslot.storage.failures import LedgerUnavailable, OutageLog, connection_lost, unavailable
from tests.conftest import require_postgres


def sqlite_error(tmp_path: Path, statement: str, *, lock_first: bool = False) -> sqlite3.Error:
    path = tmp_path / "db.sqlite3"
    holder = sqlite3.connect(path, isolation_level=None)
    holder.execute("CREATE TABLE IF NOT EXISTS t (x)")
    if lock_first:
        holder.execute("BEGIN IMMEDIATE")
    other = sqlite3.connect(path, timeout=0, isolation_level=None)
    try:
        with pytest.raises(sqlite3.Error) as caught:
            other.execute(statement)
        return caught.value
    finally:
        other.close()
        holder.close()


def test_a_database_locked_by_another_writer_is_unavailable(tmp_path: Path) -> None:
    busy = sqlite_error(tmp_path, "BEGIN IMMEDIATE", lock_first=True)
    assert busy.sqlite_errorname == "SQLITE_BUSY"
    assert unavailable(busy)


def test_a_wrong_statement_or_a_missing_table_is_a_bug_not_an_outage(tmp_path: Path) -> None:
    missing = sqlite_error(tmp_path, "SELECT * FROM no_such_table")
    assert missing.sqlite_errorname == "SQLITE_ERROR"
    assert not unavailable(missing)
    assert not unavailable(sqlite_error(tmp_path, "INSERT INTO t VALUES (1, 2)"))


def test_a_read_only_database_file_is_unavailable(tmp_path: Path) -> None:
    path = tmp_path / "ro.sqlite3"
    sqlite3.connect(path).execute("CREATE TABLE t (x)").connection.commit()
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    with pytest.raises(sqlite3.OperationalError) as caught:
        conn.execute("INSERT INTO t VALUES (1)")
    conn.close()
    assert caught.value.sqlite_errorname.startswith("SQLITE_READONLY")
    assert unavailable(caught.value)


def test_a_refused_connection_and_the_ledgers_own_outage_are_unavailable_and_plain_bugs_are_not() -> None:
    assert unavailable(ConnectionRefusedError(111, "Connection refused"))
    assert unavailable(TimeoutError())
    assert unavailable(LedgerUnavailable("the ledger writer is not running"))
    assert not unavailable(AssertionError("store not started"))
    assert not unavailable(ValueError("bad"))
    assert not unavailable(KeyError("x"))


def test_an_outage_wrapped_by_sqlalchemy_is_found_through_its_cause(tmp_path: Path) -> None:
    path = tmp_path / "db.sqlite3"
    holder = sqlite3.connect(path, isolation_level=None)
    holder.execute("CREATE TABLE t (x)")
    holder.execute("BEGIN IMMEDIATE")
    engine = sa.create_engine(f"sqlite:///{path}", connect_args={"timeout": 0})
    try:
        with pytest.raises(sa.exc.OperationalError) as caught, engine.begin() as conn:
            conn.exec_driver_sql("INSERT INTO t VALUES (1)")
    finally:
        engine.dispose()
        holder.close()
    assert unavailable(caught.value)
    bug = sa.exc.ProgrammingError("SELECT", None, sqlite3.ProgrammingError("bad parameter"))
    assert not unavailable(bug)


def test_the_writer_process_tells_its_worker_which_failures_pass(tmp_path: Path) -> None:
    busy = sqlite_error(tmp_path, "BEGIN IMMEDIATE", lock_first=True)
    with pytest.raises(LedgerUnavailable, match="database is locked"):
        decode_verdicts(failure(busy))
    with pytest.raises(WireError, match="IntegrityError") as caught:
        decode_verdicts(failure(sqlite3.IntegrityError("UNIQUE constraint failed: ad_requests.id")))
    assert not isinstance(caught.value, LedgerUnavailable)


def test_a_postgresql_connection_the_server_ended_is_unavailable() -> None:
    url = require_postgres()

    async def ended() -> BaseException:
        victim = await asyncpg.connect(url)
        admin = await asyncpg.connect(url)
        try:
            pid = victim.get_server_pid()
            await admin.execute("SELECT pg_terminate_backend($1)", pid)
            # Which of these depends on where the FATAL notice meets the next statement.
            broken = (asyncpg.PostgresError, asyncpg.InterfaceError, asyncpg.InternalClientError, OSError)
            with pytest.raises(broken) as caught:
                for _ in range(50):  # the termination reaches the victim's socket a moment later
                    await victim.execute("SELECT 1")
                    await asyncio.sleep(0.02)
            return caught.value
        finally:
            await admin.close()
            victim.terminate()

    error = asyncio.run(ended())
    assert unavailable(error) and connection_lost(error)


def test_asyncpgs_broken_protocol_state_after_a_terminated_backend_is_unavailable() -> None:
    """The branch the test above reaches only when the FATAL notice arrives between statements: asyncpg's
    own message for it, as it raised it here."""
    assert unavailable(
        asyncpg.InternalClientError("cannot switch to state 15; another operation (2) is in progress")
    )
    assert not unavailable(asyncpg.InternalClientError("unexpected message type"))


def test_a_postgresql_statement_error_is_a_bug_not_an_outage() -> None:
    url = require_postgres()

    async def wrong() -> BaseException:
        conn = await asyncpg.connect(url)
        try:
            with pytest.raises(asyncpg.PostgresError) as caught:
                await conn.execute("SELECT * FROM adslot_no_such_table")
            return caught.value
        finally:
            await conn.close()

    error = asyncio.run(wrong())
    assert error.sqlstate == "42P01"  # type: ignore[attr-defined]
    assert not unavailable(error)


def test_only_a_connection_that_went_away_is_lost_not_a_database_that_refused_or_is_busy(
    tmp_path: Path,
) -> None:
    """A lost connection is an outage whose statement in flight may have committed; a deadlock or a full
    disk is an outage whose statement was refused; a bug is neither."""
    assert connection_lost(ConnectionResetError()) and connection_lost(asyncpg.ConnectionDoesNotExistError())
    assert connection_lost(asyncpg.AdminShutdownError()) and connection_lost(asyncpg.ConnectionFailureError())
    refused = [asyncpg.DeadlockDetectedError(), asyncpg.DiskFullError(), asyncpg.SerializationError()]
    assert all(unavailable(e) and not connection_lost(e) for e in refused)
    locked = sqlite_error(tmp_path, "INSERT INTO t VALUES (1)", lock_first=True)
    assert unavailable(locked) and not connection_lost(locked)
    assert not connection_lost(asyncpg.UniqueViolationError()) and not connection_lost(ValueError())


def test_psycopg_s_lost_or_refused_connections_are_an_outage_and_its_statement_errors_are_not() -> None:
    refused = psycopg.OperationalError("connection failed: Connection refused")
    assert unavailable(refused)
    assert unavailable(sa.exc.OperationalError("SELECT 1", {}, refused))
    assert unavailable(psycopg.errors.AdminShutdown("terminating connection due to administrator command"))
    assert unavailable(psycopg.errors.DiskFull("could not extend file"))
    assert not unavailable(psycopg.errors.UndefinedTable("relation does not exist"))
    assert not unavailable(psycopg.errors.UniqueViolation("duplicate key"))


class _Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_an_outage_is_one_log_line_and_the_next_outage_says_how_many_answers_the_last_one_cost(
    caplog: pytest.LogCaptureFixture,
) -> None:
    clock = _Clock()
    outages = OutageLog(logging.getLogger("test.outage"), quiet_seconds=30, clock=clock)
    full = sqlite3.OperationalError("database or disk is full")
    full.sqlite_errorname = "SQLITE_FULL"  # type: ignore[attr-defined]
    with caplog.at_level(logging.WARNING, logger="test.outage"):
        for _ in range(100):  # a request every 0.1 s for 10 s: one outage
            outages.failed("POST /api/v1/ad/request", full)
            clock.now += 0.1
        assert len(caplog.records) == 1
        assert "storage unavailable: OperationalError: database or disk is full" in caplog.text
        assert caplog.records[0].exc_info is None, "a line, not a traceback"
        clock.now += 60  # recovered; a new outage later
        outages.failed("GET /api/v1/ad/callback/", full)
    assert len(caplog.records) == 2
    assert "(99 more during the last outage)" in caplog.records[1].getMessage()


def test_a_failure_that_is_not_an_outage_is_a_bug_logged_with_its_traceback_every_time(
    caplog: pytest.LogCaptureFixture,
) -> None:
    outages = OutageLog(logging.getLogger("test.bug"), clock=_Clock())
    with caplog.at_level(logging.ERROR, logger="test.bug"):
        for _ in range(3):
            outages.failed("the catalog refresh", KeyError("campaign"))
    assert len(caplog.records) == 3 and all(record.exc_info for record in caplog.records)
