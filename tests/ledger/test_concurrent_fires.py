"""Simultaneous duplicate pixels count once: dedupe is atomic in the database, not read-then-write."""

from __future__ import annotations

import asyncio
import uuid as uuid_module

import httpx
import sqlalchemy as sa

from adslot.ledger.records import FIRE_BITS
from adslot.storage.database import make_engine
from adslot.storage.tables import ad_requests
from tests.conftest import PROD_VENUE, LiveServer, play_time


def issue(live: LiveServer) -> str:
    assert live.keys
    response = httpx.post(
        f"{live.url}/api/v1/ad/request",
        headers={"Ssp-Key": live.keys.production},
        json={"venue_id": PROD_VENUE, "play_time": play_time()},
    )
    assert response.status_code == 200
    return str(response.json()["data"]["ad_request_uuid"])


async def fire_together(url: str, count: int) -> list[httpx.Response]:
    limits = httpx.Limits(max_connections=count, max_keepalive_connections=count)
    async with httpx.AsyncClient(limits=limits, timeout=30) as client:
        return list(await asyncio.gather(*(client.get(url) for _ in range(count))))


def test_fifty_simultaneous_identical_impressions_count_exactly_one(live: LiveServer) -> None:
    assert live.keys
    uuid = issue(live)
    responses = asyncio.run(fire_together(f"{live.url}/api/v1/ad/callback/?ad_request_uuid={uuid}", 50))
    assert [r.status_code for r in responses] == [200] * 50
    results = sorted(r.json()["data"]["result"] for r in responses)
    assert results == ["counted"] + ["duplicate"] * 49
    record = httpx.get(
        f"{live.url}/api/v1/ad/request/{uuid}", headers={"Ssp-Key": live.keys.production}
    ).json()
    assert record["data"]["state"] == "played"
    assert record["data"]["duplicate_count"] == 49
    engine = make_engine(live.settings.environment("production"))
    with engine.connect() as conn:
        fired = conn.execute(
            sa.select(ad_requests.c.fired).where(ad_requests.c.id == uuid_module.UUID(uuid))
        ).scalar_one()
    impression_bits = FIRE_BITS["impression", "wrapper"] | FIRE_BITS["impression", "inline"]
    assert fired == FIRE_BITS["impression", "wrapper"], "one impression fire stored, from the wrapper's URL"
    assert fired & impression_bits == FIRE_BITS["impression", "wrapper"]
    engine.dispose()


def test_simultaneous_fires_of_both_vast_layers_count_one_impression_and_one_echo(live: LiveServer) -> None:
    assert live.keys
    uuid = issue(live)

    async def both() -> list[httpx.Response]:
        async with httpx.AsyncClient(timeout=30) as client:
            base = f"{live.url}/api/v1/ad/tracking/video/?ad_request_uuid={uuid}&event=complete"
            return list(
                await asyncio.gather(*(client.get(base + layer) for layer in ("", "&layer=inline") * 10))
            )

    results = sorted(r.json()["data"]["result"] for r in asyncio.run(both()))
    assert results.count("counted") == 1
    assert results.count("echo") == 1
    assert results.count("duplicate") == 18
