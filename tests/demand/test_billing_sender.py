"""Stopping the billing sender: its claims and marks run in worker threads, which cancelling the task that
awaits them does not end. Its owner disposes the engine right after the stop, so the stop waits for them."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Iterator

import pytest
import sqlalchemy as sa

from adslot.demand.billing import BillingSender, Due
from tests.conftest import BACKENDS, migrated_engine


@pytest.fixture(scope="module", params=BACKENDS)
def engine(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[sa.Engine]:
    yield from migrated_engine(tmp_path_factory.mktemp("billing-stop"), str(request.param))


class SlowClaim(BillingSender):
    """A sender whose claims take a while: long enough for a stop to arrive in the middle of one."""

    def __init__(self, engine: sa.Engine) -> None:
        super().__init__(engine, 0.01)
        self.began = threading.Event()
        self.ended = threading.Event()

    def _claim(self, now: int) -> list[Due]:
        self.began.set()
        time.sleep(0.5)
        claimed = super()._claim(now)  # the database, as a real claim: the engine must still be there
        self.ended.set()
        return claimed


def test_a_stop_that_cancels_a_claim_in_flight_returns_only_once_the_claim_has_ended(
    engine: sa.Engine, caplog: pytest.LogCaptureFixture
) -> None:
    async def run() -> bool:
        sender = SlowClaim(engine)
        sender.start()
        while not sender.began.is_set():
            await asyncio.sleep(0.005)
        await sender.stop()  # cancels the loop while its claim sleeps in its thread
        return sender.ended.is_set()

    assert asyncio.run(run()), "stop() returned while the claim still ran in its thread"
    assert not [r for r in caplog.records if r.name == "adslot.demand.billing"], caplog.text
