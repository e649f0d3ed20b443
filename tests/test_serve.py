"""`adslot serve` as operators run it: graceful SIGTERM and several worker processes on one database."""

from __future__ import annotations

import signal
import time
from concurrent.futures import ThreadPoolExecutor

import httpx

from adslot.settings import Settings
from tests.served import Acked, Server, load_until, records_via_api


def test_sigterm_drains_in_flight_writes_and_exits_cleanly(served: tuple[Server, str, Settings]) -> None:
    server, key, _ = served
    server.start()
    acked = Acked()
    code = load_until(server, key, acked, server.terminate, min_new=20)
    assert code in (0, -signal.SIGTERM), f"adslot exited with {code} on SIGTERM"
    assert server.clean_stops() == 1, "the ledger was not drained before exit"
    server.start()
    found = records_via_api(server, key, acked.requests)
    missing = [u for u in acked.requests if u not in found]
    assert not missing, f"{len(missing)} acknowledged ad requests lost on SIGTERM"
    server.terminate()


def test_two_workers_share_one_database_and_count_each_event_once(
    served: tuple[Server, str, Settings],
) -> None:
    server, key, _ = served
    server.start(workers=2)
    uuids: list[str] = []
    for _ in range(40):  # a new connection each time spreads requests over both workers
        r = httpx.post(
            f"{server.url}/api/v1/ad/request",
            headers={"Ssp-Key": key},
            json={"venue_id": "lobby", "play_time": int(time.time()) + 30},
        )
        assert r.status_code == 200
        uuids.append(r.json()["data"]["ad_request_uuid"])

    def fire(uuid: str) -> list[str]:
        return [
            httpx.get(f"{server.url}/api/v1/ad/callback/?ad_request_uuid={uuid}").json()["data"]["result"]
            for _ in range(3)
        ]

    with ThreadPoolExecutor(8) as pool:
        results = list(pool.map(fire, uuids))
    for uuid, fired in zip(uuids, results, strict=True):
        assert sorted(fired) == ["counted", "duplicate", "duplicate"], uuid
        record = httpx.get(f"{server.url}/api/v1/ad/request/{uuid}", headers={"Ssp-Key": key}).json()["data"]
        assert record["state"] == "played" and record["duplicate_count"] == 2
    assert server.terminate() in (0, -signal.SIGTERM)
    assert server.clean_stops() == 2, "both workers must drain and stop cleanly"
