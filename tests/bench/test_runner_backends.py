"""Which backends a benchmark run measures: SQLite unless --no-sqlite, PostgreSQL unless --no-postgres."""

from __future__ import annotations

from bench.runner import backend_plan, parse_args


def test_no_sqlite_leaves_sqlite_out_and_says_so() -> None:
    options = parse_args(["--no-sqlite", "--no-postgres"])
    backends, plan = backend_plan(options.postgres, sqlite=options.sqlite)
    assert plan == []
    assert backends == {"sqlite": "skipped (--no-sqlite)", "postgres": "skipped (--no-postgres)"}


def test_by_default_sqlite_runs_first() -> None:
    options = parse_args(["--no-postgres"])
    assert options.sqlite
    backends, plan = backend_plan(options.postgres, sqlite=options.sqlite)
    assert plan == [("sqlite", None)] and backends["sqlite"] == "pending"
