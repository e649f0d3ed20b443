"""The nodes benchmark runs end to end: `python -m bench.nodes --quick` drives 1, 2 and 3 nodes on one
PostgreSQL and writes a complete report.

It asserts that the report is whole, the rates and CPU figures real and every pixel a first fire counted in
the shared database, never a speedup: how the nodes scale belongs to the report, not to a pass/fail test on a
shared machine.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.bench.test_bench_smoke import require_wrk, run_bench
from tests.conftest import require_postgres


@pytest.mark.postgres
@pytest.mark.timeout(1200)
def test_quick_run_of_one_two_and_three_nodes_writes_a_complete_report(tmp_path: Path) -> None:
    require_wrk()
    url = require_postgres()
    run_bench(
        *("bench.nodes", "--quick", "--duration", "1", "--scenarios", "ad_request_json,impression"),
        *("--postgres", url, "--out", str(tmp_path)),
        timeout=1140,
    )

    report = json.loads((tmp_path / "nodes.json").read_text())
    assert (tmp_path / "nodes.md").read_text().startswith("# adslot: 1, 2 and 3 nodes on one PostgreSQL")
    assert report["machine"]["command"].startswith("python -m bench.nodes --quick")
    assert report["status"] == "ran"
    config = report["config"]
    assert config["nodes"] == [1, 2, 3] and config["rounds"] == 1 and config["duration_s"] == 1
    rows = report["rows"]
    assert [(r["scenario"], r["nodes"]) for r in rows] == [
        ("ad_request_json", 1),
        ("ad_request_json", 2),
        ("ad_request_json", 3),
        ("impression", 1),
        ("impression", 2),
        ("impression", 3),
    ]
    for row in rows:
        assert row["errors"] == 0, row
        assert row["connections_per_node"] == 96 // row["nodes"]
        (run,) = row["runs"]
        assert [n["node"] for n in run["nodes"]] == list(range(1, row["nodes"] + 1)), "one wrk per node"
        assert all(n["rps"] > 0 and n["cpu_us"] > 0 for n in run["nodes"]), run["nodes"]
        assert run["rps"] == pytest.approx(sum(n["rps"] for n in run["nodes"]))
        assert row["node_cpu_us"] > 0 and row["postgres_cpu_us"] > 0 and row["wrk_cpu_us"] > 0, row
        assert run["commits"] > 0 and row["postgres_cpu_us_per_commit"] > 0
        assert 0 < row["cpu_busy"] <= 1
    runs = [run for row in rows if row["scenario"] == "impression" for run in row["runs"]]
    fired = sum(run["requests"] for run in runs)
    pop = rows[3]["proof_of_play"]
    assert pop["duplicate"] == 0, "each node fires on its own freshly minted list"
    # wrk counts the answers it read; a run's last fires, answered as it stopped, are counted but not read.
    assert fired <= pop["counted"] <= fired + 96 * len(runs), "every impression counted once"
    text = (tmp_path / "nodes.md").read_text()
    assert "| impression | 3 | 32 |" in text
    assert "one PostgreSQL core carries" in text, "the on-paper capacity note"
