"""The profiler runs end to end: `python -m bench.profile` prints per-request buckets for worker and writer.

Like the benchmark's smoke test it checks only that the tables (the sampled budget and the CPU per process
from /proc) are whole and non-empty, never a figure.
"""

from __future__ import annotations

import re
import subprocess
import sys

import pytest

from tests.bench.test_bench_smoke import REPO, require_wrk


@pytest.mark.timeout(300)
def test_profile_prints_a_microsecond_budget_for_the_worker_and_its_ledger_writer() -> None:
    require_wrk()
    command = [sys.executable, "-m", "bench.profile", "--scenario", "impression", "--seconds", "2"]
    out = subprocess.run(command, cwd=REPO, capture_output=True, text=True, timeout=240, check=False)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    assert re.search(r"### impression: adslot \(SQLite, 1 worker\), [\d,]+ req/s", out.stdout)
    for title in ("worker thread, GIL held", "ledger writer process, busy"):
        assert title in out.stdout
    totals = [float(t) for t in re.findall(r"\| \*\*total\*\* \| \*\*([\d.]+)\*\* \|", out.stdout)]
    assert len(totals) == 2 and all(t > 0 for t in totals), out.stdout
    assert "uvicorn: socket writes" in out.stdout
    cpu = re.findall(
        r"\| (uvicorn worker|ledger writer|wrk, the load generator) \| ([\d.]+) \| ([\d.]+) \|", out.stdout
    )
    assert [name for name, _, _ in cpu] == ["uvicorn worker", "ledger writer", "wrk, the load generator"]
    assert all(float(user) > 0 for _, user, _ in cpu), out.stdout
    assert re.search(r"\| \*\*server, all processes\*\* \| \| \| \*\*[\d.]+\*\* \|", out.stdout)
