"""A migrated production database per backend, emptied of ad requests, their counts and rollups before each
test."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import sqlalchemy as sa

from adslot.storage.tables import ad_requests, invalid_fires, key_stats, report_rollups, request_stats
from tests.conftest import BACKENDS, migrated_engine


@pytest.fixture(scope="module", params=BACKENDS)
def engine(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[sa.Engine]:
    yield from migrated_engine(tmp_path_factory.mktemp("retention"), str(request.param))


@pytest.fixture
def db(engine: sa.Engine) -> sa.Engine:
    with engine.begin() as conn:
        for table in (ad_requests, invalid_fires, request_stats, key_stats, report_rollups):
            conn.execute(sa.delete(table))
    return engine
