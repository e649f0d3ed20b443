"""DemandStats on SQLite and PostgreSQL: each ask's outcomes counted per partner, UTC hour and metric, written
exactly once whatever happens between flushes (a failing database, two workers flushing at once, a stop)."""

from __future__ import annotations

import asyncio
import logging
import threading
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import msgspec
import pytest
import sqlalchemy as sa

from adslot.demand.auction import Asked, Checked, check_response
from adslot.demand.caller import AskResult, PartnerOutcome
from adslot.demand.stats import DemandStats, hour_of
from adslot.demand.terms import PartnerTerms
from adslot.storage.tables import demand_stats
from tests.conftest import BACKENDS, migrated_engine
from tests.demand.test_auction import VAST
from tests.reporting.support import utc

HOUR = utc("2026-03-01T10:00")
PLAY = HOUR + 1799  # within the hour


@pytest.fixture(scope="module", params=BACKENDS)
def engine(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[sa.Engine]:
    yield from migrated_engine(tmp_path_factory.mktemp("demand-stats"), str(request.param))


@pytest.fixture
def db(engine: sa.Engine) -> sa.Engine:
    with engine.begin() as conn:
        conn.execute(sa.delete(demand_stats))
    return engine


def stored(engine: sa.Engine) -> dict[tuple[str, int, str], int]:
    s = demand_stats.c
    with engine.connect() as conn:
        rows = conn.execute(sa.select(s.partner, s.hour, s.metric, s["count"]))
        return {(partner, int(hour), metric): int(n) for partner, hour, metric, n in rows}


def answer(partner: str, *prices: float) -> Checked:
    """What check_response makes of an answer with these bids (floor 2.00: a lower one is dropped)."""
    bids = [{"id": f"b{n}", "impid": "1", "price": price, "adm": VAST} for n, price in enumerate(prices)]
    body = msgspec.json.encode({"id": "req-1", "seatbid": [{"seat": "s", "bid": bids}]})
    return check_response(Asked(PartnerTerms(partner, floor_cpm_micros=2_000_000), "req-1"), body)


def whole(partner: str, body: bytes | None) -> Checked:
    return check_response(Asked(PartnerTerms(partner), "req-1"), body)


def slot() -> AskResult:
    """One slot's ask of six partners: every outcome, bids dropped beside a bid, an answer dropped whole."""
    return AskResult(
        "tid",
        (
            PartnerOutcome("slow", "skipped_qps", "max_qps"),
            PartnerOutcome("broken", "skipped_breaker", "breaker_open"),
            PartnerOutcome("dsp-a", "bid", checked=answer("dsp-a", 3.0, 1.0, 0.5)),
            PartnerOutcome("dsp-b", "no_bid", checked=whole("dsp-b", None)),
            PartnerOutcome("dsp-c", "dropped", "bad_json", checked=whole("dsp-c", b"{nope")),
            PartnerOutcome("dsp-d", "dropped", checked=answer("dsp-d", 1.5)),
            PartnerOutcome("dsp-e", "timeout", "timeout"),
            PartnerOutcome("dsp-f", "error", "http_500"),
            PartnerOutcome("dsp-g", "error"),
        ),
    )


def expected(times: int = 1, hour: int = HOUR) -> dict[tuple[str, int, str], int]:
    counts = {
        ("slow", "skipped_qps"): 1,
        ("broken", "skipped_breaker"): 1,
        ("dsp-a", "requests"): 1,
        ("dsp-a", "bids"): 1,
        ("dsp-a", "drop:below_floor"): 2,
        ("dsp-b", "requests"): 1,
        ("dsp-b", "no_bids"): 1,
        ("dsp-c", "requests"): 1,
        ("dsp-c", "dropped"): 1,
        ("dsp-c", "drop:bad_json"): 1,
        ("dsp-d", "requests"): 1,
        ("dsp-d", "dropped"): 1,
        ("dsp-d", "drop:below_floor"): 1,
        ("dsp-e", "requests"): 1,
        ("dsp-e", "timeouts"): 1,
        ("dsp-f", "requests"): 1,
        ("dsp-f", "errors"): 1,
        ("dsp-f", "error:http_500"): 1,
        ("dsp-g", "requests"): 1,
        ("dsp-g", "errors"): 1,
        ("dsp-g", "error:unknown"): 1,
    }
    return {(partner, hour, metric): n * times for (partner, metric), n in counts.items()}


def test_each_outcome_counts_its_metric_asked_ones_a_request_and_every_drop_but_no_bid(db: sa.Engine) -> None:
    stats = DemandStats(db)
    stats.count(slot(), PLAY)
    assert stats.pending() == expected()
    assert stored(db) == {}  # counting never touches the database


def test_counts_go_under_the_utc_hour_of_the_play_time() -> None:
    assert hour_of(HOUR) == hour_of(HOUR + 3599) == HOUR and hour_of(HOUR + 3600) == HOUR + 3600
    stats = DemandStats(sa.create_engine("sqlite://"))
    stats.count(AskResult("t", (PartnerOutcome("dsp", "timeout", "timeout"),)), HOUR - 1)
    stats.count(AskResult("t", (PartnerOutcome("dsp", "timeout", "timeout"),)), HOUR + 3599)
    assert stats.pending() == {
        ("dsp", HOUR - 3600, "requests"): 1,
        ("dsp", HOUR - 3600, "timeouts"): 1,
        ("dsp", HOUR, "requests"): 1,
        ("dsp", HOUR, "timeouts"): 1,
    }


def test_lost_counts_bids_that_lost_the_auction(db: sa.Engine) -> None:
    stats = DemandStats(db)
    stats.lost("dsp-a", PLAY)
    stats.lost("dsp-a", PLAY, 3)
    stats.lost("dsp-b", PLAY + 3600)
    assert stats.flush_now()
    assert stored(db) == {("dsp-a", HOUR, "lost"): 4, ("dsp-b", HOUR + 3600, "lost"): 1}


def test_flushes_add_to_the_stored_rows_and_never_write_a_count_twice(db: sa.Engine) -> None:
    stats = DemandStats(db)
    stats.count(slot(), PLAY)
    assert stats.flush_now()
    assert stored(db) == expected()
    assert stats.pending() == {}
    assert stats.flush_now()  # nothing new: nothing added
    assert stored(db) == expected()
    stats.count(slot(), PLAY)
    stats.count(slot(), PLAY + 3600)
    asyncio.run(stats.flush())
    assert stored(db) == expected(2) | expected(1, HOUR + 3600)


def unmigrated(tmp_path: Path) -> sa.Engine:
    """A real database without demand_stats: every flush into it fails."""
    return sa.create_engine(f"sqlite:///{tmp_path / 'empty.db'}")


def test_a_failing_flush_keeps_its_counts_warns_once_and_the_next_flush_writes_them_once(
    db: sa.Engine, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    stats = DemandStats(unmigrated(tmp_path), name="stats-test")
    stats.count(slot(), PLAY)
    with caplog.at_level(logging.WARNING, logger="adslot.demand.stats"):
        assert not stats.flush_now()
        stats.count(slot(), PLAY)  # counted while the database was down
        assert not asyncio.run(stats.flush())
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1 and "stats-test" in warnings[0].getMessage()
    assert stats.pending() == expected(2)
    stats.engine = db  # the database is back
    assert stats.flush_now()
    assert stored(db) == expected(2)
    assert stats.pending() == {}


def test_two_demand_stats_flushing_into_one_database_at_once_add_up(db: sa.Engine) -> None:
    workers = [DemandStats(db, name=f"worker-{n}") for n in range(2)]
    failures: list[BaseException] = []

    def work(stats: DemandStats) -> None:
        try:
            for round_ in range(20):
                for _ in range(5):
                    stats.count(slot(), PLAY + round_ % 2 * 3600)
                    stats.lost("dsp-a", PLAY)
                assert stats.flush_now()
        except BaseException as exc:  # reported below
            failures.append(exc)

    threads = [threading.Thread(target=work, args=(stats,)) for stats in workers]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not failures, failures
    total: Counter[tuple[str, int, str]] = Counter()
    for hour in (HOUR, HOUR + 3600):
        total.update({key: n * 2 for key, n in expected(50, hour).items()})  # 2 workers x 50 slots an hour
    total[("dsp-a", HOUR, "lost")] = 2 * 100
    assert stored(db) == dict(total)


def test_the_loop_flushes_every_interval_and_stop_writes_what_is_left(db: sa.Engine) -> None:
    async def run() -> dict[str, Any]:
        stats = DemandStats(db, interval_seconds=0.05)
        stats.start()
        stats.count(slot(), PLAY)
        flushed: dict[Any, int] = {}
        for _ in range(200):  # until the loop's own flush has committed (its write is one transaction)
            await asyncio.sleep(0.02)
            if flushed := stored(db):
                break
        stats.count(slot(), PLAY)
        await stats.stop()
        return {"flushed": flushed, "pending": stats.pending()}

    seen = asyncio.run(run())
    assert seen["flushed"] == expected()
    assert seen["pending"] == {}
    assert stored(db) == expected(2)


def test_a_failing_database_never_ends_the_loop_and_stop_keeps_what_it_could_not_write(
    db: sa.Engine, tmp_path: Path
) -> None:
    async def run() -> DemandStats:
        stats = DemandStats(unmigrated(tmp_path), interval_seconds=0.01)
        stats.start()
        stats.count(slot(), PLAY)
        await asyncio.sleep(0.1)  # several failing flushes
        assert stats._task is not None and not stats._task.done()
        await stats.stop()
        return stats

    stats = asyncio.run(run())
    assert stats.pending() == expected()
    stats.engine = db
    assert stats.flush_now()
    assert stored(db) == expected()


def test_a_stop_that_cancels_a_flush_in_flight_waits_for_it_and_keeps_every_count(tmp_path: Path) -> None:
    """Cancelling the loop abandons the thread of a flush in flight: the stop's own flush must not find
    the counts that thread holds missing and call everything written."""
    path = tmp_path / "locked.db"
    sa.create_engine(f"sqlite:///{path}").dispose()
    holder = sa.create_engine(f"sqlite:///{path}").raw_connection()
    holder.execute("BEGIN EXCLUSIVE")  # every write waits its busy timeout, then fails
    in_flight = threading.Event()
    engine = sa.create_engine(f"sqlite:///{path}", connect_args={"timeout": 0.3})
    sa.event.listen(engine, "begin", lambda _conn: in_flight.set())

    async def run() -> DemandStats:
        stats = DemandStats(engine, interval_seconds=0.01)
        stats.count(slot(), PLAY)
        stats.start()
        while not in_flight.is_set():
            await asyncio.sleep(0.005)
        await stats.stop()  # cancels the loop while its flush waits for the lock
        return stats

    try:
        stats = asyncio.run(run())
        assert stats.pending() == expected()
    finally:
        holder.close()
        engine.dispose()
