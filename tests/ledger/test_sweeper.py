"""The expiry sweep: drains a backlog at once, keeps ticking through failures, stops cleanly, and in a served
environment returns the reservations of ad requests that expired unplayed, with no request to prompt it."""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Iterator

import pytest
import sqlalchemy as sa

from adslot.ledger.budget import DeliveryCache
from adslot.ledger.claims import Claim, Claims
from adslot.ledger.records import COUNTER_RETENTION_SECONDS, SETTLE_LIMIT, Settle, Verdict
from adslot.ledger.sweeper import MAX_ROUNDS, ExpirySweeper, sweep_once
from adslot.storage.database import make_engine
from adslot.storage.tables import ad_requests, delivery_counters
from tests.conftest import BACKENDS, LiveServer, drop_schemas, start_server


class FakeLedger:
    """Answers Settles with a scripted number settled; records what it was sent."""

    def __init__(self, settled: list[int], fail_first: int = 0) -> None:
        self.settled = settled
        self.fail_first = fail_first
        self.sent: list[Settle] = []

    async def submit(self, op: Settle) -> Verdict:
        self.sent.append(op)
        if self.fail_first > 0:
            self.fail_first -= 1
            raise RuntimeError("database went away")
        count = self.settled.pop(0) if self.settled else 0
        return Verdict(
            "settled", settled=count, counters={"c1:life:plays": (10, 3, 4, None)} if count else {}
        )


def test_a_sweep_goes_again_at_once_while_settles_come_back_full() -> None:
    ledger = FakeLedger([SETTLE_LIMIT, SETTLE_LIMIT, 7, SETTLE_LIMIT])
    total = asyncio.run(sweep_once(ledger.submit, lambda: 1234))
    assert total == 2 * SETTLE_LIMIT + 7
    assert [op.now for op in ledger.sent] == [1234, 1234, 1234]


def test_every_settle_of_a_sweep_carries_the_counter_retention() -> None:
    ledger = FakeLedger([SETTLE_LIMIT, 0])
    asyncio.run(sweep_once(ledger.submit, lambda: 1234, retention=7200))
    assert [op.retention for op in ledger.sent] == [7200, 7200]
    asyncio.run(sweep_once(ledger.submit, lambda: 1234))
    assert ledger.sent[-1].retention == COUNTER_RETENTION_SECONDS


def test_a_sweep_gives_the_writer_back_after_max_rounds_of_backlog() -> None:
    ledger = FakeLedger([SETTLE_LIMIT] * (MAX_ROUNDS + 5))
    asyncio.run(sweep_once(ledger.submit, lambda: 1))
    assert len(ledger.sent) == MAX_ROUNDS


def test_a_sweep_tells_the_cache_what_it_released() -> None:
    cache = DeliveryCache()
    cache.update({"c1:life:plays": (10, 10, 0, None)})
    asyncio.run(sweep_once(FakeLedger([3]).submit, lambda: 1, cache))
    assert cache.accepts(Claims((Claim("c1:life:plays", 1, 10),)), 0)


def test_the_sweeper_ticks_keeps_going_after_a_failure_and_stops_cleanly() -> None:
    ledger = FakeLedger([], fail_first=2)

    async def scenario() -> int:
        sweeper = ExpirySweeper(ledger.submit, 0.01, now=lambda: 42)
        sweeper.start()
        deadline = time.monotonic() + 5
        while len(ledger.sent) < 5 and time.monotonic() < deadline:
            await asyncio.sleep(0.01)
        await sweeper.stop()
        stopped_at = len(ledger.sent)
        await asyncio.sleep(0.05)
        assert len(ledger.sent) == stopped_at  # nothing after stop
        return stopped_at

    assert asyncio.run(scenario()) >= 5
    assert {op.now for op in ledger.sent} == {42}


def test_stopping_a_sweeper_that_never_started_is_harmless() -> None:
    asyncio.run(ExpirySweeper(FakeLedger([]).submit, 1.0).stop())


# --- in a served environment ----------------------------------------------------------------------


@pytest.fixture(scope="module", params=BACKENDS)
def sweeping(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[LiveServer]:
    server, schemas = start_server(
        tmp_path_factory.mktemp("sweep"), str(request.param), ADSLOT_SETTLE_INTERVAL_MS="100"
    )
    yield server
    thread = server.thread
    server.stop()
    assert thread is not None and not thread.is_alive()  # the sweeper stopped with its environment
    if schemas:
        drop_schemas(schemas)


def test_a_served_environment_releases_an_expired_unplayed_reservation_by_itself(
    sweeping: LiveServer,
) -> None:
    engine = make_engine(sweeping.settings.environment("production"))
    now = int(time.time())
    ident = uuid.uuid4()
    key = f"c{sweeping.extra['campaign_id']}:life:plays:{ident.hex[:8]}"
    with engine.begin() as conn:
        conn.execute(sa.insert(delivery_counters).values(key=key, cap=5, reserved=1, delivered=0))
        conn.execute(
            sa.insert(ad_requests).values(
                id=ident,
                account_id=1,
                venue_id="venue-1",
                screen_id=None,
                play_time=now - 1200,
                created_at=now - 1260,
                expires_at=now - 300,
                campaign_id=sweeping.extra["campaign_id"],
                creative_id=sweeping.extra["creative_id"],
                claims=f'[["{key}",1]]',
            )
        )
    deadline = time.monotonic() + 10
    row = None
    while time.monotonic() < deadline:
        with engine.connect() as conn:
            row = conn.execute(sa.select(ad_requests).where(ad_requests.c.id == ident)).mappings().one()
        if row["settled_at"] is not None:
            break
        time.sleep(0.05)
    assert row is not None and row["settle_reason"] == "expired"
    with engine.connect() as conn:
        counter = conn.execute(sa.select(delivery_counters).where(delivery_counters.c.key == key)).one()
    assert (counter.reserved, counter.delivered) == (0, 0)
    engine.dispose()
