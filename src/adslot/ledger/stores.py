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


def writer_for(env: EnvironmentSettings, choice: str) -> str:
    """Where `env`'s ledger batches are applied: "process" or "worker", with ADSLOT_LEDGER_WRITER's "auto"
    resolved by its database, whatever the number of workers (under adslot serve --workers N a writer
    process, where there is one, serves them all).

    SQLite's writer does the commit's work itself (the B-tree pages, the WAL, the fsync), so in a process of
    its own it runs beside the worker instead of holding the worker's GIL, and under several workers one
    shared writer takes one batch of each into one transaction instead of their taking turns for SQLite's
    one write lock. PostgreSQL's does that work in the database server, and asyncpg's I/O is the worker's
    event loop's own, so beside one worker the hop to a writer process (a frame out and back, a second
    event loop) costs more than it spares: PostgreSQL's impressions went from 0.61 to 0.80 of the bare app
    in the worker, tracking from 0.61 to 0.70. Under several workers each writes to PostgreSQL itself too
    (row locks order them, as they order several adslot nodes): a pixel reaching another worker than the
    one that issued its ad request costs one unlocked read before its one checked statement
    (postgres_store.recall()). Measured on 2 CPUs with 256 connections, 2 workers over 1, two runs each:
    impression 1.04 and 1.05, mix 1.27 and 1.07 writing in the workers, against 0.93 and 1.05, 0.96 and
    1.04 through one shared writer process (bench/README.md, 2026-12-02)."""
    if choice != "auto":
        return choice
    return "process" if is_sqlite(env.database_url) else "worker"
