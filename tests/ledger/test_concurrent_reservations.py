"""Many concurrent requests, several workers and several processes on one database: no counter ever passes
its cap, at any commit, and every counter holds exactly what the stored ad requests account for.

A watcher reads the committed counters over and over while the load runs, so a commit that broke the cap
even for a moment would be seen, not only the final state. The workload is seeded and bounded: issues of
three campaigns (lifetime cap with even pacing, a daily impressions cap, frequency per screen and hour,
competitive separation, and one campaign without any), impressions and quartiles, early releases, releases
after expiry, no-fills and expiry sweeps, interleaved by the group committers of several stores.
"""

from __future__ import annotations

import asyncio
import collections
import multiprocessing
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from multiprocessing import Queue

import pytest

from tests.ledger.stores import LedgerDatabase, check_accounting, over_cap, run_workload_process, workload


@contextmanager
def watching(db: LedgerDatabase) -> Iterator[Callable[[], list[tuple[str, int, int, int]]]]:
    """Check the committed counters continuously while the body runs; yields what it saw over a cap."""
    seen: list[tuple[str, int, int, int]] = []
    reads = 0
    stop = threading.Event()

    def watch() -> None:
        nonlocal reads
        while not stop.is_set():
            seen.extend(over_cap(db.engine))
            reads += 1
            time.sleep(0.002)

    thread = threading.Thread(target=watch, daemon=True)
    thread.start()
    try:
        yield lambda: seen
    finally:
        stop.set()
        thread.join(timeout=30)
    assert reads > 3, "the watcher did not get to read while the load ran"


EXERCISED = {
    "issued",
    "paced",
    "frequency",
    "separation",
    "impression counted",
    "impression duplicate",
    "release released",
    "release played",
    "settled",
}
"""What every run must have gone through, or it proved less than it claims."""


@pytest.mark.parametrize("seed", [20261122, 7, 99])
def test_concurrent_workers_never_pass_a_cap_and_account_exactly(db: LedgerDatabase, seed: int) -> None:
    with watching(db) as seen:
        outcomes = asyncio.run(workload(db.env, seed, workers=3, tasks=4, operations=90))
    assert seen() == []
    assert check_accounting(db) > 100
    assert set(outcomes) >= EXERCISED | {"cap_reached"}, outcomes


def test_worker_processes_on_one_database_never_pass_a_cap_and_account_exactly(db: LedgerDatabase) -> None:
    spawn = multiprocessing.get_context("spawn")
    results: Queue[dict[str, int]] = spawn.Queue()
    processes = [
        spawn.Process(target=run_workload_process, args=(db.env, seed, results)) for seed in (11, 12)
    ]
    with watching(db) as seen:
        for process in processes:
            process.start()
        outcomes = collections.Counter(results.get(timeout=240)) + collections.Counter(
            results.get(timeout=240)
        )
        for process in processes:
            process.join(timeout=60)
    assert [p.exitcode for p in processes] == [0, 0]
    assert seen() == []
    assert check_accounting(db) > 100
    assert set(outcomes) >= EXERCISED, outcomes
