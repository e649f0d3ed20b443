"""The copies tests start from (tests/fresh_databases.py) are the migrated database, table for table and row
for row: otherwise every test on them would prove something about a database adslot never makes."""

from __future__ import annotations

import secrets
from pathlib import Path

import pytest
import sqlalchemy as sa

from adslot.storage.migrate import head_revision
from tests.conftest import require_postgres
from tests.fresh_databases import Templates, dump_postgres, dump_sqlite, real_upgrade


def sqlite_engine(path: Path) -> sa.Engine:
    return sa.create_engine(f"sqlite:///{path}")


def test_a_replayed_sqlite_database_dumps_exactly_as_a_migrated_one(tmp_path: Path) -> None:
    templates = Templates()
    first, copy, migrated = (sqlite_engine(tmp_path / f"{n}.db") for n in ("first", "copy", "migrated"))
    templates.upgrade(first, None)  # migrated for real, and dumped
    templates.upgrade(copy, None)  # replayed from the dump
    real_upgrade(migrated, None)
    # The same statements; SQLite's dump lists indexes in the order they were made, which replaying changes.
    statements = sorted(dump_sqlite(copy).split(";\n"))
    assert statements == sorted(dump_sqlite(migrated).split(";\n"))
    assert any(s.startswith('CREATE TABLE "ad_requests" (') for s in statements)
    assert f"INSERT INTO \"alembic_version\" VALUES('{head_revision()}')" in statements


def test_a_database_that_is_not_empty_is_migrated_not_replayed_over(tmp_path: Path) -> None:
    templates = Templates()
    templates.upgrade(sqlite_engine(tmp_path / "first.db"), None)
    engine = sqlite_engine(tmp_path / "kept.db")
    with engine.begin() as conn:
        conn.exec_driver_sql("CREATE TABLE kept (id INTEGER PRIMARY KEY)")
        conn.exec_driver_sql("INSERT INTO kept VALUES (7)")
    templates.upgrade(engine, None)
    with engine.connect() as conn:
        assert conn.exec_driver_sql("SELECT id FROM kept").scalar_one() == 7
        assert conn.exec_driver_sql("SELECT count(*) FROM alembic_version").scalar_one() == 1


@pytest.mark.postgres
def test_a_replayed_postgresql_schema_dumps_exactly_as_a_migrated_one() -> None:
    engine = sa.create_engine(require_postgres().replace("postgresql://", "postgresql+psycopg://", 1))
    tag = secrets.token_hex(4)
    first, copy, migrated = (f"f{tag}_{n}" for n in ("first", "copy", "migrated"))
    templates = Templates()
    try:
        templates.upgrade(engine, first)
        templates.upgrade(engine, copy)
        real_upgrade(engine, migrated)
        copied = dump_postgres(engine, copy).replace(copy, "SCHEMA")
        assert copied == dump_postgres(engine, migrated).replace(migrated, "SCHEMA")
        assert "CREATE TABLE SCHEMA.ad_requests" in copied
    finally:
        with engine.begin() as conn:
            for schema in (first, copy, migrated):
                conn.exec_driver_sql(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
        engine.dispose()
