"""Alembic environment: runs against the engine handed over by adslot.storage.migrate."""

from __future__ import annotations

from alembic import context

from adslot.storage.database import WRITES
from adslot.storage.tables import metadata

config = context.config
engine = config.attributes["engine"]
schema = config.attributes.get("schema")

with engine.connect() as connection:
    # A migration writes: on SQLite its transaction holds the write lock from the start (storage.database).
    connection.execution_options(**{WRITES: True})
    if schema and connection.dialect.name == "postgresql":
        connection.exec_driver_sql(f'SET search_path TO "{schema}"')
        connection.commit()
    context.configure(
        connection=connection,
        target_metadata=metadata,
        render_as_batch=connection.dialect.name == "sqlite",
        version_table_schema=schema if connection.dialect.name == "postgresql" else None,
    )
    with context.begin_transaction():
        context.run_migrations()
