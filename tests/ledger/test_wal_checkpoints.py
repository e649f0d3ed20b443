"""SQLite's WAL checkpoints on a thread beside the ledger writer: pages reach the database file without a
commit copying them, the WAL still goes back to its start, and the writer's memory stays trusted."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from pathlib import Path

import pytest

from adslot.ledger.records import Fire, Issue
from adslot.ledger.sqlite_store import SqliteLedgerStore, _connect
from adslot.ledger.wal_checkpoints import BACKSTOP_PAGES, WalCheckpointer
from tests.conftest import eventually
from tests.ledger.stores import PLAY, record

PAGE = 4096


@pytest.fixture
def blobs(tmp_path: Path) -> Iterator[tuple[Path, sqlite3.Connection]]:
    """A WAL database with a table of blobs, and a write connection whose own checkpoint waits for
    BACKSTOP_PAGES, as the ledger writer's does."""
    path = tmp_path / "blobs.db"
    conn = _connect(path, BACKSTOP_PAGES)
    conn.execute("CREATE TABLE blobs (body BLOB)")
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    yield path, conn
    conn.close()


def insert(conn: sqlite3.Connection, size: int) -> None:
    conn.execute("BEGIN IMMEDIATE")
    conn.execute("INSERT INTO blobs VALUES (randomblob(?))", (size,))
    conn.execute("COMMIT")


def test_the_thread_copies_committed_pages_into_the_database_file_without_a_commit_doing_it(
    blobs: tuple[Path, sqlite3.Connection],
) -> None:
    path, conn = blobs
    empty = path.stat().st_size
    for _ in range(50):
        insert(conn, 3 * PAGE)
    assert path.stat().st_size == empty, "below the backstop no commit checkpoints"
    checkpoints = WalCheckpointer(path)
    checkpoints.start()
    try:
        checkpoints.wrote()
        assert eventually(lambda: path.stat().st_size >= empty + 150 * PAGE, 10.0), path.stat().st_size
    finally:
        checkpoints.close()


def test_the_wal_goes_back_to_its_start_while_the_thread_copies_beside_a_busy_writer(tmp_path: Path) -> None:
    """The thread holds no read transaction between checkpoints, so the writer's backstop checkpoint can
    copy the rest and the next commit starts the WAL again: it never grows past the backstop."""
    path = tmp_path / "busy.db"
    backstop = 64
    conn = _connect(path, backstop)
    conn.execute("CREATE TABLE blobs (body BLOB)")
    checkpoints = WalCheckpointer(path)
    checkpoints.start()
    try:
        for _ in range(2000):
            insert(conn, PAGE // 2)
            checkpoints.wrote()
        wal = Path(f"{path}-wal").stat().st_size  # its largest: SQLite writes over it from the start
    finally:
        checkpoints.close()
        conn.close()
    assert wal <= 32 + (backstop + 16) * (PAGE + 24), wal


def test_closing_stops_the_thread(blobs: tuple[Path, sqlite3.Connection]) -> None:
    path, _ = blobs
    checkpoints = WalCheckpointer(path)
    checkpoints.start()
    thread = checkpoints._thread
    assert thread is not None and thread.is_alive()
    checkpoints.close()
    assert not thread.is_alive()


def test_a_ledger_writers_commits_leave_the_checkpoints_to_its_thread_and_its_memory_stays_trusted(
    sqlite_store: SqliteLedgerStore, sqlite_database: Path
) -> None:
    """A checkpoint by another connection is no commit: PRAGMA data_version stays, so the writer keeps
    trusting what it remembers (a fire after the thread's checkpoint reads no state)."""
    ledger, path = sqlite_store, sqlite_database
    writer = ledger._writer
    assert writer is not None
    assert writer.execute("PRAGMA wal_autocheckpoint").fetchone()[0] == BACKSTOP_PAGES
    records = [record() for _ in range(2000)]
    before = path.stat().st_size
    assert [v.outcome for v in ledger.apply_blocking([Issue(r) for r in records])] == ["issued"] * 2000
    assert eventually(lambda: path.stat().st_size > before, 10.0), "the thread copied the new rows"
    seen: list[str] = []
    writer.set_trace_callback(seen.append)
    fire = Fire(records[0].id, "impression", "wrapper", PLAY)
    assert [v.outcome for v in ledger.apply_blocking([fire])] == ["counted"]
    writer.set_trace_callback(None)
    reads = [s for s in seen if s.startswith("SELECT")]
    assert not reads, reads
