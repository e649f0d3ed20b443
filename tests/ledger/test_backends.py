"""The registry of ledger backends: which ledger each database gets, logged once, and both kinds answer
point reads alike."""

from __future__ import annotations

import asyncio
import logging

import pytest

from adslot.ledger.backends import database_store, ledger_for, with_writer_processes
from adslot.ledger.postgres_store import PostgresLedgerStore
from adslot.ledger.process_store import ProcessLedgerStore
from adslot.ledger.records import Issue
from adslot.ledger.sqlite_store import CHUNK, SqliteLedgerStore
from adslot.ledger.store import LedgerStore
from adslot.settings import load_settings
from tests.ledger.stores import LedgerDatabase, record


def test_sqlite_goes_through_a_writer_process_and_postgresql_is_written_from_the_worker(
    caplog: pytest.LogCaptureFixture,
) -> None:
    settings = load_settings({"ADSLOT_SANDBOX_DATABASE_URL": "postgresql://db.example/ads"})
    production, sandbox = settings.environment("production"), settings.environment("sandbox")
    with caplog.at_level(logging.INFO, logger="adslot.ledger"):
        assert isinstance(ledger_for(production), ProcessLedgerStore)
        assert isinstance(ledger_for(sandbox), PostgresLedgerStore)
    assert "production ledger: SQLite, batches applied by one ledger writer process" in caplog.text
    assert "sandbox ledger: PostgreSQL, batches applied by each worker" in caplog.text
    assert with_writer_processes(settings.environments) == [production]


def test_the_database_store_is_the_one_that_applies_batches_on_each_backend() -> None:
    settings = load_settings({"ADSLOT_SANDBOX_DATABASE_URL": "postgresql://db.example/ads"})
    production, sandbox = settings.environment("production"), settings.environment("sandbox")
    assert isinstance(database_store(production.database_url, None), SqliteLedgerStore)
    assert isinstance(database_store(sandbox.database_url, sandbox.database_schema), PostgresLedgerStore)


def test_get_many_answers_each_id_in_order_with_none_for_unknown_ones(db: LedgerDatabase) -> None:
    """The batched point read every inline VAST goes through (Environment.lookup), on the database's own
    store and on the ledger its backend runs; past one statement's worth of ids (SQLite's CHUNK) too."""

    async def scenario(store: LedgerStore) -> None:
        await store.start()
        try:
            first, second = record(), record(venue_id="hall")
            await store.apply([Issue(first), Issue(second)])
            missing = record().id
            found = await store.get_many([second.id, missing, first.id, second.id])
            assert [r.venue_id if r else None for r in found] == ["hall", None, "lobby", "hall"]
            assert found[2] == await store.get(first.id)
            assert await store.get_many([]) == []
            many = [record(venue_id=f"v{i}") for i in range(CHUNK + 20)]
            await store.apply([Issue(r) for r in many])
            asked = [r.id for r in reversed(many)] + [missing]
            assert [r.venue_id if r else None for r in await store.get_many(asked)] == [
                *(r.venue_id for r in reversed(many)),
                None,
            ]
        finally:
            await store.close()

    for store in (db.store(), ledger_for(db.env)):
        db.clear()
        asyncio.run(scenario(store))
