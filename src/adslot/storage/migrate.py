"""Apply Alembic migrations programmatically, so `adslot serve` brings any database up to date itself."""

from __future__ import annotations

import functools
import logging
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import sqlalchemy as sa
from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory

from adslot.storage.database import checked_schema

MIGRATIONS = Path(__file__).parent / "migrations"


def alembic_config(engine: sa.Engine, schema: str | None) -> Config:
    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS))
    config.attributes["engine"] = engine
    config.attributes["schema"] = checked_schema(schema)
    return config


MIGRATION_LOCK = "adslot migrations "
"""Prefix of the advisory lock's name (with the schema's) that orders the nodes preparing one database."""


@contextmanager
def one_at_a_time(engine: sa.Engine, schema: str | None) -> Iterator[None]:
    """Hold PostgreSQL's session advisory lock for this schema (on a connection of its own) while preparing
    the database. Several nodes starting at once on a new database, or on one a release adds a migration
    to, each migrate it and seed its sandbox: without the lock two of them create the same schema, table
    or seed row at once and one fails to start (a unique violation). With it they take turns, and the next
    finds the work done. Nothing to hold on SQLite, whose write lock orders them (one host only)."""
    if engine.dialect.name != "postgresql":
        yield
        return
    name = MIGRATION_LOCK + (checked_schema(schema) or "")
    with engine.connect() as lock:
        lock.exec_driver_sql("SELECT pg_advisory_lock(hashtext(%(name)s))", {"name": name})
        lock.commit()
        try:
            yield
        finally:
            lock.exec_driver_sql("SELECT pg_advisory_unlock(hashtext(%(name)s))", {"name": name})
            lock.commit()


@functools.cache
def head_revision() -> str | None:
    """The newest migration this release ships (read from its scripts once per process)."""
    return ScriptDirectory(str(MIGRATIONS)).get_current_head()


def current_revision(engine: sa.Engine, schema: str | None) -> str | None:
    """The migration the database is at, or None when it has none yet."""
    with engine.connect() as conn:
        postgres = engine.dialect.name == "postgresql"
        options = {"version_table_schema": checked_schema(schema)} if postgres else {}
        return MigrationContext.configure(conn, opts=options).get_current_revision()


def upgrade(engine: sa.Engine, schema: str | None) -> None:
    """Bring the database to the newest migration. One already there costs one query: every CLI command
    and every worker's start prepares its database, and Alembic's own run loads each script first."""
    if current_revision(engine, schema) == head_revision():
        return
    logging.getLogger("alembic").setLevel(logging.WARNING)
    if schema and engine.dialect.name == "postgresql":
        with engine.begin() as conn:
            conn.exec_driver_sql(f'CREATE SCHEMA IF NOT EXISTS "{checked_schema(schema)}"')
    command.upgrade(alembic_config(engine, schema), "head")
