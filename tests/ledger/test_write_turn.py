"""SQLite writers take turns through a kernel lock, so the next one starts the moment a write ends."""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path

import pytest

from adslot.environment import prepare_database
from adslot.ledger.records import Issue
from adslot.ledger.sqlite_store import SqliteLedgerStore
from adslot.storage.database import sqlite_path
from adslot.storage.write_turn import WriteTurn
from tests.conftest import free_port, make_settings
from tests.ledger.stores import record
from tests.storage.turns import assert_waits_for_the_turn


def _database(tmp_path: Path) -> Path:
    settings, _ = make_settings(tmp_path, "sqlite", free_port())
    env = settings.environment("production")
    prepare_database(env)
    return sqlite_path(env.database_url)


def test_a_writer_waits_for_another_writers_turn_and_goes_as_soon_as_it_ends(tmp_path: Path) -> None:
    """Another worker's writer holds the turn: this store's batch waits for it, not for SQLite's busy
    handler (SQLite's own lock is free throughout), and commits right after the turn is released."""
    path = _database(tmp_path)
    other = WriteTurn(path)
    store = SqliteLedgerStore(path)
    asyncio.run(store.start())
    try:
        issue = Issue(record())
        assert_waits_for_the_turn(other, lambda: store.apply_blocking([issue]), "the batch")
        assert asyncio.run(store.get(issue.record.id)) is not None
    finally:
        other.close()
        asyncio.run(store.close())


def test_the_turn_is_a_file_beside_the_database_and_every_store_shares_it(tmp_path: Path) -> None:
    path = _database(tmp_path)
    first, second = WriteTurn(path), WriteTurn(path)
    try:
        assert first.path == second.path == path.with_name(path.name + ".write-turn")
        assert first.path.exists()
    finally:
        first.close()
        second.close()


def test_a_read_only_store_reads_but_opens_no_write_connection_thread_or_turn(tmp_path: Path) -> None:
    """A worker's read side when its writer process writes: nothing of the write path is opened."""
    path = _database(tmp_path)
    writer = SqliteLedgerStore(path)
    reads = SqliteLedgerStore(path, writes=False)
    asyncio.run(writer.start())
    before = threading.active_count()
    asyncio.run(reads.start())
    try:
        issue = Issue(record())
        writer.apply_blocking([issue])
        assert asyncio.run(reads.get(issue.record.id)) is not None
        assert threading.active_count() == before, "a read-only store started a writer thread"
        with pytest.raises(RuntimeError, match="only reads"):
            reads.apply_blocking([Issue(record())])
        assert reads._writer is None and reads._turn is None
    finally:
        asyncio.run(reads.close())
        asyncio.run(writer.close())
