"""A migrated production database per backend (SQLite, and PostgreSQL when configured), emptied of ad
requests and request counts (per screen and per key) before each test."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import sqlalchemy as sa

from adslot.storage.tables import ad_requests, key_stats, request_stats
from tests.conftest import BACKENDS, migrated_engine


@pytest.fixture(scope="module", params=BACKENDS)
def engine(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[sa.Engine]:
    yield from migrated_engine(tmp_path_factory.mktemp("reports"), str(request.param))


@pytest.fixture
def db(engine: sa.Engine) -> sa.Engine:
    with engine.begin() as conn:
        conn.execute(sa.delete(ad_requests))
        conn.execute(sa.delete(request_stats))
        conn.execute(sa.delete(key_stats))
    return engine
