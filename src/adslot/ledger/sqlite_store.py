"""The ledger on SQLite: point reads on the event loop, batched writes in one writer thread.

Reads are primary-key lookups that take microseconds, cheaper than a thread hop. Writes run on a single
thread that owns the write connection; BEGIN IMMEDIATE takes SQLite's write lock (so the batch's reads and
writes are atomic against other worker processes), and WAL with synchronous=FULL makes each commit durable
before the batch's requests are answered.
"""

from __future__ import annotations

import asyncio
import sqlite3
import uuid
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from adslot.ledger.records import COLUMNS, ISSUE_COLUMNS, AdRequest, Fire, Issue, Operation, Verdict
from adslot.ledger.resolve import Current, FireKey, candidates, first_fire_times, resolve
from adslot.ledger.store import (
    COALESCE_SET,
    COUNTER_SET,
    INSERT_COLUMNS,
    SELECT_ONE,
    STATE_COLUMNS,
    TIME_COLUMNS,
    change_values,
    current_of,
    issue_values,
)

SELECT = SELECT_ONE + "?"
INSERT = f"INSERT INTO ad_requests ({INSERT_COLUMNS}) VALUES ({', '.join('?' * len(ISSUE_COLUMNS))})"
FIRST_FIRES = (
    "INSERT INTO pop_fires (ad_request_id, event, layer, at) VALUES {values} "
    "ON CONFLICT DO NOTHING RETURNING ad_request_id, event, layer"
)
UPDATE = (
    "UPDATE ad_requests SET "
    + COALESCE_SET.format(**{c: "?" for c in TIME_COLUMNS})
    + ", "
    + COUNTER_SET.format(dups="?", late="?")
    + " WHERE id = ?"
)
STATE_CHUNK = 500


def _connect(path: Path) -> sqlite3.Connection:
    conn = sqlite3.connect(path, timeout=30, isolation_level=None, check_same_thread=False)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA synchronous=FULL")
    conn.execute("PRAGMA busy_timeout=30000")
    return conn


def _row_to_record(row: tuple[object, ...]) -> AdRequest:
    values = dict(zip(COLUMNS, row, strict=True))
    values["id"] = uuid.UUID(hex=str(values["id"]))
    return AdRequest(**values)  # type: ignore[arg-type]


def _current(conn: sqlite3.Connection, ids: list[uuid.UUID]) -> dict[uuid.UUID, Current]:
    found: dict[uuid.UUID, Current] = {}
    for i in range(0, len(ids), STATE_CHUNK):
        chunk = ids[i : i + STATE_CHUNK]
        query = (
            f"SELECT {', '.join(STATE_COLUMNS)} FROM ad_requests WHERE id IN ({', '.join('?' * len(chunk))})"
        )
        for row in conn.execute(query, [u.hex for u in chunk]):
            found[uuid.UUID(hex=row[0])] = current_of(row[1:])
    return found


def _apply_fires(conn: sqlite3.Connection, fires: list[Fire]) -> list[Verdict]:
    current = _current(conn, list({f.ad_request_id for f in fires}))
    keys = candidates(fires, current)
    fresh: set[FireKey] = set()
    times = first_fire_times(fires, keys)
    for i in range(0, len(keys), STATE_CHUNK):
        chunk = keys[i : i + STATE_CHUNK]
        params = [
            v
            for key, at in zip(chunk, times[i : i + STATE_CHUNK], strict=True)
            for v in (key[0].hex, *key[1:], at)
        ]
        rows = conn.execute(FIRST_FIRES.format(values=", ".join(["(?, ?, ?, ?)"] * len(chunk))), params)
        fresh.update((uuid.UUID(hex=r[0]), r[1], r[2]) for r in rows)
    verdicts, changes = resolve(fires, current, fresh)
    conn.executemany(UPDATE, [(*change_values(c), ident.hex) for ident, c in changes.items()])
    return verdicts


class SqliteLedgerStore:
    def __init__(self, path: Path) -> None:
        self._path = path
        self._reader: sqlite3.Connection | None = None
        self._writer: sqlite3.Connection | None = None
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="adslot-sqlite-writer")

    async def start(self) -> None:
        self._reader = _connect(self._path)
        self._writer = await asyncio.get_running_loop().run_in_executor(self._executor, _connect, self._path)

    async def close(self) -> None:
        if self._writer is not None:
            await asyncio.get_running_loop().run_in_executor(self._executor, self._writer.close)
        self._executor.shutdown(wait=True)
        if self._reader is not None:
            self._reader.close()
        self._reader = self._writer = None

    async def get(self, ad_request_id: uuid.UUID) -> AdRequest | None:
        assert self._reader is not None, "store not started"
        row = self._reader.execute(SELECT, (ad_request_id.hex,)).fetchone()
        return _row_to_record(row) if row else None

    async def apply(self, operations: Sequence[Operation]) -> list[Verdict]:
        return await asyncio.get_running_loop().run_in_executor(self._executor, self._apply_sync, operations)

    def _apply_sync(self, operations: Sequence[Operation]) -> list[Verdict]:
        conn = self._writer
        assert conn is not None, "store not started"
        issues = [op.record for op in operations if isinstance(op, Issue)]
        fires = [op for op in operations if isinstance(op, Fire)]
        conn.execute("BEGIN IMMEDIATE")
        try:
            if issues:
                conn.executemany(INSERT, [(r.id.hex, *issue_values(r)[1:]) for r in issues])
            fire_verdicts = iter(_apply_fires(conn, fires) if fires else [])
            conn.execute("COMMIT")
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        return [
            Verdict("issued", op.record.expires_at) if isinstance(op, Issue) else next(fire_verdicts)
            for op in operations
        ]
