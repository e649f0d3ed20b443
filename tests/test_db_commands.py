"""`adslot db rollup` rolls up by hand what the retention would, on SQLite and PostgreSQL, and refuses a date
within the minimum retention."""

from __future__ import annotations

import time
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest
import sqlalchemy as sa
from click.testing import CliRunner

from adslot.cli import main
from adslot.environment import prepare_database
from adslot.settings import load_settings
from adslot.storage.database import make_engine
from adslot.storage.tables import ad_requests, report_rollups
from tests.conftest import BACKENDS, cli_databases, drop_schemas
from tests.reporting.support import insert, played

DAY = 86_400


@pytest.fixture(params=BACKENDS)
def production(
    request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[sa.Engine]:
    schemas = cli_databases(str(request.param), tmp_path, monkeypatch)
    env = load_settings().environment("production")
    prepare_database(env)
    engine = make_engine(env)
    yield engine
    engine.dispose()
    if schemas:
        drop_schemas(schemas)


def test_a_rollup_by_hand_takes_what_was_played_before_the_date_and_nothing_after(
    production: sa.Engine,
) -> None:
    today = int(time.time()) // DAY * DAY
    before = today - 20 * DAY
    rows = [
        played(at, settle_reason="played", settled_at=at + 900)
        for at in (before - 30 * DAY, before - 1, before, before + DAY)
    ]
    insert(production, rows)
    day = datetime.fromtimestamp(before, UTC).strftime("%Y-%m-%d")
    result = CliRunner().invoke(main, ["db", "rollup", "--before", day])
    assert result.exit_code == 0, result.output
    assert f"production: rolled up 2 ad requests played before {day}" in result.output
    with production.connect() as conn:
        assert sorted(conn.execute(sa.select(ad_requests.c.play_time)).scalars()) == [before, before + DAY]
        assert conn.execute(sa.select(sa.func.sum(report_rollups.c.plays))).scalar() == 2


def test_a_rollup_by_hand_refuses_a_date_within_the_minimum_retention(production: sa.Engine) -> None:
    recent = datetime.fromtimestamp(time.time() - 5 * DAY, UTC).strftime("%Y-%m-%d")
    result = CliRunner().invoke(main, ["db", "rollup", "--before", recent])
    assert result.exit_code == 1 and "at least 8 days ago" in result.output
    result = CliRunner().invoke(main, ["db", "rollup", "--before", "last week"])
    assert result.exit_code == 2 and "YYYY-MM-DD" in result.output
