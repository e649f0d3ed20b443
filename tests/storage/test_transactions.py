"""The management engine's transactions: one snapshot per read on both databases, reads that cannot write, and
on SQLite the write lock from a write's first statement and a turn taken with the ledger writers
(storage.database.read_transaction, write_transaction)."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
import sqlalchemy as sa

from adslot.storage.database import read_transaction, sqlite_path, write_transaction
from adslot.storage.tables import advertisers
from adslot.storage.write_turn import WriteTurn
from tests.conftest import BACKENDS, migrated_engine
from tests.storage.turns import assert_waits_for_the_turn


@pytest.fixture(params=BACKENDS)
def engine(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[sa.Engine]:
    yield from migrated_engine(tmp_path, str(request.param))


@pytest.fixture
def sqlite_engine(tmp_path: Path) -> Iterator[sa.Engine]:
    yield from migrated_engine(tmp_path, "sqlite")


def _path(engine: sa.Engine) -> Path:
    return sqlite_path(engine.url.render_as_string())


def _other_writer(engine: sa.Engine) -> sqlite3.Connection:
    """Another process's connection to the same file, as a ledger writer has, that never waits for a lock."""
    return sqlite3.connect(_path(engine), timeout=0, isolation_level=None)


@contextmanager
def _committer(engine: sa.Engine) -> Iterator[Callable[[str], object]]:
    """Another connection that commits each statement it runs at once: a ledger writer, another worker."""
    if engine.dialect.name == "sqlite":
        other = _other_writer(engine)
        try:
            yield other.execute
        finally:
            other.close()
        return
    with engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
        yield conn.exec_driver_sql


def _advertiser_count(conn: sa.Connection) -> int:
    return int(conn.execute(sa.select(sa.func.count()).select_from(advertisers)).scalar_one())


def test_a_write_transaction_holds_sqlite_s_write_lock_from_its_first_statement(
    sqlite_engine: sa.Engine,
) -> None:
    """Even before it writes: what it read (an existence check) is then what it writes against."""
    other = _other_writer(sqlite_engine)
    try:
        with write_transaction(sqlite_engine) as conn:
            _advertiser_count(conn)
            with pytest.raises(sqlite3.OperationalError, match="locked"):
                other.execute("BEGIN IMMEDIATE")
        other.execute("BEGIN IMMEDIATE")  # free again once it committed
        other.execute("ROLLBACK")
    finally:
        other.close()


def test_a_read_sees_one_snapshot_across_its_statements(sqlite_engine: sa.Engine) -> None:
    """A catalog load or a report reads several statements: a commit between two of them stays unseen."""
    other = _other_writer(sqlite_engine)
    try:
        with sqlite_engine.connect() as conn:
            before = _advertiser_count(conn)
            other.execute("INSERT INTO advertisers (name, created_at) VALUES ('Between', 1)")
            assert _advertiser_count(conn) == before
        with sqlite_engine.connect() as conn:
            assert _advertiser_count(conn) == before + 1
    finally:
        other.close()


def test_a_write_transaction_waits_for_the_ledger_writers_turn_and_goes_when_it_ends(
    sqlite_engine: sa.Engine,
) -> None:
    """A ledger writer holds the turn (SQLite's own lock is free): the management write waits in the kernel's
    queue, not in SQLite's busy handler, and commits right after the turn is released."""
    ledger = WriteTurn(_path(sqlite_engine))

    def write() -> None:
        with write_transaction(sqlite_engine) as conn:
            conn.execute(sa.insert(advertisers).values(name="Queued", created_at=1))

    try:
        assert_waits_for_the_turn(ledger, write, "the management write")
    finally:
        ledger.close()
    with sqlite_engine.connect() as conn:
        assert conn.execute(sa.select(advertisers.c.id).where(advertisers.c.name == "Queued")).first()


def test_a_write_transaction_commits_on_leaving_it_and_rolls_back_on_an_exception(engine: sa.Engine) -> None:
    with write_transaction(engine) as conn:
        conn.execute(sa.insert(advertisers).values(name="Kept", created_at=1))
    with pytest.raises(RuntimeError), write_transaction(engine) as conn:
        conn.execute(sa.insert(advertisers).values(name="Dropped", created_at=1))
        raise RuntimeError("the request failed")
    with engine.connect() as conn:
        names = set(conn.execute(sa.select(advertisers.c.name)).scalars())
    assert "Kept" in names
    assert "Dropped" not in names


def test_a_read_transaction_sees_one_snapshot_across_its_statements(engine: sa.Engine) -> None:
    """A catalog load or a report: a commit between two of its statements stays unseen until the next one
    (on PostgreSQL READ COMMITTED would show it to the second statement)."""
    with _committer(engine) as commit:
        with read_transaction(engine) as conn:
            before = _advertiser_count(conn)
            commit("INSERT INTO advertisers (name, created_at) VALUES ('Between', 1)")
            assert _advertiser_count(conn) == before
        with read_transaction(engine) as conn:
            assert _advertiser_count(conn) == before + 1


def test_a_read_transaction_refuses_a_write_and_the_next_write_transaction_writes(engine: sa.Engine) -> None:
    """A write slipped into a read path fails on both databases, and leaves the pooled connection able to
    write again in a write transaction."""
    with pytest.raises(sa.exc.DBAPIError, match=r"(?i)read.?only"), read_transaction(engine) as conn:
        conn.execute(sa.insert(advertisers).values(name="Sneaked", created_at=1))
    with write_transaction(engine) as conn:
        conn.execute(sa.insert(advertisers).values(name="Written", created_at=1))
    with read_transaction(engine) as conn:
        names = set(conn.execute(sa.select(advertisers.c.name)).scalars())
    assert "Written" in names
    assert "Sneaked" not in names
