"""The collector settings of a long-running process (collector.py) and a served worker applying them."""

from __future__ import annotations

import asyncio
import gc
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from adslot import app as app_module
from adslot.app import AdslotApp, create_app
from adslot.collector import YOUNG_THRESHOLD, settle_heap
from tests.conftest import free_port, make_keys, make_settings


@pytest.fixture
def collector_restored() -> Iterator[None]:
    thresholds = gc.get_threshold()
    yield
    gc.unfreeze()
    gc.set_threshold(*thresholds)


def young_collections_during(in_flight: int) -> int:
    """Young collections while `in_flight` tracked objects are alive at once, then freed (a burst of
    requests in flight)."""
    gc.collect()
    before = gc.get_stats()[0]["collections"]
    alive = [{"n": n} for n in range(in_flight)]
    after = gc.get_stats()[0]["collections"]
    del alive
    return int(after - before)


def test_settling_raises_the_young_threshold_keeps_the_older_ones_and_freezes_start_up(
    collector_restored: None,
) -> None:
    _, middle, oldest = gc.get_threshold()
    settle_heap()
    assert gc.get_threshold() == (YOUNG_THRESHOLD, middle, oldest)
    assert gc.get_freeze_count() > 0


def test_objects_in_flight_below_the_threshold_cause_no_young_collection_once_settled(
    collector_restored: None,
) -> None:
    gc.set_threshold(700, *gc.get_threshold()[1:])
    assert young_collections_during(5_000) > 0, "CPython's default collects such a burst several times"
    settle_heap()
    assert young_collections_during(5_000) == 0


def lifespan(app: AdslotApp) -> list[str]:
    """Run `app`'s ASGI lifespan through start-up and shut-down; the message types it sent."""
    incoming = [{"type": "lifespan.startup"}, {"type": "lifespan.shutdown"}]
    sent: list[str] = []

    async def receive() -> dict[str, Any]:
        return incoming.pop(0)

    async def send(message: dict[str, Any]) -> None:
        sent.append(message["type"])

    asyncio.run(app({"type": "lifespan"}, receive, send))  # type: ignore[arg-type]
    return sent


@pytest.mark.parametrize("served", [True, False])
def test_a_served_worker_settles_its_heap_once_started_and_a_test_app_does_not(
    served: bool, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    port = free_port()
    settings, _ = make_settings(tmp_path, "sqlite", port)
    make_keys(settings)  # migrates both environments' databases
    calls: list[bool] = []
    monkeypatch.setattr(app_module, "settle_heap", lambda: calls.append(True))
    if served:  # what `adslot serve` runs: the uvicorn factory, its settings from ADSLOT_* variables
        monkeypatch.setenv("ADSLOT_DATA_DIR", str(tmp_path))
        monkeypatch.setenv("ADSLOT_PORT", str(port))
        app = create_app()
    else:
        app = AdslotApp(settings)
    sent = lifespan(app)
    assert sent == ["lifespan.startup.complete", "lifespan.shutdown.complete"]
    assert calls == ([True] if served else [])
