"""Everything acknowledged before a crash is found after a restart: the write path commits before answering.

The server runs as a real `adslot serve` process, set up through the CLI, and is killed with SIGKILL while
a client is sending ad requests and impressions.
"""

from __future__ import annotations

import os
import random
import signal
import time
from collections.abc import Callable
from typing import Any

import pytest
import sqlalchemy as sa

from adslot.api.proof_of_play import record_view
from adslot.ledger.records import COLUMNS, FIRE_BITS, AdRequest
from adslot.settings import Settings
from adslot.storage.database import as_dict, make_engine
from adslot.storage.tables import ad_requests
from tests.served import Acked, Server, load_until, records_via_api


def load_until_killed(server: Server, key: str, acked: Acked, kill_after: float) -> None:
    """Load the server; `kill_after` seconds after 10 new acknowledged ad requests, SIGKILL it."""

    def kill() -> None:
        time.sleep(kill_after)
        server.kill()

    load_until(server, key, acked, kill, min_new=10)


def check_consistent(records: dict[str, dict[str, Any]], acked: Acked) -> None:
    """Every acknowledged write is found, none counted twice, and each record's state matches its events."""
    for uuid in acked.requests:
        assert uuid in records, f"acknowledged ad request {uuid} lost"
        data = records[uuid]
        results = acked.impressions.get(uuid, [])
        assert results.count("counted") <= 1, f"{uuid} impression counted twice"
        if results:
            assert data["events"]["impression"] is not None, f"acknowledged impression of {uuid} lost"
            assert data["duplicate_count"] >= results.count("duplicate")
        assert (data["state"] == "played") == (data["events"]["impression"] is not None)


def records_in_database(settings: Settings) -> dict[str, dict[str, Any]]:
    """Read what is on disk after the last kill, as the record API would show it; each stored impression
    time must come with its stored fire's bit, and no bit without the time (one UPDATE writes both)."""
    engine = make_engine(settings.environment("production"))
    with engine.connect() as conn:
        rows = conn.execute(sa.select(ad_requests)).mappings().all()
    engine.dispose()
    now = int(time.time())
    impression = FIRE_BITS["impression", "wrapper"] | FIRE_BITS["impression", "inline"]
    for row in rows:
        assert (row["impression_at"] is not None) == bool(row["fired"] & impression), dict(row)
    return {
        str(row["id"]): record_view(AdRequest(**{c: v for c, v in as_dict(row).items() if c in COLUMNS}), now)
        for row in rows
    }


def test_acknowledged_requests_and_impressions_survive_sigkill_and_restart(
    served: tuple[Server, str, Settings],
) -> None:
    server, key, _ = served
    acked = Acked()
    server.start()
    load_until_killed(server, key, acked, kill_after=1.5)
    assert len(acked.requests) > 20, "the load did not get going before the kill"
    server.start()
    check_consistent(records_via_api(server, key, acked.requests), acked)
    server.kill()


def test_ten_sigkills_at_random_moments_lose_and_double_count_nothing(
    served: tuple[Server, str, Settings],
) -> None:
    server, key, settings = served
    acked = Acked()
    rng = random.Random(20261122)
    for _ in range(10):
        server.start()
        load_until_killed(server, key, acked, kill_after=rng.uniform(0.0, 1.0))
    assert len(acked.requests) >= 100
    assert any(len(v) > 1 for v in acked.impressions.values()), "no repeated fire was exercised"
    check_consistent(records_in_database(settings), acked)


def kill_five_times_under_two_workers(
    served: tuple[Server, str, Settings], seed: int, victim: Callable[[random.Random], int]
) -> None:
    """Five rounds of load on `adslot serve --workers 2`, each ending in a SIGKILL of the process `victim`
    picks, at a random moment; then every acknowledged write is found once and the state is consistent.
    Each round starts once both workers answer, none of them killed (a worker started again listens before
    it serves, and a player whose connection lands there gives up), and needs 10 new acknowledged ad
    requests, so whatever was killed before has been replaced and is serving."""
    server, key, settings = served
    acked = Acked()
    rng = random.Random(seed)
    server.start(workers=2)
    killed: list[int] = []

    def kill() -> None:
        time.sleep(rng.uniform(0.0, 0.5))
        pid = victim(rng)
        os.kill(pid, signal.SIGKILL)
        killed.append(pid)

    for _ in range(5):
        server.wait_serving(2, gone=killed)
        load_until(server, key, acked, kill, min_new=10)
    assert len(set(killed)) == 5, "every round killed a new, live process"
    assert any(len(v) > 1 for v in acked.impressions.values()), "no repeated fire was exercised"
    assert server.terminate() in (0, -signal.SIGTERM)
    check_consistent(records_in_database(settings), acked)


@pytest.mark.parametrize("served", ["sqlite"], indirect=True)  # PostgreSQL's workers write themselves
def test_sigkills_of_the_shared_writer_under_two_workers_lose_and_double_count_nothing(
    served: tuple[Server, str, Settings],
) -> None:
    server = served[0]

    def the_writer(_: random.Random) -> int:
        (pid,) = [pid for pid, command in server.ledger_writers() if command.endswith("production.sock")]
        return pid

    kill_five_times_under_two_workers(served, 20261124, the_writer)


def test_sigkills_of_a_worker_among_two_lose_and_double_count_nothing(
    served: tuple[Server, str, Settings],
) -> None:
    """A worker is SIGKILLed mid-load, five times, and its supervisor starts another: on PostgreSQL each
    worker writes its own batches, so the kill lands in the middle of a worker's group commit (on SQLite,
    in the middle of its frames to the shared writer)."""
    server = served[0]

    def workers() -> list[int]:
        return sorted(pid for pid, command in server.descendants() if "multiprocessing.spawn" in command)

    def a_worker(rng: random.Random) -> int:
        deadline = time.monotonic() + 30
        while len(running := workers()) < 2 and time.monotonic() < deadline:  # the last one's successor
            time.sleep(0.1)
        assert len(running) == 2, running
        return rng.choice(running)

    kill_five_times_under_two_workers(served, 20261202, a_worker)
