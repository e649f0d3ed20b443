"""The benchmark runs end to end: `python -m bench --quick` on one pixel scenario writes a complete report.

It asserts only that the report is whole and the rates are real, never a ratio: throughput belongs to the
benchmark's own report, not to a pass/fail test on a shared machine.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


def require_wrk() -> None:
    if shutil.which("wrk") is None:
        if os.environ.get("CI"):
            pytest.fail("CI must run the benchmark smoke test: install wrk (apt-get install wrk)")
        pytest.skip("the benchmark needs wrk on PATH (apt-get install wrk)")


@pytest.mark.timeout(600)
def test_quick_run_writes_a_complete_report(tmp_path: Path) -> None:
    require_wrk()
    command = [sys.executable, "-m", "bench", "--quick", "--scenarios", "impression", "--no-postgres"]
    out = subprocess.run(
        [*command, "--out", str(tmp_path)], cwd=REPO, capture_output=True, text=True, timeout=540, check=False
    )
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]

    report = json.loads((tmp_path / "latest.json").read_text())
    assert (tmp_path / "latest.md").read_text().startswith("# adslot benchmark")
    machine = report["machine"]
    assert machine["nproc"] >= 1
    assert machine["python"] and machine["command"].startswith("python -m bench")
    assert machine["date"] and machine["git_commit"]
    assert report["config"]["scenarios"] == ["impression"]
    assert report["backends"]["sqlite"] == "ran"
    assert report["backends"]["postgres"].startswith("skipped")

    rows = {(row["scenario"], row["kind"]): row for row in report["rows"]}
    assert set(rows) == {("impression", "max"), ("impression", "half_load")}
    for row in rows.values():
        assert row["backend"] == "sqlite"
        assert row["flags"] == [], row["flags"]
        assert row["ratio"] is not None and row["ratio"] > 0
        for side in ("bare", "adslot"):
            stats = row[side]
            assert stats["rps"] > 0
            assert 0 < stats["p50_us"] <= stats["p99_us"]
            assert stats["errors"] == 0
    assert rows[("impression", "max")]["target"] == ">= 0.7"
    fires = rows[("impression", "max")]["proof_of_play"]
    assert fires["counted"] > 0 and fires["counted"] + fires["duplicate"] > 0, fires
    assert rows[("impression", "half_load")]["target_rps"]["adslot"] > 0
