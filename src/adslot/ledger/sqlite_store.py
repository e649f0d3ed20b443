"""The ledger on SQLite: point reads on the event loop, batched writes in one writer thread.

Reads are primary-key lookups that take microseconds, cheaper than a thread hop; the environment hands
concurrent ones to get_many together, one statement and so one read transaction. Writes run on a single
thread that owns the write connection; BEGIN IMMEDIATE takes SQLite's write lock (so the batch's reads and
writes are atomic against other worker processes), and WAL with synchronous=FULL makes each commit durable
before the batch's requests are answered. Another thread copies the WAL into the database file
(wal_checkpoints.py), so that a commit does not wait for that copy.
"""

from __future__ import annotations

import asyncio
import logging
import sqlite3
import time
import uuid
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import fields
from pathlib import Path

from adslot.ids import uuid_from_int
from adslot.ledger.claims import closes_at
from adslot.ledger.ivt import Judge
from adslot.ledger.records import (
    ANSWER_SLOTS,
    COLUMNS,
    ISSUE_COLUMNS,
    WIN_COLUMNS,
    AdRequest,
    AlreadyAnswered,
    Operation,
    Receipt,
    Verdict,
)
from adslot.ledger.remembered import Remembered, issued
from adslot.ledger.screen_fold import ScreenFold, ScreenNews
from adslot.ledger.screens_of import ScreensOf
from adslot.ledger.store import (
    ANSWER,
    ANSWER_COLUMNS,
    BILL_DUE,
    COUNTER_COLUMNS,
    COUNTER_SET,
    DUE_WHERE,
    FIRED_SET,
    INSERT_COLUMNS,
    INSERT_WIN_COLUMNS,
    INVALID_COLUMNS,
    KEY_STATS_UPSERT_SET,
    PRUNE_ANSWERS,
    PRUNE_WHERE,
    SAVE_ANSWER_SET,
    SCREEN_PLAYS_UPSERT,
    SCREEN_STATUS_COLUMNS,
    SCREEN_STATUS_UPSERT_SET,
    SELECT_ONE,
    SET_ONCE_COLUMNS,
    STATE_COLUMNS,
    STATS_UPSERT_SET,
    TIME_COLUMNS,
    Batch,
    answer_of,
    answer_rows,
    change_values,
    coalesce_set,
    current_of,
    issue_values,
    set_items,
)
from adslot.ledger.wal_checkpoints import BACKSTOP_PAGES, WalCheckpointer
from adslot.storage.failures import OutageLog
from adslot.storage.write_turn import WriteTurn

log = logging.getLogger(__name__)

SELECT = SELECT_ONE + "?"
SELECT_IN = SELECT_ONE.replace("id = ", "id IN ({marks})")
DATA_VERSION = "PRAGMA data_version"
"""Changes when another connection commits: read under the write lock, it says whether what this writer
remembers (remembered.py) still holds."""
INSERT_WINS = f"INSERT INTO demand_wins ({INSERT_WIN_COLUMNS}) VALUES ({', '.join('?' * len(WIN_COLUMNS))})"
BILL_DUE_NOW = BILL_DUE.format(at="?", id="?")
INSERT = f"INSERT INTO ad_requests ({INSERT_COLUMNS}) VALUES ({', '.join('?' * len(ISSUE_COLUMNS))})"
UPDATE = (
    "UPDATE ad_requests SET "
    + coalesce_set(SET_ONCE_COLUMNS, "?")
    + ", "
    + COUNTER_SET.format(dups="?", late="?")
    + ", "
    + FIRED_SET.format(fired="?")
    + " WHERE id = ?"
)
UPDATE_FIRES = (
    "UPDATE ad_requests SET "
    + coalesce_set(TIME_COLUMNS, "?")
    + ", "
    + COUNTER_SET.format(dups="?", late="?")
    + ", "
    + FIRED_SET.format(fired="?")
    + " WHERE id = ?"
)
"""The same UPDATE without the settlement columns, for the rows only fires changed (most of them)."""
_UPDATES: dict[tuple[str, ...], str] = {}


def _update_times(columns: tuple[str, ...]) -> str:
    """UPDATE_FIRES narrowed to the event columns a group of rows sets and the fired bits, for rows with no
    repeat or late fire (nearly every first fire): one column's COALESCE instead of six and the two counters
    (~2 µs less per row, measured). The few combinations a batch can have are built once each."""
    sql = _UPDATES.get(columns)
    if sql is None:
        chosen = set_items(coalesce_set(columns, "?"), FIRED_SET.format(fired="?"))
        sql = _UPDATES[columns] = f"UPDATE ad_requests SET {chosen} WHERE id = ?"
    return sql


UPDATE_COUNTERS = "UPDATE ad_requests SET " + COUNTER_SET.format(dups="?", late="?") + " WHERE id = ?"
"""Only the two counters, for the rows only repeated or late fires changed (every retry of a player): no
fired bit to add."""
STATE = f"SELECT {', '.join(STATE_COLUMNS)} FROM ad_requests WHERE id IN ({{marks}})"
DUE = f"SELECT {', '.join(STATE_COLUMNS)} FROM ad_requests WHERE " + DUE_WHERE.format(before="?", limit="?")
COUNTERS = f"SELECT {', '.join(COUNTER_COLUMNS)} FROM delivery_counters WHERE key IN ({{marks}})"
WRITE_COUNTERS = (
    f"INSERT INTO delivery_counters ({', '.join(COUNTER_COLUMNS)}, closes_at) VALUES (?, ?, ?, ?, ?, ?) "
    "ON CONFLICT (key) DO UPDATE SET cap = excluded.cap, reserved = excluded.reserved, "
    "delivered = excluded.delivered, last_at = excluded.last_at"
)
PRUNE = "DELETE FROM delivery_counters WHERE key IN (SELECT key FROM delivery_counters WHERE {where})".format(
    where=PRUNE_WHERE.format(before="?", limit="?")
)
STATS = (
    "INSERT INTO request_stats (venue_id, screen_id, hour, requests, fills) VALUES {values} "
    "ON CONFLICT (venue_id, screen_id, hour) DO UPDATE SET " + STATS_UPSERT_SET
)
"""One multi-row upsert per chunk: about twice as fast as executemany for the hundreds of screens a batch
names, and this runs in every batch that issues."""
KEY_STATS = (
    "INSERT INTO key_stats (key_id, hour, requests, fills) VALUES {values} "
    "ON CONFLICT (hour, key_id) DO UPDATE SET " + KEY_STATS_UPSERT_SET
)
"""STATS per API key: a batch names a few keys, so this is one statement."""
INSERT_INVALID = (
    f"INSERT INTO invalid_fires ({INVALID_COLUMNS}) VALUES (?, ?, ?, ?, ?) ON CONFLICT DO NOTHING"
)
SAVE_ANSWER = f"INSERT INTO ledger_answers ({ANSWER_COLUMNS}) VALUES (?, ?, ?, ?, ?) {SAVE_ANSWER_SET}"
READ_ANSWER = ANSWER.format(client="?", slot="?")
PRUNE_OLD_ANSWERS = PRUNE_ANSWERS.format(before="?")
CHUNK = 500
"""Rows per IN list or multi-row VALUES: well under SQLite's bound-parameter limit."""
CACHE_KIB = 64 * 1024
"""Page cache per connection (allocated only as pages are read)."""
MMAP_BYTES = 1 << 30
"""How much of the database file reads map instead of copying (address space, not memory)."""


def _connect(path: Path, checkpoint_pages: int | None = None) -> sqlite3.Connection:
    """`checkpoint_pages`: the write connection's wal_autocheckpoint (wal_checkpoints.py)."""
    conn = sqlite3.connect(path, timeout=30, isolation_level=None, check_same_thread=False)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA synchronous=FULL")
    conn.execute("PRAGMA busy_timeout=30000")
    # The hot lookups walk the ad_requests primary-key index. SQLite's default 2 MiB page cache holds
    # only its top levels once there are millions of rows, and every miss is a read() system call;
    # mapping the file and a larger cache keep the cost per lookup flat as the ledger grows.
    conn.execute(f"PRAGMA cache_size=-{CACHE_KIB}")
    conn.execute(f"PRAGMA mmap_size={MMAP_BYTES}")
    if checkpoint_pages is not None:
        conn.execute(f"PRAGMA wal_autocheckpoint={checkpoint_pages}")
    return conn


assert tuple(f.name for f in fields(AdRequest)) == COLUMNS, "_row_to_record passes the columns by position"


def _row_to_record(ident: uuid.UUID, row: tuple[object, ...]) -> AdRequest:
    """Positionally, without a dict of names, with the id the row was looked up by: every inline VAST
    fetch reads one."""
    return AdRequest(ident, *row[1:])  # type: ignore[arg-type]


def _read_current(conn: sqlite3.Connection, batch: Batch, memory: Remembered) -> list[uuid.UUID]:
    """The named ad requests' state (what this writer does not remember), and the expired ones to settle
    (added to the state): their ids."""
    remembered, ids = memory.states(batch.named_ids())
    batch.current.update(remembered)
    for i in range(0, len(ids), CHUNK):
        by_hex = {u.hex: u for u in ids[i : i + CHUNK]}
        query = STATE.format(marks=", ".join("?" * len(by_hex)))
        for row in conn.execute(query, list(by_hex)):
            batch.current[by_hex[row[0]]] = current_of(row[1:])
    due = batch.due()
    if due is None:
        return []
    found = []
    for row in conn.execute(DUE, due):
        ident = uuid_from_int(int(row[0], 16))
        found.append(ident)
        batch.current.setdefault(ident, current_of(row[1:]))
    return found


LOCATE = "SELECT id, venue_id, screen_id FROM ad_requests WHERE id IN ({marks})"
WRITE_SCREENS = (
    f"INSERT INTO screen_status ({SCREEN_STATUS_COLUMNS}) VALUES {{values}} "
    f"ON CONFLICT (venue_id, screen_id) DO UPDATE SET {SCREEN_STATUS_UPSERT_SET}"
)
WRITE_PLAYS = (
    "INSERT INTO screen_plays (venue_id, screen_id, hour, plays) VALUES {values} " + SCREEN_PLAYS_UPSERT
)


def _screen_news(conn: sqlite3.Connection, batch: Batch, screens_of: ScreensOf, now: int) -> ScreenNews:
    """The batch's rows for screen_status and screen_plays: the counted plays' screens from what this writer
    issued or read before (screens_of.py), the others read in one IN list, then the rows made again (rare:
    after a restart, or with another writer on the database)."""
    status, plays, unknown = batch.screen_rows(now, screens_of.by_id)
    if unknown:
        for i in range(0, len(unknown), CHUNK):
            by_hex = {u.hex: u for u, _ in unknown[i : i + CHUNK]}
            found = conn.execute(LOCATE.format(marks=", ".join("?" * len(by_hex))), list(by_hex))
            screens_of.learn((by_hex[hexed], venue, screen) for hexed, venue, screen in found)
        status, plays, _ = batch.screen_rows(now, screens_of.by_id)
    return ScreenNews(status, plays)


def _write_screens(conn: sqlite3.Connection, fold: ScreenFold, news: ScreenNews) -> None:
    """What the fold kept and `news`, in one multi-row upsert per table (per CHUNK rows)."""
    status, plays = fold.rows(news)
    for rows, sql, marks in (
        (status, WRITE_SCREENS, "(?, ?, ?, ?, ?, ?, ?, ?, ?)"),
        (plays, WRITE_PLAYS, "(?, ?, ?, ?)"),
    ):
        for i in range(0, len(rows), CHUNK):
            chunk = rows[i : i + CHUNK]
            conn.execute(
                sql.format(values=", ".join([marks] * len(chunk))), [v for row in chunk for v in row]
            )
    news.written = True


def _apply(
    conn: sqlite3.Connection, batch: Batch, memory: Remembered, screens_of: ScreensOf, fold: ScreenFold
) -> ScreenNews:
    """The batch plan's I/O, inside the caller's BEGIN IMMEDIATE (SQLite's one write lock); the batch's news
    of screens, written now with what the fold kept when the fold is due (screen_fold.py)."""
    batch.resolve(_read_current(conn, batch, memory))
    keys = batch.counter_keys()
    for i in range(0, len(keys), CHUNK):
        chunk = keys[i : i + CHUNK]
        batch.load(conn.execute(COUNTERS.format(marks=", ".join("?" * len(chunk))), chunk).fetchall())
    batch.admit()
    writes = batch.counter_writes()
    if writes:
        conn.executemany(WRITE_COUNTERS, [(*write, closes_at(write[0])) for write in writes])
    if batch.admitted:
        conn.executemany(INSERT, [(r.id.hex, *issue_values(r, c)[1:]) for r, c in batch.admitted])
        if batch.wins:
            conn.executemany(INSERT_WINS, [(row[0].hex, *row[1:]) for row in batch.win_rows()])
    changes = batch.row_changes()
    if changes:
        repeated: list[tuple[object, ...]] = []
        narrowed: dict[tuple[str, ...], list[tuple[object, ...]]] = {}
        settled: list[tuple[object, ...]] = []
        mixed: list[tuple[object, ...]] = []
        for ident, change in changes:
            if change.settle_reason is not None:
                settled.append((*change_values(change), ident.hex))
            elif not change.fired:
                repeated.append((change.duplicates, change.late, ident.hex))
            elif change.duplicates or change.late:
                mixed.append((*change_values(change, settlement=False), ident.hex))
            else:
                times = change.set_times
                narrowed.setdefault(tuple(times), []).append((*times.values(), change.fired, ident.hex))
        if repeated:
            conn.executemany(UPDATE_COUNTERS, repeated)
        if mixed:
            conn.executemany(UPDATE_FIRES, mixed)
        for columns, group in narrowed.items():
            conn.executemany(_update_times(columns), group)
        if settled:
            conn.executemany(UPDATE, settled)
        invalid = batch.invalid_rows()
        if invalid:
            conn.executemany(INSERT_INVALID, [(ident.hex, *rest) for ident, *rest in invalid])
        bills = batch.bills_due()
        if bills:
            conn.executemany(BILL_DUE_NOW, [(at, ident.hex) for at, ident in bills])
    stats = batch.stats()
    for i in range(0, len(stats), CHUNK):
        rows = stats[i : i + CHUNK]
        values = ", ".join(["(?, ?, ?, ?, ?)"] * len(rows))
        conn.execute(STATS.format(values=values), [v for row in rows for v in row])
    key_stats = batch.key_stats()
    for i in range(0, len(key_stats), CHUNK):
        keyed = key_stats[i : i + CHUNK]
        values = ", ".join(["(?, ?, ?, ?)"] * len(keyed))
        conn.execute(KEY_STATS.format(values=values), [v for row in keyed for v in row])
    news = ScreenNews([], [])
    if batch.admitted or batch.no_fills or batch.changes:
        news = _screen_news(conn, batch, screens_of, int(time.time()))
    if (news.status or fold) and fold.due(time.monotonic()):
        _write_screens(conn, fold, news)
    prune = batch.prune()
    if prune is not None:
        conn.execute(PRUNE, prune)
        conn.execute(PRUNE_OLD_ANSWERS, (batch.answers_before(),))
    return news


def _save_answers(
    conn: sqlite3.Connection, receipts: Sequence[Receipt], verdicts: Sequence[Verdict]
) -> list[bytes]:
    """Step 6, last in the transaction; a frame answered before writes nothing, and fails the batch."""
    rows = answer_rows(receipts, verdicts)
    if conn.executemany(SAVE_ANSWER, rows).rowcount != len(rows):
        raise AlreadyAnswered("a resent ledger frame was committed before")
    return [row[-1] for row in rows]


class SqliteLedgerStore:
    def __init__(
        self,
        path: Path,
        *,
        writes: bool = True,
        judge: Judge | None = None,
        screen_fold: ScreenFold | None = None,
    ) -> None:
        """`writes=False` is a worker's read side when its writer process writes: it opens no write
        connection, writer thread or write turn. `judge`: the invalid-traffic rules fires are judged by.
        `screen_fold`: how the screens' news is gathered between writes (default: written every
        FOLD_SECONDS)."""
        self._path = path
        self._judge = judge
        self._writes = writes
        self._reader: sqlite3.Connection | None = None
        self._writer: sqlite3.Connection | None = None
        self._turn: WriteTurn | None = None
        self._checkpoints: WalCheckpointer | None = None
        self._memory = Remembered()
        self._screens_of = ScreensOf()
        self._screen_fold = ScreenFold() if screen_fold is None else screen_fold
        self._outages = OutageLog(log)
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="adslot-sqlite-writer")

    async def start(self) -> None:
        self._reader = _connect(self._path)
        if self._writes:
            self._turn = WriteTurn(self._path)
            loop = asyncio.get_running_loop()
            self._writer = await loop.run_in_executor(self._executor, _connect, self._path, BACKSTOP_PAGES)
            self._checkpoints = WalCheckpointer(self._path)
            self._checkpoints.start()

    async def close(self) -> None:
        if self._writer is not None and self._screen_fold:
            await asyncio.get_running_loop().run_in_executor(self._executor, self.write_screens_blocking)
        if self._checkpoints is not None:
            self._checkpoints.close()
            self._checkpoints = None
        if self._writer is not None:
            await asyncio.get_running_loop().run_in_executor(self._executor, self._writer.close)
        self._executor.shutdown(wait=True)
        if self._reader is not None:
            self._reader.close()
        if self._turn is not None:
            self._turn.close()
        self._reader = self._writer = None
        self._turn = None

    async def get(self, ad_request_id: uuid.UUID) -> AdRequest | None:
        assert self._reader is not None, "store not started"
        row = self._reader.execute(SELECT, (ad_request_id.hex,)).fetchone()
        return _row_to_record(ad_request_id, row) if row else None

    async def get_many(self, ids: Sequence[uuid.UUID]) -> list[AdRequest | None]:
        """One statement, so one read transaction (and one WAL-index lock and unlock) for many readers."""
        assert self._reader is not None, "store not started"
        named = {ident.hex: ident for ident in ids}
        found: dict[uuid.UUID, AdRequest] = {}
        keys = list(named)
        for i in range(0, len(keys), CHUNK):
            chunk = keys[i : i + CHUNK]
            rows = self._reader.execute(SELECT_IN.format(marks=", ".join("?" * len(chunk))), chunk)
            for row in rows:
                ident = named[row[0]]
                found[ident] = _row_to_record(ident, row)
        return [found.get(ident) for ident in ids]

    async def apply(self, operations: Sequence[Operation]) -> list[Verdict]:
        return await asyncio.get_running_loop().run_in_executor(
            self._executor, self.apply_blocking, operations
        )

    async def apply_frames(self, operations: Sequence[Operation], receipts: Sequence[Receipt]) -> list[bytes]:
        return await asyncio.get_running_loop().run_in_executor(
            self._executor, self.apply_frames_blocking, operations, receipts
        )

    async def answer(self, client: bytes, seq: int) -> bytes | None:
        return await asyncio.get_running_loop().run_in_executor(
            self._executor, self.answer_blocking, client, seq
        )

    def answer_blocking(self, client: bytes, seq: int) -> bytes | None:
        """answer() without the thread hop, on the write connection (the writer process's one thread)."""
        conn = self._writer
        assert conn is not None, "store not started"
        row = conn.execute(READ_ANSWER, (client, seq % ANSWER_SLOTS)).fetchone()
        return answer_of(row, seq)

    def apply_blocking(self, operations: Sequence[Operation]) -> list[Verdict]:
        """apply() without the thread hop, for a caller with nothing else to do meanwhile (the writer
        process); only while no apply() runs, since both use the one write connection."""
        return self._write(operations, ())[0]

    def apply_frames_blocking(
        self, operations: Sequence[Operation], receipts: Sequence[Receipt]
    ) -> list[bytes]:
        """apply_frames() without the thread hop, as apply_blocking()."""
        return self._write(operations, receipts)[1]

    def _write(
        self, operations: Sequence[Operation], receipts: Sequence[Receipt]
    ) -> tuple[list[Verdict], list[bytes]]:
        conn, turn, checkpoints = self._writer, self._turn, self._checkpoints
        if not self._writes:
            raise RuntimeError("this ledger store only reads: its writer process writes")
        assert conn is not None and turn is not None and checkpoints is not None, "store not started"
        batch = Batch.of(operations, self._judge)
        memory = self._memory
        with turn:
            conn.execute("BEGIN IMMEDIATE")
            try:
                memory.check(conn.execute(DATA_VERSION).fetchone()[0])
                news = _apply(conn, batch, memory, self._screens_of, self._screen_fold)
                verdicts = batch.verdicts()
                answers = _save_answers(conn, receipts, verdicts) if receipts else []
                conn.execute("COMMIT")
            except BaseException:
                memory.forget()
                if conn.in_transaction:  # SQLite rolls back by itself a COMMIT that fails (disk full, I/O)
                    conn.execute("ROLLBACK")
                raise
        checkpoints.wrote()
        self._screen_fold.committed(news, time.monotonic())
        memory.commit(
            batch.current,
            batch.changes,
            [(record.id, issued(record, claims)) for record, claims in batch.admitted],
        )
        if batch.admitted:
            self._screens_of.add(record for record, _ in batch.admitted)
        return verdicts, answers

    def screens_wait(self) -> float | None:
        """Seconds until the screens' news kept since the last write is due (None: nothing kept)."""
        fold = self._screen_fold
        return fold.wait(time.monotonic()) if fold else None

    def write_screens_blocking(self) -> None:
        """Write the screens' news kept since the last write, in a transaction of its own: by an idle
        writer once it is due, and on close. A failure is logged and tried again an interval later."""
        conn, turn = self._writer, self._turn
        assert conn is not None and turn is not None, "store not started"
        fold = self._screen_fold
        if not fold:
            return
        news = ScreenNews([], [])
        try:
            with turn:
                conn.execute("BEGIN IMMEDIATE")
                try:
                    _write_screens(conn, fold, news)
                    conn.execute("COMMIT")
                except BaseException:
                    if conn.in_transaction:
                        conn.execute("ROLLBACK")
                    raise
        except sqlite3.Error as exc:
            self._outages.failed("writing the screens' status", exc)
            fold.postpone(time.monotonic())
            return
        fold.committed(news, time.monotonic())
