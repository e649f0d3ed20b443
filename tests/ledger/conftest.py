"""Fixtures of the ledger tests: a migrated database per backend, emptied before each test that asks."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from adslot.environment import prepare_database
from adslot.storage.database import make_engine
from tests.conftest import BACKENDS, drop_schemas, free_port, make_settings
from tests.ledger.stores import LedgerDatabase


@pytest.fixture(scope="module", params=BACKENDS)
def ledger_database(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[LedgerDatabase]:
    backend = str(request.param)
    settings, schemas = make_settings(tmp_path_factory.mktemp("ledger"), backend, free_port())
    env = settings.environment("production")
    prepare_database(env)
    engine = make_engine(env)
    yield LedgerDatabase(backend, env, engine)
    engine.dispose()
    if schemas:
        drop_schemas(schemas)


@pytest.fixture
def db(ledger_database: LedgerDatabase) -> LedgerDatabase:
    """The module's database, emptied for this test."""
    ledger_database.clear()
    return ledger_database
