"""The profiler runs end to end: `python -m bench.profile` prints per-request buckets for worker and writer.

Like the benchmark's smoke test it checks only that the tables (the sampled budget and the CPU per process
from /proc) are whole and non-empty, never a figure.
"""

from __future__ import annotations

import re

import pytest

from tests.bench.test_bench_smoke import require_wrk, run_bench


@pytest.mark.timeout(900)
def test_profile_prints_a_microsecond_budget_for_the_worker_and_its_ledger_writer() -> None:
    require_wrk()
    stdout = run_bench("bench.profile", "--scenario", "impression", "--seconds", "2", timeout=840)
    assert re.search(r"### impression: adslot \(SQLite, 1 worker\), [\d,]+ req/s", stdout)
    for title in ("worker thread, GIL held", "ledger writer process, busy"):
        assert title in stdout
    totals = [float(t) for t in re.findall(r"\| \*\*total\*\* \| \*\*([\d.]+)\*\* \|", stdout)]
    assert len(totals) == 2 and all(t > 0 for t in totals), stdout
    assert "uvicorn: socket writes" in stdout
    cpu = re.findall(
        r"\| (uvicorn worker|ledger writer|wrk, the load generator) \| ([\d.]+) \| ([\d.]+) \|", stdout
    )
    assert [name for name, _, _ in cpu] == ["uvicorn worker", "ledger writer", "wrk, the load generator"]
    assert all(float(user) > 0 for _, user, _ in cpu), stdout
    assert re.search(r"\| \*\*server, all processes\*\* \| \| \| \*\*[\d.]+\*\* \|", stdout)
