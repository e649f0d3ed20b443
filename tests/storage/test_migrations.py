"""The migrations build the schema tables.py declares, 0003 gives existing counters their window, 0005
turns stored fires into bits, 0007 moves delivery to the settlement, 0008 adds PostgreSQL's write check and
0009 attributes ad requests to keys."""

from __future__ import annotations

import calendar
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
import sqlalchemy as sa
from alembic import command
from alembic.autogenerate import compare_metadata
from alembic.config import Config
from alembic.migration import MigrationContext

from adslot.ledger.records import FIRE_BITS
from adslot.settings import EnvironmentSettings
from adslot.storage.database import make_engine
from adslot.storage.migrate import alembic_config, upgrade
from adslot.storage.tables import delivery_counters, metadata
from tests.conftest import BACKENDS, drop_schemas, free_port, make_settings

HOUR_KEY = "f1:lobby/s1:h:1800000000"
DAY_KEY = "c1:day:2027-01-15:plays"


def at_revision(engine: sa.Engine, schema: str | None, revision: str) -> Config:
    """The database migrated up to `revision` (in its own schema on PostgreSQL), and its Alembic config."""
    if schema:
        with engine.begin() as conn:
            conn.exec_driver_sql(f'CREATE SCHEMA "{schema}"')
    config = alembic_config(engine, schema)
    command.upgrade(config, revision)
    return config


def ad_requests_at(schema: str | None, *columns: str) -> sa.TableClause:
    """ad_requests as an older revision has it: the columns a row needs, its id and `columns`."""
    required = (
        "account_id",
        "venue_id",
        "play_time",
        "created_at",
        "expires_at",
        "campaign_id",
        "creative_id",
    )
    return sa.table(
        "ad_requests", *(sa.column(c) for c in (*required, *columns)), sa.column("id", sa.Uuid), schema=schema
    )


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
        schema = env.database_schema
        config = at_revision(engine, schema, "0002")
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
        config = at_revision(engine, schema, "0004")
        rows = ad_requests_at(schema, "impression_at", "complete_at")
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


def test_0007_settles_what_played_before_it_and_its_downgrade_delivers_what_played_since(
    env: EnvironmentSettings,
) -> None:
    """Before 0007 a counted impression delivered at once; since, the sweep's settlement delivers. Neither
    direction may deliver an ad request twice or leave one's units reserved for ever."""
    engine = make_engine(env)
    schema = env.database_schema
    earlier, unplayed, later = (uuid.UUID(int=n << 100) for n in (1, 2, 3))
    try:
        config = at_revision(engine, schema, "0006")
        rows = ad_requests_at(schema, "impression_at", "claims", "settled_at", "settle_reason")
        counters = sa.table(
            "delivery_counters",
            sa.column("key"),
            sa.column("reserved"),
            sa.column("delivered"),
            schema=schema,
        )
        common = {"account_id": 1, "venue_id": "v", "play_time": 10, "created_at": 5, "expires_at": 900}
        common |= {"campaign_id": 1, "creative_id": 1, "claims": '[["k",1]]'}
        with engine.begin() as conn:
            conn.execute(
                sa.insert(rows),
                [
                    {"id": earlier, "impression_at": 11} | common,
                    {"id": unplayed, "impression_at": None} | common,
                ],
            )
            conn.execute(sa.insert(counters), [{"key": "k", "reserved": 1, "delivered": 1}])

        def state() -> tuple[dict[uuid.UUID, tuple[int | None, str | None]], tuple[int, int]]:
            with engine.connect() as conn:
                settled = conn.execute(sa.select(rows.c.id, rows.c.settled_at, rows.c.settle_reason)).all()
                held = conn.execute(sa.select(counters.c.reserved, counters.c.delivered)).one()
            return {r.id: (r.settled_at, r.settle_reason) for r in settled}, (held[0], held[1])

        command.upgrade(config, "head")
        assert state() == ({earlier: (11, "played"), unplayed: (None, None)}, (1, 1))
        with engine.begin() as conn:  # played since 0007: its 2 units are still reserved
            conn.execute(
                sa.insert(rows), [{"id": later, "impression_at": 20} | common | {"claims": '[["k",2]]'}]
            )
            conn.execute(sa.update(counters).values(reserved=3))
        command.downgrade(config, "0006")
        settled, held = state()
        assert held == (1, 3) and settled[later] == (None, None) and settled[earlier] == (11, "played")
    finally:
        engine.dispose()


def test_0008_gives_postgresql_the_ledgers_write_check_and_its_downgrade_takes_it_away(
    env: EnvironmentSettings,
) -> None:
    """A PostgreSQL writer's unlocked batch ends with ledger_written(), which must fail the statement when
    it wrote other than it meant to; SQLite's writer has no use for it and gets nothing."""
    engine = make_engine(env)
    schema = env.database_schema
    try:
        config = at_revision(engine, schema, "head")
        if engine.dialect.name != "postgresql":
            return
        with engine.connect() as conn:
            conn.exec_driver_sql(f'SET search_path TO "{schema}"')
            assert conn.exec_driver_sql("SELECT ledger_written(3, 3, 2, 2)").scalar_one() == 2
            for counts, code in (("3, 3, 1, 2", "AL001"), ("2, 3, 2, 2", "AL002")):
                with pytest.raises(sa.exc.DBAPIError) as failed, conn.begin_nested():
                    conn.exec_driver_sql(f"SELECT ledger_written({counts})")
                assert getattr(failed.value.orig, "sqlstate", None) == code
        command.downgrade(config, "0007")
        with engine.connect() as conn:
            named = conn.exec_driver_sql(
                "SELECT count(*) FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace "
                "WHERE p.proname = 'ledger_written' AND n.nspname = %(schema)s",
                {"schema": schema},
            )
            assert named.scalar_one() == 0
    finally:
        engine.dispose()


def test_0009_keeps_stored_ad_requests_unattributed_and_its_downgrade_keeps_them_too(
    env: EnvironmentSettings,
) -> None:
    """Ad requests stored before 0009 name no key (they count for none on the Health page); key_stats starts
    empty, and the downgrade drops it and the column, not the ad requests."""
    engine = make_engine(env)
    schema = env.database_schema
    stored = uuid.UUID(int=1 << 100)
    try:
        config = at_revision(engine, schema, "0008")
        rows = ad_requests_at(schema, "impression_at")
        common = {"account_id": 1, "venue_id": "v", "play_time": 10, "created_at": 5, "expires_at": 900}
        common |= {"campaign_id": 1, "creative_id": 1, "impression_at": 11}
        with engine.begin() as conn:
            conn.execute(sa.insert(rows), [{"id": stored} | common])
        command.upgrade(config, "0009")
        attributed = sa.table("ad_requests", sa.column("id", sa.Uuid), sa.column("key_id"), schema=schema)
        counted = sa.table("key_stats", sa.column("key_id"), schema=schema)
        with engine.connect() as conn:
            assert conn.execute(sa.select(attributed.c.id, attributed.c.key_id)).all() == [(stored, None)]
            assert conn.execute(sa.select(sa.func.count()).select_from(counted)).scalar_one() == 0
        command.downgrade(config, "0008")
        inspector = sa.inspect(engine)
        assert "key_stats" not in inspector.get_table_names(schema=schema)
        assert "key_id" not in {c["name"] for c in inspector.get_columns("ad_requests", schema=schema)}
        with engine.connect() as conn:
            assert conn.execute(sa.select(rows.c.id, rows.c.impression_at)).all() == [(stored, 11)]
    finally:
        engine.dispose()
