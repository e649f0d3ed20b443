"""Which ledger runs for a database: one table, read once per environment at start-up and logged.

| database   | where a batch is applied                        | why                                         |
|------------|-------------------------------------------------|---------------------------------------------|
| SQLite     | one ledger writer process per environment that  | the writer does the commit's work itself    |
|            | every worker dials (writer_process.py)          | (pages, WAL, fsync): beside the workers it  |
|            |                                                 | holds none of their GILs, and it takes a    |
|            |                                                 | batch of each worker into one commit rather |
|            |                                                 | than their taking turns for the write lock  |
| PostgreSQL | in each worker, on its event loop               | the server does the commit's work and       |
|            | (postgres_store.py)                             | asyncpg's I/O is the worker's own: a hop to |
|            |                                                 | a process costs more than it spares; row    |
|            |                                                 | locks order workers as they order nodes     |

`adslot serve` starts SQLite's writer processes before its workers (shared_writer.py) and tells them where
they listen; an app started by another server (the tests, an embedding) starts its own.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from adslot.ledger.ivt import IvtConfig, Judge
from adslot.ledger.postgres_store import PostgresLedgerStore
from adslot.ledger.process_store import ProcessLedgerStore
from adslot.ledger.shared_writer import socket_path
from adslot.ledger.sqlite_store import SqliteLedgerStore
from adslot.ledger.store import DatabaseLedgerStore, LedgerStore
from adslot.settings import EnvironmentSettings
from adslot.storage.database import asyncpg_dsn, is_sqlite, sqlite_path

log = logging.getLogger("adslot.ledger")


@dataclass(frozen=True)
class Backend:
    database: str
    writer_process: bool
    """True: batches go to the environment's ledger writer process; False: the worker applies them."""

    def describe(self) -> str:
        where = "one ledger writer process" if self.writer_process else "each worker"
        return f"{self.database}, batches applied by {where}"


SQLITE = Backend("SQLite", writer_process=True)
POSTGRESQL = Backend("PostgreSQL", writer_process=False)


def backend_of(database_url: str) -> Backend:
    return SQLITE if is_sqlite(database_url) else POSTGRESQL


def database_store(
    database_url: str, schema: str | None, *, writes: bool = True, ivt: IvtConfig | None = None
) -> DatabaseLedgerStore:
    """The store that applies batches on the database itself: SQLite's in its writer process, PostgreSQL's
    in the worker. `writes=False`: it only reads (SQLite then opens no write connection). `ivt`: the
    invalid-traffic rules fires are judged by (None: none)."""
    judge = None if ivt is None else Judge(ivt)
    if is_sqlite(database_url):
        return SqliteLedgerStore(sqlite_path(database_url), writes=writes, judge=judge)
    return PostgresLedgerStore(asyncpg_dsn(database_url), schema, judge=judge)


def ledger_for(
    env: EnvironmentSettings, socket_dir: Path | None = None, ivt: IvtConfig | None = None
) -> LedgerStore:
    """`env`'s ledger as its backend runs it. `socket_dir`: where `adslot serve` runs the writer processes
    (none: an SQLite ledger starts a writer process of its own); `ivt`: the invalid-traffic rules (the
    writer process of `adslot serve` takes them from its own start)."""
    backend = backend_of(env.database_url)
    log.info("%s ledger: %s", env.name, backend.describe())
    if not backend.writer_process:
        return database_store(env.database_url, env.database_schema, ivt=ivt)
    reads = database_store(env.database_url, env.database_schema, writes=False)
    socket = None if socket_dir is None else socket_path(socket_dir, env.name)
    return ProcessLedgerStore(reads, env.database_url, env.database_schema, socket, ivt)


def with_writer_processes(environments: Sequence[EnvironmentSettings]) -> list[EnvironmentSettings]:
    """The environments whose batches go to a ledger writer process: those `adslot serve` starts one for."""
    return [env for env in environments if backend_of(env.database_url).writer_process]
