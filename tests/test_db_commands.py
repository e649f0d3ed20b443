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
from tests.test_progress import on_terminal

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


def test_a_rollup_and_a_backup_show_progress_on_a_terminal_and_none_when_piped(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cli_databases("sqlite", tmp_path / "data", monkeypatch)
    env = load_settings().environment("production")
    prepare_database(env)
    prepare_database(load_settings().environment("sandbox"))
    engine = make_engine(env)
    before = int(time.time()) // DAY * DAY - 20 * DAY
    insert(
        engine, [played(before - 3600 * i, settle_reason="played", settled_at=before) for i in range(1, 5)]
    )
    engine.dispose()
    day = datetime.fromtimestamp(before, UTC).strftime("%Y-%m-%d")

    code, stdout, drawn = on_terminal("db", "rollup", "--before", day)
    assert code == 0 and b"rolled up 4 ad requests" in stdout
    assert b"Rolling up" in drawn and b"100%" in drawn, drawn
    code, stdout, drawn = on_terminal("db", "backup", str(tmp_path / "copy"))
    assert code == 0 and b"production:" in stdout
    assert b"Backing up" in drawn and b"100%" in drawn, drawn

    piped = CliRunner().invoke(main, ["db", "backup", str(tmp_path / "again")])
    assert piped.exit_code == 0, piped.output
    assert "Backing up" not in piped.output and "%" not in piped.output
    assert [line.split(":")[0] for line in piped.output.splitlines()] == ["production", "sandbox"]
