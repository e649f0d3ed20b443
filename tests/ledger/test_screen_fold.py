"""The SQLite writer gathers the screens' news over batches and writes it at most every `every` seconds,
with each batch's own times and counts (screen_fold.py)."""

from __future__ import annotations

import asyncio
import socket
import sqlite3
import threading
import time
from pathlib import Path

import pytest
import sqlalchemy as sa

from adslot.ledger.records import Fire, Issue, NoFill, Settle
from adslot.ledger.screen_fold import ScreenFold, ScreenNews
from adslot.ledger.sqlite_store import SqliteLedgerStore
from adslot.ledger.wire import Stamp, decode_verdicts, encode_batch, framed, read_frame_from
from adslot.ledger.writer_loop import WriterLoop
from adslot.storage.tables import screen_plays, screen_status
from tests.ledger.stores import PLAY, record

HOUR = 3600


def _status(path: Path) -> dict[tuple[str, str], tuple[object, ...]]:
    engine = sa.create_engine(f"sqlite:///{path}")
    with engine.connect() as conn:
        rows = {(r.venue_id, r.screen_id): tuple(r)[2:] for r in conn.execute(sa.select(screen_status))}
        rows |= {
            ("plays", f"{r.venue_id}/{r.screen_id}/{r.hour}"): (r.plays,)
            for r in conn.execute(sa.select(screen_plays))
        }
    engine.dispose()
    return rows


def test_kept_news_folds_into_one_row_per_screen_as_the_upsert_would() -> None:
    fold = ScreenFold(every=10)
    assert not fold and fold.due(0.0)
    fold.committed(ScreenNews([("v", "s1", 100, 100, 100, None, 100, 1, 0)], [], written=True), 0.0)
    assert not fold.due(9.9) and fold.due(10.0)
    fold.committed(ScreenNews([("v", "s1", 105, 105, None, None, 105, 0, 0)], []), 5.0)
    fold.committed(ScreenNews([("v", "s1", 107, None, None, 90, 107, 0, 2)], [("v", "s1", 0, 2)]), 7.0)
    assert fold
    status, plays = fold.rows(ScreenNews([("v", "s2", 108, 108, 108, None, 108, 3, 0)], [("v", "s1", 0, 1)]))
    # The earliest first sighting and window start, the latest of each time (a None never wins), the
    # counts added; the batch being written is folded in without changing what is kept until it commits.
    assert status == [
        ("v", "s1", 105, 105, None, 90, 105, 0, 2),
        ("v", "s2", 108, 108, 108, None, 108, 3, 0),
    ]
    assert plays == [("v", "s1", 0, 3)]
    assert fold.rows(ScreenNews([], []))[1] == [("v", "s1", 0, 2)]


def test_a_batch_inside_the_interval_is_written_by_the_next_due_batch_with_its_own_time(
    sqlite_database: Path,
) -> None:
    fold = ScreenFold(every=3600)
    store = SqliteLedgerStore(sqlite_database, screen_fold=fold)

    async def scenario() -> None:
        await store.start()
        first, second = record(screen_id="s1"), record(screen_id="s2")
        store.apply_blocking([Issue(first)])
        written = _status(sqlite_database)
        assert set(written) == {("lobby", "s1")}
        store.apply_blocking([Issue(second), NoFill("lobby", "s3", PLAY)])
        store.apply_blocking([Fire(first.id, "impression", "wrapper", PLAY + 5)])
        assert _status(sqlite_database) == written, "nothing more is written inside the interval"
        fold.every = 0
        # The expiry sweep's Settle carries no news of its own and still writes what is kept.
        store.apply_blocking([Settle(PLAY - 10 * HOUR)])
        now = _status(sqlite_database)
        assert now["lobby", "s1"][3:] == (PLAY + 5, *now["lobby", "s1"][4:5], 1, 1)
        assert now["lobby", "s2"][5:] == (1, 0) and now["lobby", "s3"][5:] == (0, 0)
        assert now["plays", f"lobby/s1/{PLAY + 5 - (PLAY + 5) % HOUR}"] == (1,)
        await store.close()

    asyncio.run(scenario())


def test_a_clean_close_writes_what_is_kept(sqlite_database: Path) -> None:
    store = SqliteLedgerStore(sqlite_database, screen_fold=ScreenFold(every=3600))

    async def scenario() -> None:
        await store.start()
        made = record(screen_id="s1")
        store.apply_blocking([Issue(made)])
        store.apply_blocking([Fire(made.id, "impression", "wrapper", PLAY)])
        await store.close()

    asyncio.run(scenario())
    assert _status(sqlite_database)["lobby", "s1"][-2:] == (1, 1)


def test_a_batch_that_rolls_back_leaves_no_news_behind(sqlite_database: Path) -> None:
    fold = ScreenFold(every=3600)
    store = SqliteLedgerStore(sqlite_database, screen_fold=fold)

    async def scenario() -> None:
        await store.start()
        store.apply_blocking([Issue(record(screen_id="s1"))])
        blocker = sqlite3.connect(sqlite_database, timeout=0, isolation_level=None)
        writer = store._writer
        assert writer is not None
        writer.execute("PRAGMA busy_timeout = 0")
        blocker.execute("BEGIN IMMEDIATE")
        with pytest.raises(sqlite3.OperationalError):
            store.apply_blocking([Issue(record(screen_id="s9"))])
        blocker.execute("ROLLBACK")
        blocker.close()
        assert not fold
        await store.close()

    asyncio.run(scenario())
    assert set(_status(sqlite_database)) == {("lobby", "s1")}


def test_an_idle_writer_loop_writes_the_kept_news_an_interval_later_with_no_batch_to_carry_it(
    sqlite_database: Path,
) -> None:
    every = 2.0
    store = SqliteLedgerStore(sqlite_database, screen_fold=ScreenFold(every=every))
    first, second = record(screen_id="s1"), record(screen_id="s2")

    async def scenario() -> None:
        await store.start()
        ours, theirs = socket.socketpair()
        loop = WriterLoop(store, b"db")
        loop.attach(theirs)
        running = threading.Thread(target=loop.run)
        running.start()
        with ours, ours.makefile("rb") as answers:
            for seq, made in enumerate((first, second), start=1):
                ours.sendall(framed(encode_batch(Stamp(b"w" * 16, seq, PLAY, False), [Issue(made)])))
                assert [v.outcome for v in decode_verdicts(read_frame_from(answers) or b"")] == ["issued"]
            sent = time.monotonic()
            assert set(_status(sqlite_database)) == {("lobby", "s1")}, "the second is kept, not written"
            while ("lobby", "s2") not in _status(sqlite_database):
                assert time.monotonic() - sent < every + 5, "the idle loop never wrote it"
                time.sleep(0.02)
            ours.shutdown(socket.SHUT_WR)
            running.join(timeout=10)
        await store.close()

    asyncio.run(scenario())
