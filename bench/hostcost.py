"""What the machine charges for what a durable pixel cannot avoid: a disk flush, and CPU the host takes back.

A durable pixel pays for a flush per batch and shares the CPUs, so these two figures account for most of
why the same code's pixel ratios differ between virtual machines (a flush costs tens of µs on one and
hundreds, much of it CPU, on another). Every report states both in its header, so two reports can be told
apart by their machines before their code is compared.
"""

from __future__ import annotations

import os
import statistics
import tempfile
import threading
import time
from pathlib import Path
from typing import IO

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
    p50, p99 = _p50_p99(waits)
    return SyncCost(p50_us=p50, p99_us=p99, cpu_us=round(cpu / count * 1e6, 1))


def _p50_p99(waits: list[float]) -> tuple[float, float]:
    """Median and 99th percentile of `waits` (seconds, at least two), in µs."""
    cuts = statistics.quantiles(waits, n=100, method="inclusive")
    return round(statistics.median(waits) * 1e6, 1), round(cuts[98] * 1e6, 1)


PROBE_INTERVAL_S = 0.05
"""How often SyncProbe flushes: 20 a second, against the hundreds a durable server makes under load."""


class SyncProbe:
    """The disk's flush latency while a run goes on: every PROBE_INTERVAL_S a thread rewrites APPEND_BYTES at
    the start of a file and fdatasyncs it (an overwrite, as a recycled WAL is written: no metadata to sync).

    sync_cost() measures an idle disk before the run; a durable server's p99 at half load is made of the
    flushes that stall during it, when the kernel writes back what the databases dirtied or the host's disk is
    busy elsewhere. A flush of its own beside the servers shows whether the disk stalled in a run, in the bare
    app's runs (which write nothing) as in adslot's. Used as a context manager; summary() after it."""

    def __init__(self, directory: Path | None = None, interval_s: float = PROBE_INTERVAL_S) -> None:
        self._directory = directory
        self._interval = interval_s
        self._waits: list[float] = []
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._file: IO[bytes] | None = None

    def __enter__(self) -> SyncProbe:
        try:
            self._file = tempfile.NamedTemporaryFile(dir=self._directory, prefix="adslot-bench-probe-")
            os.pwrite(self._file.fileno(), b"\0" * APPEND_BYTES, 0)
            os.fdatasync(self._file.fileno())
        except OSError:
            self._close()
            return self  # nothing to probe: summary() is empty
        self._thread = threading.Thread(target=self._run, name="bench-sync-probe", daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        self._close()

    def _close(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None

    def _run(self) -> None:
        assert self._file is not None
        fd = self._file.fileno()
        payload = b"\1" * APPEND_BYTES
        while not self._stop.wait(self._interval):
            try:
                os.pwrite(fd, payload, 0)
                start = time.perf_counter()
                os.fdatasync(fd)
            except OSError:
                return
            self._waits.append(time.perf_counter() - start)

    def summary(self) -> dict[str, float]:
        """Flushes timed, and their p50, p99 and longest in µs; empty with fewer than two flushes."""
        waits = self._waits
        if len(waits) < 2:
            return {}
        p50, p99 = _p50_p99(waits)
        return {"syncs": len(waits), "p50_us": p50, "p99_us": p99, "max_us": round(max(waits) * 1e6, 1)}


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
