"""Which ledger store a database URL gets; shared by the server and its writer processes."""

from __future__ import annotations

from adslot.ledger.postgres_store import PostgresLedgerStore
from adslot.ledger.sqlite_store import SqliteLedgerStore
from adslot.ledger.store import DatabaseLedgerStore
from adslot.settings import EnvironmentSettings
from adslot.storage.database import asyncpg_dsn, is_sqlite, sqlite_path


def store_for(database_url: str, schema: str | None, *, writes: bool = True) -> DatabaseLedgerStore:
    """`writes=False`: the store only reads (SQLite then opens no write connection; a PostgreSQL pool
    serves both)."""
    if is_sqlite(database_url):
        return SqliteLedgerStore(sqlite_path(database_url), writes=writes)
    return PostgresLedgerStore(asyncpg_dsn(database_url), schema)


def writer_for(env: EnvironmentSettings, choice: str, *, shared: bool = False) -> str:
    """Where `env`'s ledger batches are applied: "process" or "worker", with ADSLOT_LEDGER_WRITER's "auto"
    resolved by its database and by `shared`, whether the server runs several workers (adslot serve
    --workers N, whose shared writer then serves them all).

    SQLite's writer does the commit's work itself (the B-tree pages, the WAL, the fsync), so in a process of
    its own it runs beside the worker instead of holding the worker's GIL. PostgreSQL's does that work in
    the database server, and asyncpg's I/O is the worker's event loop's own, so beside one worker the hop to
    a writer process (a frame out and back, a second event loop) costs more than it spares: PostgreSQL's
    impressions went from 0.61 to 0.80 of the bare app in the worker, tracking from 0.61 to 0.70. Beside
    several workers one shared writer keeps one memory of the ad requests for all of them: with a memory per
    worker, a pixel reaching another worker than the one that issued its ad request reads and locks it (2
    workers' mix 17,040 requests a second with the shared writer, 14,271 without; bench/README.md)."""
    if choice != "auto":
        return choice
    return "process" if shared or is_sqlite(env.database_url) else "worker"
