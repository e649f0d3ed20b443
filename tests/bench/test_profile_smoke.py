"""The profiler runs end to end: `python -m bench.profile` prints per-request buckets for worker and writer.

Like the benchmark's smoke test it checks only that the tables (the sampled budget and the CPU per process
from /proc) are whole and non-empty, never a figure.
"""

from __future__ import annotations

import re
from pathlib import Path

import psycopg
import pytest
from bench.profile import WORKER_BUCKETS, _bucket

from tests.bench.test_bench_smoke import require_wrk, run_bench
from tests.conftest import require_postgres


@pytest.mark.timeout(900)
def test_profile_prints_a_microsecond_budget_for_the_worker_and_its_ledger_writer_and_keeps_its_stacks(
    tmp_path: Path,
) -> None:
    require_wrk()
    kept = tmp_path / "kept"
    stdout = run_bench(
        "bench.profile", "--scenario", "impression", "--seconds", "2", "--keep", str(kept), timeout=840
    )
    # --keep leaves py-spy's raw stacks ("frames count" lines) for a look below the buckets.
    for name in ("worker.txt", "writer.txt"):
        lines = (kept / name).read_text().splitlines()
        assert lines and all(re.fullmatch(r".+ \d+", line) for line in lines), name
    assert re.search(r"### impression: adslot \(SQLite, 1 worker\), [\d,]+ req/s", stdout)
    for title in ("worker thread, GIL held", "ledger writer process, busy"):
        assert title in stdout
    totals = [float(t) for t in re.findall(r"\| \*\*total\*\* \| \*\*([\d.]+)\*\* \|", stdout)]
    assert len(totals) == 2 and all(t > 0 for t in totals), stdout
    # `adslot serve` answers pixels from its HTTP protocol's lane: their socket writes are sampled there.
    assert "protocol lane: the answer's one socket write" in stdout
    cpu = re.findall(
        r"\| (uvicorn worker|ledger writer|wrk, the load generator) \| ([\d.]+) \| ([\d.]+) \|", stdout
    )
    assert [name for name, _, _ in cpu] == ["uvicorn worker", "ledger writer", "wrk, the load generator"]
    assert all(float(user) > 0 for _, user, _ in cpu), stdout
    assert re.search(r"\| \*\*server, all processes\*\* \| \| \| \*\*[\d.]+\*\* \|", stdout)


@pytest.mark.timeout(900)
def test_profile_on_postgresql_adds_the_server_and_the_workers_own_batches_and_drops_its_schemas() -> None:
    require_wrk()
    url = require_postgres()
    before = _bench_schemas(url)
    stdout = run_bench(
        "bench.profile", "--scenario", "impression", "--seconds", "2", "--postgres", url, timeout=840
    )
    assert re.search(r"### impression: adslot \(PostgreSQL, 1 worker\), [\d,]+ req/s", stdout)
    worker = stdout.split("| worker thread, GIL held", 1)[1].split("| **total**", 1)[0]
    assert re.search(r"\| asyncpg: statements out, rows in \(PostgreSQL\) \| [\d.]+ \|", worker), stdout
    assert "ledger writer process" not in stdout, "PostgreSQL's batches are the worker's own"
    cpu = dict(
        re.findall(
            r"\| (PostgreSQL server processes|ledger writer|uvicorn worker) "
            r"\| [\d.]+ \| [\d.]+ \| ([\d.]+) \|",
            stdout,
        )
    )
    assert set(cpu) == {"PostgreSQL server processes", "uvicorn worker"}, stdout
    assert all(float(total) > 0 for total in cpu.values()), stdout
    assert _bench_schemas(url) == before


def _bench_schemas(url: str) -> set[str]:
    with psycopg.connect(url) as conn:
        rows = conn.execute("SELECT nspname FROM pg_namespace WHERE nspname LIKE 'bench_%'").fetchall()
    return {row[0] for row in rows}


def test_a_sample_in_the_lanes_answer_write_goes_to_its_own_bucket() -> None:
    leaves = (
        "AdslotHttpProtocol._respond (adslot/api/protocol.py:250)",
        "AdslotHttpProtocol._answer (adslot/api/protocol.py:9)",
    )
    for leaf in leaves:
        stack = ["Runner.run (asyncio/runners.py:118)", leaf]
        assert _bucket(stack, WORKER_BUCKETS, worker=True) == "protocol lane: the answer's one socket write"
