"""Engines and connection facts per environment: one database (or PostgreSQL schema) per environment."""

from __future__ import annotations

import re
import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import psycopg
import sqlalchemy as sa

from adslot.settings import EnvironmentSettings
from adslot.storage.write_turn import WriteTurn

_SCHEMA_NAME = re.compile(r"^[a-z_][a-z0-9_]{0,62}$")


def is_sqlite(url: str) -> bool:
    return url.startswith("sqlite")


def sqlite_path(url: str) -> Path:
    """The file behind a `sqlite:///path` URL."""
    return Path(sa.engine.make_url(url).database or "")


def asyncpg_dsn(url: str) -> str:
    """asyncpg wants a plain `postgresql://` DSN, without SQLAlchemy's `+driver` part."""
    parsed = sa.engine.make_url(url)
    return parsed.set(drivername="postgresql").render_as_string(hide_password=False)


def checked_schema(schema: str | None) -> str | None:
    if schema is not None and not _SCHEMA_NAME.match(schema):
        raise ValueError(f"invalid PostgreSQL schema name {schema!r}")
    return schema


WRITES = "adslot_writes"
"""Execution option of a connection whose transaction will write: on SQLite it begins IMMEDIATE."""
READS = "adslot_reads"
"""Execution option of a connection whose transaction must not write: on SQLite it sets query_only."""


def make_engine(env: EnvironmentSettings) -> sa.Engine:
    """A synchronous engine for migrations and the (low-rate) management API.

    On SQLite the engine, not pysqlite, begins each transaction (SQLAlchemy's recipe for pysqlite): in its
    legacy mode pysqlite begins one only before the first INSERT, UPDATE or DELETE, so a check-then-write
    ran its check outside the write's transaction, and a read of several statements (a catalog load, a
    report) could see a write land between two of them. Now each transaction is one snapshot, and a
    writing one (WRITES, write_transaction) holds the write lock from its first statement.
    """
    url = env.database_url
    if is_sqlite(url):
        path = sqlite_path(url)
        path.parent.mkdir(parents=True, exist_ok=True)
        engine = sa.create_engine(url, connect_args={"timeout": 30})

        @sa.event.listens_for(engine, "connect")
        def _sqlite_pragmas(dbapi_conn: Any, _record: Any) -> None:
            cursor = dbapi_conn.cursor()
            cursor.execute("PRAGMA journal_mode=WAL")
            cursor.execute("PRAGMA synchronous=FULL")
            cursor.execute("PRAGMA foreign_keys=ON")
            cursor.close()
            dbapi_conn.isolation_level = None  # pysqlite begins nothing itself; _sqlite_begin does

        @sa.event.listens_for(engine, "begin")
        def _sqlite_begin(conn: sa.Connection) -> None:
            # A deferred BEGIN that reads and then writes cannot take the write lock if another connection
            # (a ledger writer) committed since its read: SQLite fails it at once, without waiting.
            options = conn.get_execution_options()
            # query_only stays with the pooled connection (off when it is new): set only where it changes,
            # so a transaction like the one before it costs no statement more. `info` lives as long as the
            # DBAPI connection, and is cleared with it.
            reads = bool(options.get(READS, False))
            info = conn.connection.info
            if info.get(READS, False) != reads:
                conn.exec_driver_sql(f"PRAGMA query_only={int(reads)}")
                info[READS] = reads
            conn.exec_driver_sql("BEGIN IMMEDIATE" if options.get(WRITES, False) else "BEGIN")

        return engine
    parsed = sa.engine.make_url(url)
    if parsed.drivername in ("postgresql", "postgres"):
        parsed = parsed.set(drivername="postgresql+psycopg")
    schema = checked_schema(env.database_schema)
    connect_args: dict[str, Any] = {}
    if schema:
        connect_args["options"] = f"-csearch_path={schema}"
    return sa.create_engine(parsed, connect_args=connect_args, pool_pre_ping=True)


@contextmanager
def write_transaction(engine: sa.Engine) -> Iterator[sa.Connection]:
    """One transaction that writes, committed on leaving it (rolled back on an exception).

    On SQLite it first waits its turn with the ledger writers (write_turn.py), then holds SQLite's write lock
    from its first statement, so what it reads is what it writes against, and the ledger writer that comes
    next is woken the moment it commits rather than by SQLite's busy handler. PostgreSQL's row locks and
    constraints order its writers; there it is engine.begin().
    """
    if engine.dialect.name != "sqlite":
        with engine.begin() as conn:
            yield conn
        return
    turn = WriteTurn(sqlite_path(engine.url.render_as_string()))
    try:
        with turn, engine.connect().execution_options(**{WRITES: True}) as conn, conn.begin():
            yield conn
    finally:
        turn.close()


@contextmanager
def read_transaction(engine: sa.Engine) -> Iterator[sa.Connection]:
    """One transaction that only reads, and reads one snapshot in all its statements.

    A catalog load or a report reads several tables; on PostgreSQL's default READ COMMITTED each statement
    sees every commit made before it, so a campaign written between two of them could be loaded without its
    creatives. REPEATABLE READ gives the whole transaction the snapshot of its first statement; READ ONLY (and
    SQLite's query_only) make a write slipped into a read path fail on both databases alike, rather than
    write outside write_transaction's turn and catalog bump.
    """
    options: dict[str, Any] = {READS: True}  # SQLite: a deferred BEGIN, query_only (make_engine)
    if engine.dialect.name != "sqlite":
        options = {"isolation_level": "REPEATABLE READ", "postgresql_readonly": True}
    with engine.connect().execution_options(**options) as conn, conn.begin():
        yield conn


def as_dict(row: sa.RowMapping) -> dict[str, Any]:
    """A plain dict with plain str keys (SQLAlchemy's quoted_name keys upset strict decoders)."""
    return {str(k): v for k, v in row.items()}


_SQLITE_UNIQUE = frozenset({"SQLITE_CONSTRAINT_UNIQUE", "SQLITE_CONSTRAINT_PRIMARYKEY"})


def is_unique_violation(exc: sa.exc.IntegrityError) -> bool:
    """A duplicate primary or unique key, on either backend (not a foreign-key or NOT NULL failure), as the
    driver types it: psycopg's UniqueViolation, sqlite3's extended result code."""
    if isinstance(exc.orig, psycopg.errors.UniqueViolation):
        return True
    return isinstance(exc.orig, sqlite3.IntegrityError) and exc.orig.sqlite_errorname in _SQLITE_UNIQUE


@contextmanager
def conflict_as(error: Exception) -> Iterator[None]:
    """Raise `error` (the domain's 409) when a write inside hits a duplicate key.

    The read before an insert answers the common case; this is for the request that loses a race with a
    concurrent one creating the same key between that read and its insert, which would otherwise be a 500.
    """
    try:
        yield
    except sa.exc.IntegrityError as exc:
        if is_unique_violation(exc):
            raise error from exc
        raise
