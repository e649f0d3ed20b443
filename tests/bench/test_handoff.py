"""`python -m bench.handoff` runs end to end, and its variants parse as documented.

Like the other benchmark smoke tests it checks that the table is whole and the rates are real, never a ratio.
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
from pathlib import Path

import pytest
from bench.handoff import parse_variants

from tests.bench.test_bench_smoke import REPO, require_wrk


def test_variants_parse_writer_microseconds_and_fsync_after_the_bare_app() -> None:
    variants = parse_variants("0, 12.5+fsync")
    assert [(v.fire_us, v.fsync) for v in variants] == [(None, False), (0.0, False), (12.5, True)]
    assert variants[0].name == "bare app"


@pytest.mark.parametrize("raw", ["-1", "5+sync", "x"])
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


@pytest.mark.timeout(300)
def test_quick_run_prints_and_writes_a_row_per_server(tmp_path: Path) -> None:
    require_wrk()
    command = [
        sys.executable,
        "-m",
        "bench.handoff",
        "--quick",
        "--variants",
        "0+fsync",
        "--out",
        str(tmp_path),
    ]
    out = subprocess.run(command, cwd=REPO, capture_output=True, text=True, timeout=240, check=False)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    written = (tmp_path / "handoff.md").read_text()
    rows = re.findall(r"^\| (bare app|hand-off[^|]*) \| ([\d,]+) \| ([\d.]+) \|", written, re.M)
    assert [name.strip() for name, _, _ in rows] == [
        "bare app",
        "hand-off, writer 0 µs/pixel + fdatasync per batch",
    ]
    assert all(int(rps.replace(",", "")) > 0 for _, rps, _ in rows), written
    writer_cpu = re.search(r"fdatasync per batch \|(?: [^|]+ \|){5} ([\d.]+) \|", written)
    assert writer_cpu is not None and float(writer_cpu.group(1)) > 0, written
