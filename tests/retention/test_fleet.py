"""Trimming the fleet's rows on both backends: screen_plays hours and alerts (with their deliveries and
attempts) past their retention go, recent ones stay, and an alert still open or still owing a notice stays
however old."""

from __future__ import annotations

import asyncio
import threading
import time
from typing import Any

import pytest
import sqlalchemy as sa

from adslot.retention import task as task_module
from adslot.retention.fleet import trim_alerts, trim_attempts, trim_screen_plays
from adslot.retention.rollup import DAY, HOUR
from adslot.retention.task import RetentionTask
from adslot.storage.tables import alert_attempts, alert_deliveries, alerts, screen_plays

NOW = 1_780_000_000 - 1_780_000_000 % HOUR
PLAYS_DAYS = 35
ALERT_DAYS = 90
OLD = NOW - 100 * DAY
RECENT = NOW - 2 * DAY


@pytest.fixture
def db(engine: sa.Engine) -> sa.Engine:
    with engine.begin() as conn:
        for table in (alert_attempts, alert_deliveries, alerts, screen_plays):
            conn.execute(sa.delete(table))
    return engine


def count(engine: sa.Engine, table: sa.Table) -> int:
    with engine.connect() as conn:
        return int(conn.execute(sa.select(sa.func.count()).select_from(table)).scalar_one())


def hours(engine: sa.Engine) -> list[int]:
    with engine.connect() as conn:
        return sorted({row[0] for row in conn.execute(sa.select(screen_plays.c.hour))})


def seed_plays(engine: sa.Engine, first: int, last: int) -> None:
    rows = [
        {"venue_id": "v1", "screen_id": screen, "hour": hour, "plays": 3}
        for hour in range(first, last + 1, HOUR)
        for screen in ("s1", "s2", "")
    ]
    with engine.begin() as conn:
        conn.execute(sa.insert(screen_plays), rows)


def alert(
    engine: sa.Engine, screen: str, raised: int, cleared: int | None, delivered: list[int | None]
) -> int:
    """An alert with one delivery per entry of `delivered` (its delivered_at; None: still owed), each
    with an attempt at the alert's raising and one at its clearing (or raising)."""
    with engine.begin() as conn:
        ident = conn.execute(
            sa.insert(alerts)
            .values(
                kind="screen_silent",
                venue_id="v1",
                screen_id=screen,
                episode=raised - 900,
                raised_at=raised,
                cleared_at=cleared,
                detail=f"{screen} silent",
            )
            .returning(alerts.c.id)
        ).scalar_one()
        for n, at in enumerate(delivered):
            delivery = conn.execute(
                sa.insert(alert_deliveries)
                .values(
                    alert_id=ident,
                    event="raised",
                    channel="webhook",
                    target=str(n + 1),
                    body="{}",
                    created_at=raised,
                    next_at=raised,
                    attempts=2,
                    delivered_at=at,
                )
                .returning(alert_deliveries.c.id)
            ).scalar_one()
            conn.execute(
                sa.insert(alert_attempts),
                [
                    {"delivery_id": delivery, "at": raised, "ok": False, "status": 503, "error": "HTTP 503"},
                    {
                        "delivery_id": delivery,
                        "at": cleared or raised,
                        "ok": at is not None,
                        "status": None,
                        "error": None,
                    },
                ],
            )
    return int(ident)


def alert_ids(engine: sa.Engine) -> set[int]:
    with engine.connect() as conn:
        return {row[0] for row in conn.execute(sa.select(alerts.c.id))}


def test_screen_plays_hours_before_the_cutoff_go_a_batch_at_a_time_and_later_ones_stay(db: sa.Engine) -> None:
    cutoff = NOW - PLAYS_DAYS * DAY
    seed_plays(db, cutoff - 10 * HOUR, cutoff + 5 * HOUR)
    assert trim_screen_plays(db, cutoff, 7) == 7
    trimmed = 7
    while (n := trim_screen_plays(db, cutoff, 7)) == 7:
        trimmed += n
    assert trimmed + n == 30  # ten hours of three screens
    assert hours(db) == list(range(cutoff, cutoff + 6 * HOUR, HOUR))
    assert count(db, screen_plays) == 18


def test_old_cleared_alerts_go_with_their_deliveries_and_attempts_and_the_rest_stay(db: sa.Engine) -> None:
    cutoff = NOW - ALERT_DAYS * DAY
    done = alert(db, "done", OLD, OLD + 600, [OLD + 5, OLD + 700])
    given_up = alert(db, "given-up", OLD, OLD + 600, [OLD + 5])  # a give-up sets delivered_at too
    owed = alert(db, "owed", OLD, OLD + 600, [OLD + 5, None])
    still_open = alert(db, "open", OLD, None, [OLD + 5])
    recent = alert(db, "recent", RECENT, RECENT + 600, [RECENT + 5])
    assert trim_alerts(db, cutoff, 1) == 1
    assert trim_alerts(db, cutoff, 100) == 1
    assert trim_alerts(db, cutoff, 100) == 0
    assert alert_ids(db) == {owed, still_open, recent}
    assert {done, given_up} & alert_ids(db) == set()
    with db.connect() as conn:
        kept = {row[0] for row in conn.execute(sa.select(alert_deliveries.c.alert_id))}
    assert kept == {owed, still_open, recent}
    assert count(db, alert_deliveries) == 4
    # Attempts before the cutoff go whatever their delivery; the delivery keeps its count and last error.
    assert count(db, alert_attempts) == 8
    assert trim_attempts(db, cutoff, 100) == 6
    with db.connect() as conn:
        left = sorted(row[0] for row in conn.execute(sa.select(alert_attempts.c.at)))
        owed_row = conn.execute(
            sa.select(alert_deliveries.c.attempts).where(
                alert_deliveries.c.alert_id == owed, alert_deliveries.c.delivered_at.is_(None)
            )
        ).scalar_one()
    assert left == [RECENT, RECENT + 600]
    assert owed_row == 2


def test_the_retention_task_trims_the_fleet_by_itself_with_the_rollup_off(db: sa.Engine) -> None:
    seed_plays(db, OLD, OLD + 3 * HOUR)
    seed_plays(db, RECENT, RECENT + HOUR)
    gone = alert(db, "gone", OLD, OLD + 600, [OLD + 5])
    owed = alert(db, "owed", OLD, OLD + 600, [None])

    async def run() -> None:
        task = RetentionTask(
            db,
            None,
            batch_rows=5,
            pause=0,
            interval=0.02,
            now=lambda: NOW,
            screen_plays_days=PLAYS_DAYS,
            alert_days=ALERT_DAYS,
        )
        task.start()
        for _ in range(500):  # bounded: 10 s
            await asyncio.sleep(0.02)
            if hours(db) == [RECENT, RECENT + HOUR] and gone not in alert_ids(db):
                break
        await task.stop()

    asyncio.run(run())
    assert hours(db) == [RECENT, RECENT + HOUR]
    assert alert_ids(db) == {owed}


def test_a_task_with_every_retention_off_never_starts() -> None:
    kwargs: dict[str, Any] = {"batch_rows": 1, "pause": 0, "screen_plays_days": None, "alert_days": None}

    async def run() -> None:
        task = RetentionTask(sa.create_engine("sqlite://"), None, **kwargs)
        task.start()
        assert task._task is None
        await task.stop()

    asyncio.run(run())


def test_a_stop_that_cancels_a_batch_in_flight_returns_only_once_the_batch_has_ended(
    db: sa.Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Cancelling the loop does not end the thread of its batch; the engine is disposed after the stop."""
    began, ended = threading.Event(), threading.Event()

    def slow(engine: sa.Engine, before: int, limit: int) -> int:
        began.set()
        time.sleep(0.5)
        done = trim_screen_plays(engine, before, limit)
        ended.set()
        return done

    monkeypatch.setattr(task_module, "trim_screen_plays", slow)

    async def run() -> bool:
        task = RetentionTask(db, None, batch_rows=5, pause=0, interval=0.01, screen_plays_days=PLAYS_DAYS)
        task.start()
        while not began.is_set():
            await asyncio.sleep(0.005)
        await task.stop()
        return ended.is_set()

    assert asyncio.run(run()), "stop() returned while the batch still ran in its thread"
