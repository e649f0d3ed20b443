"""The SQLite ledger store's writer: what it remembers of its own rows, and that it never trusts it after
another connection wrote."""

from __future__ import annotations

import asyncio
import sqlite3
from pathlib import Path

import pytest

from adslot.ledger.records import Fire, Issue, Release
from adslot.ledger.sqlite_store import SqliteLedgerStore
from tests.ledger.stores import PLAY, record


def outcomes(store: SqliteLedgerStore, *ops: Fire | Issue | Release) -> list[str]:
    return [v.outcome for v in store.apply_blocking(list(ops))]


def test_a_players_repeats_read_no_state_and_write_only_their_counters_yet_are_counted_as_duplicates(
    sqlite_store: SqliteLedgerStore, sqlite_database: Path
) -> None:
    made = record()
    fire = Fire(made.id, "impression", "wrapper", PLAY)
    assert outcomes(sqlite_store, Issue(made)) == ["issued"]
    assert outcomes(sqlite_store, fire) == ["counted"]
    seen: list[str] = []
    writer = sqlite_store._writer
    assert isinstance(writer, sqlite3.Connection)
    writer.set_trace_callback(seen.append)
    assert outcomes(sqlite_store, fire, fire) == ["duplicate", "duplicate"]
    writer.set_trace_callback(None)
    assert not [s for s in seen if s.startswith(("SELECT", "INSERT"))], seen
    (update,) = [s for s in seen if s.startswith("UPDATE")]
    assert update.startswith("UPDATE ad_requests SET duplicate_count") and "fired" not in update, update
    stored = asyncio.run(sqlite_store.get(made.id))
    assert stored is not None and stored.impression_at == PLAY and stored.duplicate_count == 2


def test_a_first_fire_on_a_remembered_ad_request_is_one_update_of_its_row(
    sqlite_store: SqliteLedgerStore,
) -> None:
    """No second table: the fire's bit and the event's time are set by the one UPDATE of the row, and the
    play's screen is kept by the screen fold (written at most every `every` seconds, screen_fold.py)."""
    sqlite_store._screen_fold.every = 3600
    made = record()
    assert outcomes(sqlite_store, Issue(made)) == ["issued"]
    seen: list[str] = []
    writer = sqlite_store._writer
    assert isinstance(writer, sqlite3.Connection)
    writer.set_trace_callback(seen.append)
    assert outcomes(sqlite_store, Fire(made.id, "impression", "wrapper", PLAY)) == ["counted"]
    writer.set_trace_callback(None)
    writes = [s for s in seen if s.startswith(("SELECT", "INSERT", "UPDATE", "DELETE"))]
    # The play's screen is known to the writer that issued its ad request (screens_of.py): nothing is read.
    assert len(writes) == 1 and writes[0].startswith("UPDATE ad_requests SET impression_at"), writes
    assert "fired = ad_requests.fired | 1 " in writes[0], writes[0]


def test_the_other_layers_first_fire_is_an_echo_and_its_repeat_a_duplicate(
    sqlite_store: SqliteLedgerStore,
) -> None:
    made = record()
    assert outcomes(sqlite_store, Issue(made)) == ["issued"]
    assert outcomes(sqlite_store, Fire(made.id, "complete", "wrapper", PLAY)) == ["counted"]
    assert outcomes(sqlite_store, Fire(made.id, "complete", "inline", PLAY)) == ["echo"]
    assert outcomes(sqlite_store, Fire(made.id, "complete", "inline", PLAY)) == ["duplicate"]


def test_after_another_writer_released_an_ad_request_a_fire_on_it_is_not_counted(
    sqlite_store: SqliteLedgerStore, sqlite_database: Path
) -> None:
    """The writer remembers the ad request unplayed and unreleased; another connection then releases it.
    Trusting that memory would count the impression of a released ad request (its reservation already
    given back); the writer must notice the other commit and read the row again."""
    made = record()
    assert outcomes(sqlite_store, Issue(made)) == ["issued"]
    other = SqliteLedgerStore(sqlite_database)
    asyncio.run(other.start())
    try:
        assert outcomes(other, Release(made.id, made.account_id, PLAY - 10)) == ["released"]
    finally:
        asyncio.run(other.close())
    assert outcomes(sqlite_store, Fire(made.id, "impression", "wrapper", PLAY)) == ["released"]


def test_a_batch_that_fails_leaves_no_memory_of_what_it_rolled_back(sqlite_store: SqliteLedgerStore) -> None:
    made = record()
    sqlite_store.apply_blocking([Issue(made)])
    duplicate_id = Issue(made)  # the same primary key again: the INSERT fails and the batch rolls back
    with pytest.raises(sqlite3.IntegrityError):
        sqlite_store.apply_blocking([Fire(made.id, "impression", "wrapper", PLAY), duplicate_id])
    assert outcomes(sqlite_store, Fire(made.id, "impression", "wrapper", PLAY)) == ["counted"]
    stored = asyncio.run(sqlite_store.get(made.id))
    assert stored is not None and stored.impression_at == PLAY and stored.duplicate_count == 0
