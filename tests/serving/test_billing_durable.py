"""The billing notice outbox survives a SIGKILL: an impression acknowledged just before the kill is billed
once, by the restarted server."""

from __future__ import annotations

import time
from typing import Any

import httpx

from tests.conftest import eventually, play_time
from tests.demand.test_bidder import running
from tests.served import Server, cli


def test_an_impression_acknowledged_before_a_sigkill_is_billed_once_after_the_restart(served: Any) -> None:
    server, key, _ = served
    assert isinstance(server, Server)
    # A pass every 5 s, and one at start: the kill below comes long before the pass after the impression.
    server.environ["ADSLOT_DEMAND_BILLING_INTERVAL_MS"] = "5000"
    with running(price_cpm=2.5, seed=3) as bidder:
        cli(
            server.environ,
            "demand",
            "add",
            "--env",
            "production",
            "--name",
            "dsp",
            "--endpoint",
            f"{bidder.base_url}/openrtb2/auction",
            "--venues",
            "lobby",
            "--auto-approve",
            "--timeout-ms",
            "500",
        )
        server.start()
        answer = httpx.post(
            f"{server.url}/api/v1/ad/request",
            headers={"Ssp-Key": key},
            json={"venue_id": "lobby", "play_time": play_time()},
            timeout=10,
        )
        assert answer.status_code == 200, answer.text
        ident = answer.json()["data"]["ad_request_uuid"]
        record = httpx.get(f"{server.url}/api/v1/ad/request/{ident}", headers={"Ssp-Key": key}).json()["data"]
        assert record["source"] == "programmatic"
        fired = httpx.get(f"{server.url}/api/v1/ad/callback", params={"ad_request_uuid": ident}, timeout=10)
        assert fired.status_code in (200, 204)
        server.kill()
        assert not [e for e in bidder.get("/log").json() if e["kind"] == "bill"]
        server.start()
        assert eventually(lambda: any(e["kind"] == "bill" for e in bidder.get("/log").json()), timeout=10)
        time.sleep(1.0)
        bills = [e for e in bidder.get("/log").json() if e["kind"] == "bill"]
        assert len(bills) == 1
        assert bills[0]["query"]["price"] == "2.5"
        server.terminate()
