"""The ledger on SQLite: point reads on the event loop, batched writes in one writer thread.

Reads are primary-key lookups that take microseconds, cheaper than a thread hop. Writes run on a single
thread that owns the write connection; WAL with synchronous=FULL makes each commit durable before the
batch's requests are answered.
"""

from __future__ import annotations

import asyncio
import sqlite3
import uuid
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from adslot.ledger.records import COLUMNS, AdRequest, Fire, Issue, Operation, Outcome
from adslot.ledger.store import LedgerSql, issue_values

SQL = LedgerSql(lambda _: "?")


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
        row = self._reader.execute(SQL.select, (ad_request_id.hex,)).fetchone()
        return _row_to_record(row) if row else None

    async def apply(self, operations: Sequence[Operation]) -> list[Outcome]:
        return await asyncio.get_running_loop().run_in_executor(self._executor, self._apply_sync, operations)

    def _apply_sync(self, operations: Sequence[Operation]) -> list[Outcome]:
        conn = self._writer
        assert conn is not None, "store not started"
        outcomes: list[Outcome] = []
        conn.execute("BEGIN IMMEDIATE")
        try:
            for op in operations:
                outcomes.append(self._apply_one(conn, op))
            conn.execute("COMMIT")
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        return outcomes

    @staticmethod
    def _apply_one(conn: sqlite3.Connection, op: Operation) -> Outcome:
        if isinstance(op, Issue):
            values = list(issue_values(op.record))
            values[0] = op.record.id.hex
            conn.execute(SQL.insert, values)
            return "issued"
        assert isinstance(op, Fire)
        key = op.ad_request_id.hex
        outcome: Outcome
        if op.late:
            conn.execute(SQL.late, (key,))
            outcome = "late"
        elif conn.execute(SQL.first_fire, (key, op.event, op.layer, op.at)).rowcount == 0:
            conn.execute(SQL.duplicate, (key,))
            outcome = "duplicate"
        else:
            outcome = "counted" if conn.execute(SQL.count(op), (op.at, key)).rowcount == 1 else "echo"
        return outcome
