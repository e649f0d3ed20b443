"""The workers benchmark runs end to end: `python -m bench.workers --quick` on one pixel scenario writes a
complete report, the bare app's pair first.

It asserts only that the report is whole and the rates are real, never the speedup: whether 2 workers beat 1
belongs to the benchmark's own report, not to a pass/fail test on a shared machine.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.bench.test_bench_smoke import require_wrk, run_bench


@pytest.mark.timeout(1200)
def test_quick_run_writes_a_complete_report(tmp_path: Path) -> None:
    require_wrk()
    run_bench(
        *("bench.workers", "--quick", "--duration", "1", "--no-postgres", "--scenarios", "impression"),
        *("--out", str(tmp_path)),
        timeout=1140,
    )

    report = json.loads((tmp_path / "workers.json").read_text())
    assert (tmp_path / "workers.md").read_text().startswith("# adslot: 1 worker against 2 workers")
    machine = report["machine"]
    assert machine["nproc"] >= 1
    assert machine["python"] and machine["command"].startswith("python -m bench.workers --quick")
    assert machine["date"] and machine["git_commit"]
    config = report["config"]
    assert config["scenarios"] == ["impression"]
    assert config["rounds"] == 1 and config["duration_s"] == 1, "a 1 s run proves the report as well as 2 s"
    assert report["backends"]["bare"] == "ran"
    assert report["backends"]["sqlite"] == "ran"
    assert report["backends"]["postgres"].startswith("skipped")

    assert config["connections"] == [64, 256], "the default sweep"
    rows = report["rows"]
    assert [(r["backend"], r["connections"]) for r in rows] == [
        ("bare", 64),
        ("bare", 256),
        ("sqlite", 64),
        ("sqlite", 256),
    ], "each scenario at each connection count, the bare app's pair first"
    for bare in rows[:2]:
        assert bare["scenario"] == "impression"
        assert bare["flags"] == [] and bare["speedup"] > 0 and bare["proof_of_play"] is None
        for side in ("one_worker", "two_workers"):
            stats = bare[side]
            assert stats["rps"] > 0 and stats["errors"] == 0
            cpu = stats["cpu_us"]
            assert cpu["workers"] > 0 and cpu["wrk"] > 0 and cpu.get("ledger writer", 0) == 0, cpu
    for row in rows[2:]:
        assert row["scenario"] == "impression"
        assert row["flags"] == [], row["flags"]
        assert row["speedup"] > 0
        for side in ("one_worker", "two_workers"):
            stats = row[side]
            assert stats["rps"] > 0
            assert 0 < stats["p50_us"] <= stats["p99_us"]
            assert stats["errors"] == 0
            assert len(stats["rounds"]) == 1
            assert 0 < stats["cpu_busy"] <= 1, "the machine's busy share during the run, from /proc/stat"
            cpu = stats["cpu_us"]
            assert set(cpu) == {"workers", "ledger writer", "wrk"}, "no PostgreSQL processes on a SQLite run"
            assert all(us > 0 for us in cpu.values()), cpu
        assert set(row["proof_of_play"]) == {"1 worker", "2 workers"}
        for name, fires in row["proof_of_play"].items():
            assert fires["counted"] > 0, fires
            assert fires["duplicate"] == 0, f"{name}: the list was minted long enough for both counts"

    capacity = report["capacity"]
    pairs = [(c["scenario"], c["backend"]) for c in capacity]
    assert pairs == [("impression", "bare"), ("impression", "sqlite")]
    for c, pair in zip(capacity, (rows[:2], rows[2:]), strict=True):
        best_one = max(pair, key=lambda r: r["one_worker"]["rps"])
        best_two = max(pair, key=lambda r: r["two_workers"]["rps"])
        assert (c["one_worker_rps"], c["one_worker_connections"]) == (
            best_one["one_worker"]["rps"],
            best_one["connections"],
        )
        assert (c["two_workers_rps"], c["two_workers_connections"]) == (
            best_two["two_workers"]["rps"],
            best_two["connections"],
        )
        assert c["speedup"] == c["two_workers_rps"] / c["one_worker_rps"] and c["errors"] is False
    text = (tmp_path / "workers.md").read_text()
    assert "| impression | sqlite | 256 | 2 workers |" in text, "the CPU table"
    assert "| impression | sqlite | " in text.split("Each connection count:")[0], "the capacity table"
