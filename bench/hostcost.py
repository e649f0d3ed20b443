"""What the machine charges for what a durable pixel cannot avoid: a disk flush, and CPU the host takes back.

Sessions run on different virtual machines, and the same code's pixel ratios moved 0.55-0.72 between them:
a flush cost 79 µs on one and 293 µs (121 µs of CPU) on the next. Every report now states both figures in its
header, so two reports can be told apart by their machines before their code is compared.
"""

from __future__ import annotations

import os
import statistics
import tempfile
import time
from pathlib import Path

import msgspec

APPEND_BYTES = 16 * 1024
"""About one batch's WAL frames: a few 4 KiB pages, as a pixel batch's commit appends."""
SYNCS = 200
"""Enough for a p99; about 0.1 s where a flush costs 300 µs, and bounded whatever the disk."""


class SyncCost(msgspec.Struct):
    """An append and fdatasync of APPEND_BYTES to a fresh file: wall-time p50 and p99, and CPU per call."""

    p50_us: float
    p99_us: float
    cpu_us: float


def sync_cost(directory: Path | None = None, count: int = SYNCS) -> SyncCost | None:
    """Time `count` appends + fdatasync in `directory` (the system's temporary directory, where the benchmark
    keeps its SQLite databases, by default); None where the file cannot be written."""
    payload = b"\0" * APPEND_BYTES
    waits: list[float] = []
    try:
        with tempfile.NamedTemporaryFile(dir=directory, prefix="adslot-bench-sync-") as file:
            fd = file.fileno()
            cpu_start = time.process_time()
            for _ in range(count):
                os.write(fd, payload)
                start = time.perf_counter()
                os.fdatasync(fd)
                waits.append(time.perf_counter() - start)
            cpu = time.process_time() - cpu_start
    except OSError:
        return None
    cuts = statistics.quantiles(waits, n=100, method="inclusive")
    return SyncCost(
        p50_us=round(statistics.median(waits) * 1e6, 1),
        p99_us=round(cuts[98] * 1e6, 1),
        cpu_us=round(cpu / count * 1e6, 1),
    )


def cpu_ticks() -> list[int]:
    """/proc/stat's first line: the whole machine's CPU ticks since boot, user nice system idle iowait irq
    softirq steal (guest time is inside user); [] without it."""
    try:
        with open("/proc/stat") as stat:
            ticks = [int(t) for t in stat.readline().split()[1:]]
    except OSError:
        return []
    return ticks[:8] if len(ticks) >= 8 else []


def steal_ticks() -> tuple[int, int]:
    """(steal, all) CPU ticks since boot; (0, 0) without /proc/stat."""
    ticks = cpu_ticks()
    return (ticks[7], sum(ticks)) if ticks else (0, 0)


def steal_share(start: tuple[int, int], end: tuple[int, int]) -> float | None:
    """The share of all CPUs' time the hypervisor gave to other guests between two steal_ticks() readings;
    None when no time passed or there was nothing to read."""
    elapsed = end[1] - start[1]
    return (end[0] - start[0]) / elapsed if elapsed > 0 else None
