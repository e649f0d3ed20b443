"""bench/cpu.py reads real processes' CPU from /proc: a busy child shows up in the group it belongs to."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from bench.cpu import cpu_by_pid, cpu_during, descendants, server_groups, used_between
from bench.wrk import WrkResult

pytestmark = pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="needs Linux's /proc")

SPIN = (
    "import sys, time\n"
    "end = time.process_time() + 0.3\n"
    "while time.process_time() < end: pass\n"
    "sys.stdin.read()"
)
"""A child that spends 0.3 s of CPU, then waits for its standard input to close."""
PARENT = f"""
import subprocess, sys
marker = 'adslot.ledger.' + 'writer_process'  # on the child's command line only, not on this one's
a = subprocess.Popen([sys.executable, '-c', {SPIN!r}, marker], stdin=sys.stdin)
b = subprocess.Popen([sys.executable, '-c', 'import sys; sys.stdin.read()', 'worker'], stdin=sys.stdin)
print(a.pid, b.pid, flush=True)
a.wait(); b.wait()
"""


def test_a_server_tree_splits_into_its_ledger_writers_and_the_rest_and_their_cpu_time_is_read() -> None:
    parent = subprocess.Popen(
        [sys.executable, "-c", PARENT], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    try:
        assert parent.stdout is not None
        writer, other = map(int, parent.stdout.readline().split())
        assert sorted(descendants(parent.pid)) == sorted([parent.pid, writer, other])
        groups = server_groups(parent.pid)
        assert groups["ledger writer"] == [writer], "told apart by its command line"
        assert sorted(groups["workers"]) == sorted([parent.pid, other])

        deadline = time.monotonic() + 30
        while sum(cpu_by_pid([writer])[writer]) < 0.25 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert sum(cpu_by_pid([writer])[writer]) >= 0.25, "the spinning child's 0.3 s of CPU shows in /proc"
        assert sum(cpu_by_pid([other])[other]) < 0.25, "the idle one's does not"
        assert cpu_by_pid([2**22 + 1]) == {}, "a process that is gone counts nothing"
    finally:
        if parent.stdin is not None:
            parent.stdin.close()
        parent.wait(timeout=10)


def test_a_process_that_exits_between_the_two_reads_is_left_out_never_subtracted() -> None:
    before = {1: (5.0, 1.0), 2: (100.0, 20.0)}
    after = {1: (5.5, 1.25), 3: (0.5, 0.5)}  # 2 exited (its 120 s are gone), 3 started meanwhile
    assert used_between(before, after) == (0.5, 0.25)


def test_a_group_listed_at_each_end_counts_all_the_cpu_of_a_process_started_in_between() -> None:
    before = {1: (5.0, 1.0), 2: (100.0, 20.0)}
    after = {1: (5.5, 1.25), 3: (0.5, 0.5)}  # 3: a backend a pool opened during the run
    assert used_between(before, after, started=True) == (1.0, 0.75)


def test_cpu_during_lists_a_live_group_again_after_the_run() -> None:
    listed: list[int] = []
    me = os.getpid()

    def pids() -> list[int]:
        listed.append(me)
        return [me]

    def load() -> WrkResult:
        deadline = time.process_time() + 0.1
        while time.process_time() < deadline:
            pass
        return WrkResult(1, 0.05, 20.0, 0, 0, 0, 0, 0, 0, 0.0, 0, {})

    _, used = cpu_during(load, {"live": pids, "fixed": [me]})
    assert len(listed) == 2, "read before and after the run"
    assert sum(used["live"]) >= 0.05 and sum(used["fixed"]) >= 0.05
