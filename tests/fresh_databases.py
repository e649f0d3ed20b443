"""New test databases from a copy of one migrated once per session.

Most tests start on a new database, and running every migration for each (1 to 2 s on SQLite, ~0.5 s on
PostgreSQL) was the largest share of the suite's time. Instead the first new database of each kind is
migrated for real, its schema and rows are dumped (SQLite's own dump; PostgreSQL's pg_dump), and each later
new database replays that dump in one go. Only empty databases are replayed into: a database already at some
revision is upgraded by Alembic as before, and the migrations' own tests (tests/storage/test_migrations.py)
call Alembic directly. tests/test_fresh_databases.py proves a replayed database identical to a migrated one.
"""

from __future__ import annotations

import secrets
import shutil
import subprocess
import threading
from typing import Any

import psycopg
import sqlalchemy as sa

from adslot.storage import migrate

real_upgrade = migrate.upgrade


def dump_sqlite(engine: sa.Engine) -> str:
    raw: Any = engine.raw_connection()
    try:
        return "\n".join(raw.driver_connection.iterdump())
    finally:
        raw.close()


def _plain_url(engine: sa.Engine) -> str:
    return engine.url.set(drivername="postgresql").render_as_string(hide_password=False)


def dump_postgres(engine: sa.Engine, schema: str) -> str:
    """The schema's tables, indexes, functions and rows as SQL, with psql's own commands left out."""
    pg_dump = shutil.which("pg_dump")
    assert pg_dump, "pg_dump is needed to copy a PostgreSQL schema"
    out = subprocess.run(
        [pg_dump, "--schema", schema, "--inserts", "--no-owner", "--no-privileges", "-d", _plain_url(engine)],
        check=True,
        capture_output=True,
        text=True,
        timeout=60,
    ).stdout
    return "\n".join(line for line in out.splitlines() if not line.startswith("\\"))


def _is_empty(engine: sa.Engine, schema: str | None) -> bool:
    with engine.connect() as conn:
        return not sa.inspect(conn).get_table_names(schema=schema)


class Templates:
    """One dump per database kind, made on first use (each xdist worker makes its own)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._sqlite: str | None = None
        self._postgres: tuple[str, str] | None = None  # (template schema's name, its dump)

    def upgrade(self, engine: sa.Engine, schema: str | None) -> None:
        if engine.dialect.name == "sqlite":
            self._upgrade_sqlite(engine, schema)
        elif engine.dialect.name == "postgresql" and schema and shutil.which("pg_dump"):
            self._upgrade_postgres(engine, schema)
        else:
            real_upgrade(engine, schema)

    def _upgrade_sqlite(self, engine: sa.Engine, schema: str | None) -> None:
        if not _is_empty(engine, None):
            real_upgrade(engine, schema)
            return
        with self._lock:
            if self._sqlite is None:
                real_upgrade(engine, schema)
                self._sqlite = dump_sqlite(engine)
                return
            script = self._sqlite
        raw: Any = engine.raw_connection()
        try:
            raw.driver_connection.executescript(script)
        finally:
            raw.close()

    def _upgrade_postgres(self, engine: sa.Engine, schema: str) -> None:
        if not _is_empty(engine, schema):
            real_upgrade(engine, schema)
            return
        with self._lock:
            if self._postgres is None:
                template = "tmpl" + secrets.token_hex(6)
                real_upgrade(engine, template)
                try:
                    self._postgres = (template, dump_postgres(engine, template))
                finally:
                    with engine.begin() as conn:
                        conn.exec_driver_sql(f'DROP SCHEMA "{template}" CASCADE')
            template, script = self._postgres
        script = script.replace(template, schema).replace(
            f"CREATE SCHEMA {schema};", f"CREATE SCHEMA IF NOT EXISTS {schema};"
        )
        # On a connection of its own: the dump sets the session's search_path, which a pooled one would keep.
        with psycopg.connect(_plain_url(engine), autocommit=False) as conn:
            conn.execute(script.encode())
            conn.commit()


TEMPLATES = Templates()


def install() -> None:
    """Route prepare_database's migrations (every test server, CLI command and fixture) through the copies."""
    import adslot.environment

    adslot.environment.upgrade = TEMPLATES.upgrade  # type: ignore[attr-defined]
