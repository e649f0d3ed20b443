"""Engines and connection facts per environment: one database (or PostgreSQL schema) per environment."""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import sqlalchemy as sa

from adslot.errors import ApiError
from adslot.settings import EnvironmentSettings

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


def make_engine(env: EnvironmentSettings) -> sa.Engine:
    """A synchronous engine for migrations and the (low-rate) management API."""
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

        return engine
    parsed = sa.engine.make_url(url)
    if parsed.drivername in ("postgresql", "postgres"):
        parsed = parsed.set(drivername="postgresql+psycopg")
    schema = checked_schema(env.database_schema)
    connect_args: dict[str, Any] = {}
    if schema:
        connect_args["options"] = f"-csearch_path={schema}"
    return sa.create_engine(parsed, connect_args=connect_args, pool_pre_ping=True)


def as_dict(row: sa.RowMapping) -> dict[str, Any]:
    """A plain dict with plain str keys (SQLAlchemy's quoted_name keys upset strict decoders)."""
    return {str(k): v for k, v in row.items()}


UNIQUE_VIOLATION = "23505"
"""PostgreSQL's SQLSTATE for a duplicate key."""


def is_unique_violation(exc: sa.exc.IntegrityError) -> bool:
    """A duplicate primary or unique key, on either backend (not a foreign-key or NOT NULL failure)."""
    if getattr(exc.orig, "sqlstate", None) == UNIQUE_VIOLATION:
        return True
    text = str(exc.orig)
    return text.startswith("UNIQUE constraint failed") or text.startswith("PRIMARY KEY constraint failed")


@contextmanager
def conflict_as(error: ApiError) -> Iterator[None]:
    """Answer `error` (a 409) when a write inside hits a duplicate key.

    The read before an insert answers the common case; this is for the request that loses a race with a
    concurrent one creating the same key between that read and its insert, which would otherwise be a 500.
    """
    try:
        yield
    except sa.exc.IntegrityError as exc:
        if is_unique_violation(exc):
            raise error from exc
        raise
