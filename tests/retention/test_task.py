"""The retention task rolls up by itself and stops cleanly; a rollup of 100,000 old ad requests running
beside a live server leaves its pixels' latency within bounds (the figures are printed: `-s`)."""

from __future__ import annotations

import asyncio
import statistics
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
import sqlalchemy as sa

from adslot.retention.rollup import cutoff, roll_batch
from adslot.retention.task import RetentionTask
from adslot.settings import DEFAULTS
from adslot.storage.database import make_engine, write_transaction
from adslot.storage.tables import ad_requests
from tests.conftest import PROD_VENUE, LiveServer, drop_schemas, play_time, start_server
from tests.reporting.support import ad_request
from tests.retention.support import CUTOFF, NOW, RETENTION, reports, seed

ROWS = 100_000
EVENTS = ("start", "firstQuartile", "midpoint", "thirdQuartile")


def test_a_started_task_rolls_up_what_is_due_and_stops_cleanly(db: sa.Engine) -> None:
    rows = seed(db, 600)
    before = reports(db)
    due = sum(1 for r in rows if r["play_time"] < CUTOFF and r["settled_at"] is not None)

    async def run() -> None:
        task = RetentionTask(db, RETENTION, batch_rows=50, pause=0, interval=0.02, now=lambda: NOW)
        task.start()
        for _ in range(500):  # bounded: 10 s
            await asyncio.sleep(0.02)
            with db.connect() as conn:
                left = conn.execute(
                    sa.select(sa.func.count()).where(
                        ad_requests.c.play_time < CUTOFF, ad_requests.c.settled_at.is_not(None)
                    )
                ).scalar()
            if left == 0:
                break
        await task.stop()

    asyncio.run(run())
    with db.connect() as conn:
        assert conn.execute(sa.select(sa.func.count()).select_from(ad_requests)).scalar() == len(rows) - due
    assert reports(db) == before


def test_a_task_without_retention_never_starts() -> None:
    async def run() -> None:
        task = RetentionTask(sa.create_engine("sqlite://"), None, batch_rows=1, pause=0)
        task.start()
        assert task._task is None
        await task.stop()

    asyncio.run(run())


@pytest.fixture(scope="module")
def loaded(backend: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    """A live server whose production ledger holds ROWS settled ad requests played a month ago."""
    server, schemas = start_server(tmp_path_factory.mktemp("retention"), backend)
    engine = make_engine(server.settings.environment("production"))
    old = int(time.time()) - 30 * 86_400
    for start in range(0, ROWS, 10_000):
        rows = [
            ad_request(
                old + n, id=uuid.uuid4(), impression_at=old + n, settle_reason="played", settled_at=old + n
            )
            for n in range(start, start + 10_000)
        ]
        with write_transaction(engine) as conn:
            conn.execute(sa.insert(ad_requests), rows)
    server.extra["engine"] = engine
    yield server
    server.stop()
    engine.dispose()
    if schemas:
        drop_schemas(schemas)


def _pixel_latencies(server: LiveServer, count: int) -> list[float]:
    """Seconds each of `count` pixels took, fired one after another on one connection: four events of each
    of count/4 new ad requests (every one a write)."""
    assert server.keys is not None
    latencies: list[float] = []
    with httpx.Client(base_url=server.url, timeout=30) as client:
        ads = []
        for _ in range(count // len(EVENTS)):
            answer = client.post(
                "/api/v1/ad/request",
                headers={"Ssp-Key": server.keys.production},
                json={"venue_id": PROD_VENUE, "play_time": play_time(5)},
            )
            assert answer.status_code == 200, answer.text
            ads.append(answer.json()["data"]["ad_request_uuid"])
        for ad in ads:
            for event in EVENTS:
                began = time.perf_counter()
                fired = client.get(f"/api/v1/ad/tracking/video/?ad_request_uuid={ad}&event={event}")
                latencies.append(time.perf_counter() - began)
                assert fired.status_code == 200, fired.text
    return latencies


def _p(latencies: list[float], share: float) -> float:
    return statistics.quantiles(latencies, n=100)[round(share * 100) - 1] * 1000


def test_a_rollup_of_100k_rows_does_not_stall_the_pixels(loaded: LiveServer, backend: str) -> None:
    engine: sa.Engine = loaded.extra["engine"]
    _pixel_latencies(loaded, 200)  # warm up
    quiet = _pixel_latencies(loaded, 2400)
    stop = threading.Event()
    rolled: list[int] = []
    batch_seconds: list[float] = []

    def rollup() -> None:
        before = cutoff(int(time.time()), 8)
        while not stop.is_set():
            began = time.perf_counter()
            batch = roll_batch(engine, before, int(time.time()), DEFAULTS.retention_batch_rows)
            batch_seconds.append(time.perf_counter() - began)
            rolled.append(batch.rows)
            if batch.rows == 0:
                return
            time.sleep(DEFAULTS.retention_pause_seconds)

    thread = threading.Thread(target=rollup)
    thread.start()
    try:
        busy = _pixel_latencies(loaded, 2400)
    finally:
        stop.set()
        thread.join(timeout=120)
    print(
        f"\n{backend}: pixel p50/p99 without a rollup {_p(quiet, 0.5):.2f}/{_p(quiet, 0.99):.2f} ms, "
        f"during one {_p(busy, 0.5):.2f}/{_p(busy, 0.99):.2f} ms; {sum(rolled):,} rows rolled in "
        f"{len(rolled)} batches of {DEFAULTS.retention_batch_rows}, "
        f"each {statistics.median(batch_seconds) * 1000:.1f} ms (max {max(batch_seconds) * 1000:.1f})"
    )
    assert sum(rolled) >= 10 * DEFAULTS.retention_batch_rows  # the pixels ran beside a rollup at work
    assert _p(busy, 0.99) < _p(quiet, 0.99) + 50  # a pixel waits for one batch at most, never a pass


def test_a_server_runs_a_retention_task_per_environment_that_rolls_up_only_when_a_retention_is_set(
    backend: str, tmp_path: Path, loaded: LiveServer
) -> None:
    assert loaded.app is not None
    defaults = [env.retention for env in loaded.app.environments.values()]
    assert {(r.days, r.screen_plays_days, r.alert_days) for r in defaults} == {(None, 35, 90)}
    assert all(r._task is not None and not r._task.done() for r in defaults)  # the fleet's rows, trimmed
    server, schemas = start_server(tmp_path, backend, ADSLOT_RETENTION_DAYS="30")
    try:
        assert server.app is not None
        tasks = [env.retention._task for env in server.app.environments.values()]
        assert len(tasks) == 2 and all(task is not None and not task.done() for task in tasks)
        assert {env.retention.days for env in server.app.environments.values()} == {30}
    finally:
        server.stop()
        if schemas:
            drop_schemas(schemas)
    assert all(env.retention._task is None for env in server.app.environments.values())  # stopped
    off = {"ADSLOT_SCREEN_PLAYS_RETENTION_DAYS": "off", "ADSLOT_ALERT_RETENTION_DAYS": "off"}
    (tmp_path / "off").mkdir()
    server, schemas = start_server(tmp_path / "off", backend, **off)
    try:
        assert server.app is not None
        assert all(env.retention._task is None for env in server.app.environments.values())
    finally:
        server.stop()
        if schemas:
            drop_schemas(schemas)
