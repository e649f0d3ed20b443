"""The benchmark runs end to end: `python -m bench --quick` on one pixel scenario writes a complete report.

It asserts only that the report is whole and the rates are real, never a ratio: throughput belongs to the
benchmark's own report, not to a pass/fail test on a shared machine.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
from bench.runner import parse_sizes
from bench.servers import (
    adslot_command,
    adslot_env,
    free_port,
    issue_ad_requests,
    parse_caps,
    running,
    setup_production,
)

REPO = Path(__file__).resolve().parents[2]


def require_wrk() -> str:
    """wrk's path; without it, skip (fail on CI)."""
    wrk = shutil.which("wrk")
    if wrk is None:
        if os.environ.get("CI"):
            pytest.fail("CI must run the benchmark smoke test: install wrk (apt-get install wrk)")
        pytest.skip("the benchmark needs wrk on PATH (apt-get install wrk)")
    return wrk


def run_bench(*args: str, timeout: float) -> str:
    """`python -m <args>` from the repository, which must succeed; its stdout. `timeout` stays under the
    test's own hang guard, so a stuck run fails with its output rather than a bare timeout."""
    out = subprocess.run(
        [sys.executable, "-m", *args], cwd=REPO, capture_output=True, text=True, timeout=timeout, check=False
    )
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    return out.stdout


@pytest.mark.timeout(1200)
def test_quick_run_writes_a_complete_report(tmp_path: Path) -> None:
    require_wrk()
    run_bench(
        *("bench", "--quick", "--scenarios", "impression", "--no-postgres", "--out", str(tmp_path)),
        timeout=1140,
    )

    report = json.loads((tmp_path / "latest.json").read_text())
    assert (tmp_path / "latest.md").read_text().startswith("# adslot benchmark")
    machine = report["machine"]
    assert machine["nproc"] >= 1
    assert machine["python"] and machine["command"].startswith("python -m bench")
    assert machine["date"] and machine["git_commit"]
    assert report["config"]["scenarios"] == ["impression"]
    assert report["backends"]["sqlite"] == "ran"
    assert report["backends"]["postgres"].startswith("skipped")

    assert report["config"]["connections"] == [64, 256], "the default counts"
    levels = [row for row in report["rows"] if row["kind"] == "level"]
    assert [row["connections"] for row in levels] == [
        {"bare": 64, "adslot": 64},
        {"bare": 256, "adslot": 256},
    ]
    rows = {(row["scenario"], row["kind"]): row for row in report["rows"] if row["kind"] != "level"}
    assert set(rows) == {("impression", "max"), ("impression", "half_load")}
    # The max row takes each server at the count of its highest rate.
    best = rows[("impression", "max")]
    for side in ("bare", "adslot"):
        fastest = max(levels, key=lambda row: row[side]["rps"])
        assert best[side] == fastest[side]
        assert best["connections"][side] == fastest["connections"][side]
    assert rows[("impression", "half_load")]["connections"] == {"bare": 64, "adslot": 64}
    for row in [*rows.values(), *levels]:
        assert row["backend"] == "sqlite"
        assert row["flags"] == [], row["flags"]
        assert row["ratio"] is not None and row["ratio"] > 0
        for side in ("bare", "adslot"):
            stats = row[side]
            assert stats["rps"] > 0
            assert 0 < stats["p50_us"] <= stats["p99_us"]
            assert stats["errors"] == 0
    assert rows[("impression", "max")]["target"] == ">= 0.7"
    assert rows[("impression", "half_load")]["target_rps"]["adslot"] > 0
    # Every run goes on where the one before it stopped in a list minted long enough for all of them, so
    # every pixel of the max-rate, trial and paced runs is a first fire, as in a player's day.
    for kind in ("max", "half_load"):
        fires = rows[("impression", kind)]["proof_of_play"]
        assert fires["counted"] > 0 and fires["duplicate"] == 0, (kind, fires)
    # Every run's CPU per request, from /proc: the bare app has no ledger writer, adslot's does the writing.
    for kind in ("max", "half_load"):
        bare, adslot = (rows[("impression", kind)][side]["cpu_us"] for side in ("bare", "adslot"))
        assert set(bare) == set(adslot) == {"workers", "ledger writer", "wrk"}, (bare, adslot)
        assert bare["ledger writer"] == 0 < adslot["ledger writer"], (bare, adslot)
        assert bare["workers"] > 0 and adslot["workers"] > 0 and bare["wrk"] > 0 and adslot["wrk"] > 0
    markdown = (tmp_path / "latest.md").read_text()
    assert "| impression | sqlite | adslot |" in markdown and "| impression | sqlite | bare |" in markdown
    (minted,) = [note for note in report["notes"] if note.startswith("sqlite impression: fires on ")]
    fired = sum(r["requests"] for row in levels for r in row["adslot"]["rounds"])
    assert int(minted.split()[4].replace(",", "")) > fired, minted
    # The paced runs fire on a list of their own, minted after the max-rate runs.
    (paced,) = [n for n in report["notes"] if n.startswith("sqlite impression @ half load: fires on ")]
    paced_fires = rows[("impression", "half_load")]["proof_of_play"]["counted"]
    assert int(paced.split()[7].replace(",", "")) > paced_fires, paced


@pytest.mark.timeout(1200)
def test_several_preload_sizes_run_side_by_side_with_one_row_each_and_a_growth_note(tmp_path: Path) -> None:
    require_wrk()
    run_bench(
        *("bench", "--quick", "--no-postgres", "--no-half-load"),
        *("--scenarios", "tracking", "--preload", "0,3000", "--out", str(tmp_path)),
        timeout=1140,
    )
    report = json.loads((tmp_path / "latest.json").read_text())
    assert report["config"]["preload"] == [0, 3000]
    rows = [row for row in report["rows"] if row["kind"] == "max"]
    assert [row["backend"] for row in rows] == ["sqlite, 0 stored", "sqlite, 3,000 stored"]
    assert rows[0]["bare"] == rows[1]["bare"], "both sizes are measured against the same bare app runs"
    for row in rows:
        assert row["flags"] == [] and row["adslot"]["rps"] > 0
        assert row["proof_of_play"]["counted"] > 0, "each server fires on its own real ad requests"
    (growth,) = [note for note in report["notes"] if note.startswith("Growth, sqlite tracking:")]
    assert "with 0 / 3,000 stored ad requests, measured side by side; spread" in growth
    assert any(
        note.startswith("sqlite, 3,000 stored: 3,000 ad requests with events preloaded")
        for note in report["notes"]
    )


def test_preload_sizes_are_distinct_non_negative_counts() -> None:
    assert parse_sizes("0,1_000_000,10000000") == (0, 1_000_000, 10_000_000)
    assert parse_sizes("5") == (5,)
    for bad in ("", "1,1", "-1", "x", "1,,2"):
        with pytest.raises(argparse.ArgumentTypeError):
            parse_sizes(bad)


def test_caps_are_a_non_empty_json_list_passed_on_as_json() -> None:
    assert json.loads(parse_caps('[{"period": "daily", "metric": "plays", "limit": 5}]')) == [
        {"period": "daily", "metric": "plays", "limit": 5}
    ]
    for bad in ("", "{}", "[]", "daily", '{"period": "daily"}'):
        with pytest.raises(argparse.ArgumentTypeError):
            parse_caps(bad)


@pytest.mark.timeout(300)
def test_a_capped_benchmark_campaign_reserves_on_every_ad_request(tmp_path: Path) -> None:
    """--caps puts the money path under the load: each ad request the benchmark makes holds a reservation."""
    caps = parse_caps('[{"period": "daily", "metric": "plays", "limit": 1000000000}]')
    data = tmp_path / "data"

    def launch(port: int) -> tuple[list[str], dict[str, str]]:
        return adslot_command(port, 1), adslot_env(data, port, postgres_url=None, schemas=None, extra={})

    def counters() -> list[tuple[int, int, int]]:
        with sqlite3.connect(data / "production.sqlite3") as conn:
            return conn.execute("SELECT cap, reserved, delivered FROM delivery_counters").fetchall()

    key = setup_production(launch(free_port())[1], caps)
    with running("adslot", launch, tmp_path / "adslot.log", key) as server:
        # running() made its own ad request to know the server is ours: one reservation already.
        ((cap, before, delivered),) = counters()
        assert len(issue_ad_requests(server.url, key, 5)) == 5
        assert counters() == [(cap, before + 5, delivered)]
    assert cap == 1_000_000_000 and before >= 1 and delivered == 0
