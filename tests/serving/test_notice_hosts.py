"""Notices from a real `adslot serve` go only where their partner declared. Bidders on 127.0.0.1 point their
bids' win, loss and billing notices at a fake partner on 127.0.0.2 (another loopback address), which records
what it receives. For partners that did not declare it, it receives nothing, and the demand report (the
CLI's JSON and CSV) counts each notice dropped, per partner and reason; for partners that declared it as a
notice host, it receives each notice once."""

from __future__ import annotations

import csv
import io
import json
import time
import uuid
from typing import Any

import httpx
import sqlalchemy as sa

from adslot.demand.billing import MAX_ATTEMPTS
from adslot.reporting.buckets import HOUR
from adslot.settings import Settings
from adslot.storage.database import make_engine
from adslot.storage.tables import demand_stats, demand_wins
from tests.conftest import eventually, play_time
from tests.demand.test_bidder import running
from tests.served import Server, cli

NOTICES = ("win", "loss", "bill")


def base(client: httpx.Client) -> str:
    return str(client.base_url).rstrip("/")


def add_partner(server: Server, name: str, bidder: httpx.Client, venue: str, *options: str) -> None:
    cli(
        server.environ,
        *("demand", "add", "--env", "production", "--name", name),
        *("--endpoint", f"{base(bidder)}/openrtb2/auction", "--venues", venue),
        *("--auto-approve", "--timeout-ms", "500", *options),
    )


def sell_and_play(server: Server, key: str, settings: Settings, venue: str) -> dict[str, Any]:
    """One ad request on `venue`, sold to a bid, its impression fired: its win row once its billing notice
    was dealt with (sent, or given up)."""
    answer = httpx.post(
        f"{server.url}/api/v1/ad/request",
        headers={"Ssp-Key": key},
        json={"venue_id": venue, "play_time": play_time()},
        timeout=10,
    )
    assert answer.status_code == 200, answer.text
    ident = uuid.UUID(answer.json()["data"]["ad_request_uuid"])
    fired = httpx.get(f"{server.url}/api/v1/ad/callback", params={"ad_request_uuid": str(ident)}, timeout=10)
    assert fired.status_code in (200, 204)

    def settled() -> dict[str, Any] | None:
        engine = make_engine(settings.environment("production"))
        try:
            with engine.connect() as conn:
                row = conn.execute(sa.select(demand_wins).where(demand_wins.c.ad_request_id == ident)).first()
        finally:
            engine.dispose()
        found = dict(row._mapping) if row is not None else None
        if found is None or (found["billed_at"] is None and found["bill_attempts"] < MAX_ATTEMPTS):
            return None
        return found

    assert eventually(lambda: settled() is not None, timeout=15)
    row = settled()
    assert row is not None
    return row


def received(recorder: httpx.Client, since: int) -> list[dict[str, Any]]:
    """The notices the recorder received after its first `since` log entries."""
    return [entry for entry in recorder.get("/log").json()[since:] if entry["kind"] in NOTICES]


def report(server: Server, fmt: str = "json") -> str:
    hour = int(time.time()) // HOUR * HOUR
    span = ("--from", str(hour - HOUR), "--to", str(hour + 2 * HOUR))
    return cli(server.environ, "demand", "report", "--env", "production", *span, "--format", fmt)


def flushed(settings: Settings, partner: str, metric: str) -> bool:
    """Whether the partner's `metric` has reached demand_stats (each worker flushes every few seconds)."""
    engine = make_engine(settings.environment("production"))
    try:
        with engine.connect() as conn:
            found = conn.execute(
                sa.select(demand_stats.c["count"]).where(
                    demand_stats.c.partner == partner, demand_stats.c.metric == metric
                )
            ).first()
    finally:
        engine.dispose()
    return found is not None


def totals(server: Server) -> dict[str, dict[str, Any]]:
    return {total["partner"]: total for total in json.loads(report(server))["totals"]}


def test_notices_go_only_to_declared_hosts_once_each_and_the_others_are_dropped_and_counted(
    served: Any,
) -> None:
    server, key, settings = served
    assert isinstance(server, Server)
    server.environ["ADSLOT_DEMAND_BILLING_INTERVAL_MS"] = "50"
    cli(server.environ, "venues", "add", "--venue-id", "hall", "--name", "Hall")
    with (
        running(host="127.0.0.2", price_cpm=1.0, seed=3) as recorder,
        running(price_cpm=4.2, seed=7, base_url=base(recorder)) as high,
        running(price_cpm=3.0, seed=8, base_url=base(recorder)) as low,
    ):
        declared = base(recorder).removeprefix("http://")
        add_partner(server, "u-high", high, "lobby")
        add_partner(server, "u-low", low, "lobby")
        add_partner(server, "d-high", high, "hall", "--notice-hosts", declared)
        add_partner(server, "d-low", low, "hall", "--notice-hosts", declared)
        server.start()

        # Undeclared: the billing notice is given up at once (never called, never retried), with its fault,
        # and neither the win, the loss nor the billing notice reaches the recorder.
        seen = len(recorder.get("/log").json())
        win = sell_and_play(server, key, settings, "lobby")
        assert win["partner"] == "u-high"
        assert (win["billed_at"], win["bill_error"], win["bill_attempts"]) == (
            None,
            "notice_host",
            MAX_ATTEMPTS,
        )
        time.sleep(1.0)  # win and loss notices leave in the background: give them the time they would take
        assert received(recorder, seen) == []

        # Declared: each notice once.
        seen = len(recorder.get("/log").json())
        win = sell_and_play(server, key, settings, "hall")
        assert win["partner"] == "d-high"
        assert (win["bill_error"], win["bill_attempts"]) == (None, 1) and win["billed_at"] is not None
        assert eventually(lambda: len(received(recorder, seen)) == 3)
        time.sleep(0.5)
        got = {entry["kind"]: entry for entry in received(recorder, seen)}
        assert len(received(recorder, seen)) == 3 and set(got) == set(NOTICES)
        assert got["win"]["query"]["auction"] == got["bill"]["query"]["auction"] == win["auction_id"]
        assert got["loss"]["query"]["reason"] == "102"  # lost to a higher bid

        # The report counts what was dropped, per partner and reason (asks are flushed every few seconds).
        assert eventually(lambda: flushed(settings, "u-low", "notice:notice_host"), timeout=20)
        found = totals(server)
        assert found["u-high"]["notices_dropped"] == 2  # its win and billing notices
        assert found["u-high"]["notice_drops"]["notice_host"] == 2
        assert found["u-low"]["notice_drops"] == {
            "notice_scheme": 0,
            "notice_host": 1,  # its loss notice
            "notice_too_long": 0,
            "notice_userinfo": 0,
            "notice_malformed": 0,
        }
        assert found["d-high"]["notices_dropped"] == found["d-low"]["notices_dropped"] == 0
        rows = list(csv.DictReader(io.StringIO(report(server, "csv"))))
        by_partner: dict[str, int] = {}
        for row in rows:
            by_partner[row["partner"]] = by_partner.get(row["partner"], 0) + int(row["notices_dropped_host"])
        assert by_partner == {"u-high": 2, "u-low": 1, "d-high": 0, "d-low": 0}
        server.terminate()
