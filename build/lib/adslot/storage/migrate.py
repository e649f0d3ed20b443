"""Apply Alembic migrations programmatically, so `adslot serve` brings any database up to date itself."""

from __future__ import annotations

import logging
from pathlib import Path

import sqlalchemy as sa
from alembic import command
from alembic.config import Config

from adslot.storage.database import checked_schema

MIGRATIONS = Path(__file__).parent / "migrations"


def alembic_config(engine: sa.Engine, schema: str | None) -> Config:
    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS))
    config.attributes["engine"] = engine
    config.attributes["schema"] = checked_schema(schema)
    return config


def upgrade(engine: sa.Engine, schema: str | None) -> None:
    logging.getLogger("alembic").setLevel(logging.WARNING)
    if schema and engine.dialect.name == "postgresql":
        with engine.begin() as conn:
            conn.exec_driver_sql(f'CREATE SCHEMA IF NOT EXISTS "{checked_schema(schema)}"')
    command.upgrade(alembic_config(engine, schema), "head")
