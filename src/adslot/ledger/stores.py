"""Which ledger store a database URL gets; shared by the server and its writer processes."""

from __future__ import annotations

from adslot.ledger.postgres_store import PostgresLedgerStore
from adslot.ledger.sqlite_store import SqliteLedgerStore
from adslot.ledger.store import DatabaseLedgerStore
from adslot.storage.database import asyncpg_dsn, is_sqlite, sqlite_path


def store_for(database_url: str, schema: str | None, *, writes: bool = True) -> DatabaseLedgerStore:
    """`writes=False`: the store only reads (SQLite then opens no write connection; a PostgreSQL pool
    serves both)."""
    if is_sqlite(database_url):
        return SqliteLedgerStore(sqlite_path(database_url), writes=writes)
    return PostgresLedgerStore(asyncpg_dsn(database_url), schema)
