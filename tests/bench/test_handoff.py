"""`python -m bench.handoff` runs end to end, and its variants parse as documented.

Like the other benchmark smoke tests it checks that the table is whole and the rates are real, never a ratio.
"""

from __future__ import annotations

import argparse
import re
from pathlib import Path

import pytest
from bench.handoff import parse_variants

from tests.bench.test_bench_smoke import require_wrk, run_bench


def test_variants_parse_writer_microseconds_and_fsync_after_the_bare_app() -> None:
    variants = parse_variants("0, 12.5+fsync")
    assert [(v.fire_us, v.fsync) for v in variants] == [(None, False), (0.0, False), (12.5, True)]
    assert variants[0].name == "bare app"


def test_the_thread_flag_puts_the_hand_off_in_the_worker_in_either_order() -> None:
    _, both, reversed_, alone = parse_variants("0+fsync+thread,0+thread+fsync,3+thread")
    assert (both.fsync, both.in_worker) == (reversed_.fsync, reversed_.in_worker) == (True, True)
    assert (alone.fire_us, alone.fsync, alone.in_worker) == (3.0, False, True)
    assert both.name == "hand-off, worker thread 0 µs/pixel + fdatasync per batch"
    assert both.launch(8123)[1]["BENCH_HANDOFF_IN_WORKER"] == "1"
    assert parse_variants("0")[1].launch(8123)[1]["BENCH_HANDOFF_IN_WORKER"] == "0"


@pytest.mark.parametrize("raw", ["-1", "5+sync", "x", "0+fsync+proc"])
def test_a_malformed_variant_is_refused(raw: str) -> None:
    with pytest.raises((argparse.ArgumentTypeError, ValueError)):
        parse_variants(raw)


def test_a_hand_off_variant_runs_the_hand_off_app_with_its_writer_settings() -> None:
    bare, handoff = parse_variants("7+fsync")
    bare_command, bare_env = bare.launch(8123)
    command, env = handoff.launch(8123)
    assert "bench.bare_app:app" in bare_command and "BENCH_HANDOFF_FIRE_US" not in bare_env
    assert "bench.handoff_app:app" in command
    assert (env["BENCH_HANDOFF_FIRE_US"], env["BENCH_HANDOFF_FSYNC"]) == ("7.0", "1")


@pytest.mark.timeout(900)
def test_quick_run_prints_and_writes_a_row_per_server(tmp_path: Path) -> None:
    require_wrk()
    run_bench(
        *("bench.handoff", "--quick", "--variants", "0+fsync,0+fsync+thread", "--out", str(tmp_path)),
        timeout=840,
    )
    written = (tmp_path / "handoff.md").read_text()
    rows = re.findall(r"^\| (bare app|hand-off[^|]*) \| ([\d,]+) \| ([\d.]+) \|", written, re.M)
    assert [name.strip() for name, _, _ in rows] == [
        "bare app",
        "hand-off, writer 0 µs/pixel + fdatasync per batch",
        "hand-off, worker thread 0 µs/pixel + fdatasync per batch",
    ]
    assert all(int(rps.replace(",", "")) > 0 for _, rps, _ in rows), written
    writer_cpu = re.search(r"fdatasync per batch \|(?: [^|]+ \|){5} ([\d.]+) \|", written)
    assert writer_cpu is not None and float(writer_cpu.group(1)) > 0, written
