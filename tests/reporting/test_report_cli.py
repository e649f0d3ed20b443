"""`adslot report delivery` and `adslot report playlog` print the API's figures to stdout, on SQLite and
PostgreSQL, and refuse bad options with the API's error code and field."""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import sqlalchemy as sa
from click.testing import CliRunner

from adslot.cli import main
from adslot.environment import prepare_database
from adslot.settings import load_settings
from adslot.storage.database import make_engine
from tests.conftest import BACKENDS, POSTGRES_URL, cli_databases, drop_schemas
from tests.reporting.support import insert, played, stat, utc

Invoke = Callable[..., str]
START = utc("2026-10-24T22:00")  # midnight in Berlin on 2026-10-25, a 25-hour day


@pytest.fixture(params=BACKENDS)
def cli(
    request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[tuple[Invoke, sa.Engine]]:
    schemas = cli_databases(str(request.param), tmp_path, monkeypatch)
    env = load_settings().environment("production")
    prepare_database(env)
    engine = make_engine(env)
    runner = CliRunner()

    def invoke(*args: str, ok: bool = True) -> str:
        result = runner.invoke(main, ["report", *args])
        assert (result.exit_code == 0) == ok, result.output
        return result.output

    yield invoke, engine
    engine.dispose()
    if schemas and POSTGRES_URL:
        drop_schemas(schemas)


def test_delivery_prints_csv_and_json_with_the_reports_figures(cli: tuple[Invoke, sa.Engine]) -> None:
    invoke, engine = cli
    rows = [played(START + 3600 * n, "start", "complete", impressions=1.5) for n in range(25)]
    insert(
        engine, [*rows, played(START, venue_id="v2")], [stat("v1", START + 3600 * n, 4) for n in range(25)]
    )
    span = ["--from", str(START), "--to", str(START + 25 * 3600), "--timezone", "Europe/Berlin"]
    text = invoke("delivery", *span, "--group-by", "venue,day", "--format", "csv")
    header, *lines = list(csv.reader(io.StringIO(text)))
    assert header[:5] == ["venue_id", "day", "requests", "fills", "fill_rate"]
    assert [line[:9] for line in lines] == [
        ["v1", "2026-10-25", "100", "25", "0.25", "25", "37.5", "25", "0"],
        ["v2", "2026-10-25", "0", "1", "", "1", "1.0", "0", "0"],
    ]
    data = json.loads(invoke("delivery", *span, "--group-by", "hour", "--venue-id", "v1"))
    assert data["timezone"] == "Europe/Berlin" and data["group_by"] == ["hour"]
    assert len(data["rows"]) == 25 and data["totals"]["completes"] == 25 and data["totals"]["requests"] == 100


def test_playlog_prints_every_play_as_csv_or_json_lines(cli: tuple[Invoke, sa.Engine]) -> None:
    invoke, engine = cli
    rows = [played(START + n, screen_id="s1") for n in range(3)]
    insert(engine, [*rows, played(START, venue_id="v2")])
    span = ["--venue-id", "v1", "--from", str(START), "--to", str(START + 60)]
    header, *lines = list(csv.reader(io.StringIO(invoke("playlog", *span))))
    assert header[:4] == ["ad_request_uuid", "venue_id", "screen_id", "play_time"]
    assert [line[0] for line in lines] == [str(row["id"]) for row in rows]
    records = [json.loads(line) for line in invoke("playlog", *span, "--format", "jsonl").splitlines()]
    assert [(r["ad_request_uuid"], r["play_time"]) for r in records] == [
        (str(r["id"]), r["play_time"]) for r in rows
    ]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["delivery", "--from", "10", "--to", "5"], "invalid_field (to)"),
        (["delivery", "--from", "0", "--to", "3600", "--group-by", "week"], "invalid_field (group_by)"),
        (["delivery", "--from", "0", "--to", "3600", "--timezone", "Nope/No"], "invalid_timezone (timezone)"),
        (["delivery", "--from", "noon", "--to", "3600"], "invalid_type (from)"),
        (["playlog", "--venue-id", "v1", "--from", "0", "--to", str(40 * 86400)], "invalid_field (to)"),
    ],
)
def test_bad_options_end_with_the_apis_error_code_and_field(
    cli: tuple[Invoke, sa.Engine], args: list[str], message: str
) -> None:
    invoke, _ = cli
    assert message in invoke(*args, ok=False)
