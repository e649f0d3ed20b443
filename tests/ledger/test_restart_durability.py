"""Everything acknowledged before a crash is found after a restart: the write path commits before answering.

The server runs as a real `adslot serve` process, set up through the CLI, and is killed with SIGKILL while
a client is sending ad requests and impressions.
"""

from __future__ import annotations

import random
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

import httpx
import sqlalchemy as sa

from adslot.api.proof_of_play import record_view
from adslot.ledger.records import AdRequest
from adslot.settings import Settings
from adslot.storage.database import make_engine
from adslot.storage.tables import ad_requests
from tests.served import Server


@dataclass
class Acked:
    """What the server acknowledged: ad request uuids and, per uuid, the result of its impression fires."""

    requests: list[str] = field(default_factory=list)
    impressions: dict[str, list[str]] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)


def load_until_killed(server: Server, key: str, acked: Acked, kill_after: float, min_new: int = 10) -> None:
    """Eight players request ads and fire impressions (some twice) until the server is SIGKILLed.

    The kill comes `kill_after` seconds after at least `min_new` ad requests were acknowledged, so that every
    round kills a server under load however slow the machine is.
    """
    stop = threading.Event()
    before = len(acked.requests)

    def player(seed: int) -> None:
        rng = random.Random(seed)
        with httpx.Client(timeout=5) as client:
            for _ in range(2000):  # bounded
                if stop.is_set():
                    return
                try:
                    r = client.post(
                        f"{server.url}/api/v1/ad/request",
                        headers={"Ssp-Key": key},
                        json={"venue_id": "lobby", "play_time": int(time.time()) + 30},
                    )
                    if r.status_code != 200:
                        continue
                    uuid = r.json()["data"]["ad_request_uuid"]
                    with acked.lock:
                        acked.requests.append(uuid)
                    for _ in range(rng.choice((1, 1, 2))):
                        p = client.get(f"{server.url}/api/v1/ad/callback/?ad_request_uuid={uuid}")
                        if p.status_code == 200:
                            with acked.lock:
                                acked.impressions.setdefault(uuid, []).append(p.json()["data"]["result"])
                except httpx.TransportError:
                    return

    with ThreadPoolExecutor(8) as pool:
        futures = [pool.submit(player, seed) for seed in range(8)]
        deadline = time.monotonic() + 60
        while len(acked.requests) - before < min_new and time.monotonic() < deadline:
            time.sleep(0.01)
        time.sleep(kill_after)
        server.kill()
        stop.set()
        for f in futures:
            f.result()


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


def records_via_api(server: Server, key: str, uuids: list[str]) -> dict[str, dict[str, Any]]:
    found: dict[str, dict[str, Any]] = {}
    with httpx.Client(timeout=10) as client:
        for uuid in uuids:
            r = client.get(f"{server.url}/api/v1/ad/request/{uuid}", headers={"Ssp-Key": key})
            if r.status_code == 200:
                found[uuid] = r.json()["data"]
    return found


def records_in_database(settings: Settings) -> dict[str, dict[str, Any]]:
    """Read what is on disk after the last kill, as the record API would show it."""
    engine = make_engine(settings.environment("production"))
    with engine.connect() as conn:
        rows = conn.execute(sa.select(ad_requests)).mappings().all()
    engine.dispose()
    now = int(time.time())
    return {
        str(row["id"]): record_view(AdRequest(**{str(k): v for k, v in row.items()}), now) for row in rows
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
