"""The migrations build the schema tables.py declares, and 0003 gives existing counters their window."""

from __future__ import annotations

import calendar
from collections.abc import Iterator
from pathlib import Path

import pytest
import sqlalchemy as sa
from alembic import command
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext

from adslot.settings import EnvironmentSettings
from adslot.storage.database import make_engine
from adslot.storage.migrate import alembic_config, upgrade
from adslot.storage.tables import delivery_counters, metadata
from tests.conftest import BACKENDS, drop_schemas, free_port, make_settings

HOUR_KEY = "f1:lobby/s1:h:1800000000"
DAY_KEY = "c1:day:2027-01-15:plays"


@pytest.fixture(params=BACKENDS)
def env(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[EnvironmentSettings]:
    settings, schemas = make_settings(tmp_path, str(request.param), free_port())
    yield settings.environment("production")
    if schemas:
        drop_schemas(schemas)


def test_the_migrated_database_matches_the_declared_tables_and_indexes(env: EnvironmentSettings) -> None:
    engine = make_engine(env)
    try:
        upgrade(engine, env.database_schema)
        with engine.connect() as conn:
            if env.database_schema:
                conn.exec_driver_sql(f'SET search_path TO "{env.database_schema}"')
            context = MigrationContext.configure(conn, opts={"compare_type": True})
            differences = [d for d in compare_metadata(context, metadata) if "alembic_version" not in str(d)]
        assert differences == []
    finally:
        engine.dispose()


def test_upgrading_a_database_with_counters_gives_each_its_window(env: EnvironmentSettings) -> None:
    engine = make_engine(env)
    try:
        if env.database_schema:
            with engine.begin() as conn:
                conn.exec_driver_sql(f'CREATE SCHEMA "{env.database_schema}"')
        config = alembic_config(engine, env.database_schema)
        command.upgrade(config, "0002")
        schema = env.database_schema
        before = sa.table("delivery_counters", sa.column("key"), sa.column("reserved"), schema=schema)
        with engine.begin() as conn:
            rows = [{"key": key, "reserved": 0} for key in (HOUR_KEY, DAY_KEY, "c1:life:plays")]
            conn.execute(sa.insert(before), rows)
        command.upgrade(config, "head")
        table = delivery_counters.to_metadata(sa.MetaData(), schema=env.database_schema)
        with engine.connect() as conn:
            windows = dict(conn.execute(sa.select(table.c.key, table.c.closes_at)).all())
        assert windows == {
            HOUR_KEY: 1_800_003_600,  # the end of its hour
            DAY_KEY: calendar.timegm((2027, 1, 16, 12, 0, 0)),  # the end of 2027-01-15 at UTC-12
            "c1:life:plays": None,
        }
    finally:
        engine.dispose()
