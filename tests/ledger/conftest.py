"""Fixtures of the ledger tests: a migrated database per backend, emptied before each test that asks, and a
SQLite ledger store of its own for the tests of its writer."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import pytest

from adslot.environment import prepare_database
from adslot.ledger.sqlite_store import SqliteLedgerStore
from adslot.storage.database import make_engine, sqlite_path
from tests.conftest import BACKENDS, drop_schemas, free_port, make_settings
from tests.ledger.stores import LedgerDatabase


def migrated(backend: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[LedgerDatabase]:
    """A migrated ledger database on `backend`, dropped at the end."""
    settings, schemas = make_settings(tmp_path_factory.mktemp("ledger"), backend, free_port())
    env = settings.environment("production")
    prepare_database(env)
    engine = make_engine(env)
    yield LedgerDatabase(backend, env, engine)
    engine.dispose()
    if schemas:
        drop_schemas(schemas)


@pytest.fixture(scope="module", params=BACKENDS)
def ledger_database(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[LedgerDatabase]:
    yield from migrated(str(request.param), tmp_path_factory)


@pytest.fixture
def db(ledger_database: LedgerDatabase) -> LedgerDatabase:
    """The module's database, emptied for this test."""
    ledger_database.clear()
    return ledger_database


@pytest.fixture
def sqlite_database(tmp_path: Path) -> Path:
    """A migrated SQLite database file of this test's own."""
    settings, _ = make_settings(tmp_path, "sqlite", free_port())
    env = settings.environment("production")
    prepare_database(env)
    return sqlite_path(env.database_url)


@pytest.fixture
def sqlite_store(sqlite_database: Path) -> Iterator[SqliteLedgerStore]:
    """A started SQLite ledger store (its writer and checkpoint thread) on `sqlite_database`."""
    store = SqliteLedgerStore(sqlite_database)
    asyncio.run(store.start())
    yield store
    asyncio.run(store.close())
