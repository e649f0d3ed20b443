"""The migrations build the schema tables.py declares, 0003 gives existing counters their window and 0005
turns stored fires into bits."""

from __future__ import annotations

import calendar
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
import sqlalchemy as sa
from alembic import command
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext

from adslot.ledger.records import FIRE_BITS
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


def test_upgrading_turns_each_stored_fire_into_its_bit_and_downgrading_gives_the_fires_back(
    env: EnvironmentSettings,
) -> None:
    """0005 moves pop_fires into ad_requests.fired: the same fires, so every stored one stays a duplicate."""
    engine = make_engine(env)
    schema = env.database_schema
    fired_id, unfired_id = uuid.UUID(int=1 << 100), uuid.UUID(int=2 << 100)
    try:
        if schema:
            with engine.begin() as conn:
                conn.exec_driver_sql(f'CREATE SCHEMA "{schema}"')
        config = alembic_config(engine, schema)
        command.upgrade(config, "0004")
        rows = sa.table(
            "ad_requests",
            *(sa.column(c) for c in ("account_id", "venue_id", "play_time", "created_at", "expires_at")),
            *(sa.column(c) for c in ("campaign_id", "creative_id", "impression_at", "complete_at")),
            sa.column("id", sa.Uuid),
            schema=schema,
        )
        fires = sa.table(
            "pop_fires",
            sa.column("ad_request_id", sa.Uuid),
            sa.column("event"),
            sa.column("layer"),
            sa.column("at"),
            schema=schema,
        )
        common = {"account_id": 1, "venue_id": "v", "play_time": 10, "created_at": 5, "expires_at": 900}
        common |= {"campaign_id": 1, "creative_id": 1}
        with engine.begin() as conn:
            conn.execute(
                sa.insert(rows),
                [
                    {"id": fired_id, "impression_at": 11, "complete_at": 40} | common,
                    {"id": unfired_id, "impression_at": None, "complete_at": None} | common,
                ],
            )
            conn.execute(
                sa.insert(fires),
                [
                    {"ad_request_id": fired_id, "event": "impression", "layer": "wrapper", "at": 11},
                    {"ad_request_id": fired_id, "event": "impression", "layer": "inline", "at": 12},
                    {"ad_request_id": fired_id, "event": "complete", "layer": "inline", "at": 40},
                ],
            )
        command.upgrade(config, "head")
        fired = sa.table("ad_requests", sa.column("id", sa.Uuid), sa.column("fired"), schema=schema)
        with engine.connect() as conn:
            bits = dict(conn.execute(sa.select(fired.c.id, fired.c.fired)).all())
        expected = FIRE_BITS["impression", "wrapper"] | FIRE_BITS["impression", "inline"]
        expected |= FIRE_BITS["complete", "inline"]
        assert bits == {fired_id: expected, unfired_id: 0}

        command.downgrade(config, "0004")
        with engine.connect() as conn:
            back = set(conn.execute(sa.select(fires.c.ad_request_id, fires.c.event, fires.c.layer)).all())
        assert back == {
            (fired_id, "impression", "wrapper"),
            (fired_id, "impression", "inline"),
            (fired_id, "complete", "inline"),
        }
    finally:
        engine.dispose()
