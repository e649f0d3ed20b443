"""Stopping the fleet watch: a look runs in a worker thread, and cancelling the task that awaits it does not
end that thread. Its owner disposes the engine right after the stop, so the stop waits for the look."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Iterator

import pytest
import sqlalchemy as sa

from adslot.fleet.watch import FleetWatch
from adslot.settings import DEFAULTS
from tests.conftest import BACKENDS, migrated_engine


@pytest.fixture(scope="module", params=BACKENDS)
def engine(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[sa.Engine]:
    yield from migrated_engine(tmp_path_factory.mktemp("watch-stop"), str(request.param))


class SlowLook(FleetWatch):
    """A watch whose looks take a while: long enough for a stop to arrive in the middle of one."""

    def __init__(self, engine: sa.Engine) -> None:
        super().__init__(engine, DEFAULTS, "production")
        self.began = threading.Event()
        self.ended = threading.Event()

    def look(self, now: float) -> None:
        self.began.set()
        time.sleep(0.5)
        super().look(now)  # the database, as a real look: the engine must still be there
        self.ended.set()


def test_a_stop_that_cancels_a_look_in_flight_returns_only_once_the_look_has_ended(
    engine: sa.Engine, caplog: pytest.LogCaptureFixture
) -> None:
    async def run() -> tuple[bool, float]:
        watch = SlowLook(engine)
        watch.start()
        while not watch.began.is_set():
            await asyncio.sleep(0.005)
        began = time.monotonic()
        await watch.stop()  # cancels the loop while its look sleeps in its thread
        return watch.ended.is_set(), time.monotonic() - began

    ended, took = asyncio.run(run())
    assert ended, "stop() returned while the look still ran in its thread"
    assert took < 5.0
    assert not [r for r in caplog.records if r.name == "adslot.fleet.watch"], caplog.text
