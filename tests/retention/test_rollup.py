"""Retention's rollup on SQLite and PostgreSQL: settled ad requests past the cutoff are summed into
report_rollups and deleted, the rest untouched; the delivery report stays byte-identical (JSON and CSV, every
grouping, zones of whole, half and quarter hours, across a DST change) after a full rollup, after one batch,
and when two rollups run at once."""

from __future__ import annotations

import threading
from collections import Counter

import sqlalchemy as sa

from adslot.retention.rollup import BUCKET_SECONDS, cutoff, roll_batch, rolled_rows, trim_key_stats
from adslot.storage.tables import ad_requests, invalid_fires, key_stats, report_rollups, request_stats
from tests.reporting.support import insert, key_stat, played
from tests.retention.support import CUTOFF, NOW, RETENTION, START, flagged, reports, roll_all, seed


def _ids(engine: sa.Engine) -> set[object]:
    with engine.connect() as conn:
        return set(conn.execute(sa.select(ad_requests.c.id)).scalars())


def _rolled_fills(engine: sa.Engine) -> int:
    with engine.connect() as conn:
        return int(conn.execute(sa.select(sa.func.coalesce(sa.func.sum(report_rollups.c.fills), 0))).scalar())


def test_the_cutoff_is_the_retention_before_now_down_to_a_quarter_hour() -> None:
    assert cutoff(NOW, RETENTION) == CUTOFF
    assert cutoff(NOW + 899, RETENTION) == CUTOFF
    assert cutoff(NOW + 900, RETENTION) == CUTOFF + BUCKET_SECONDS


def test_only_settled_ad_requests_played_before_the_cutoff_are_rolled_up_and_deleted(db: sa.Engine) -> None:
    rows = seed(db)
    rolled = {r["id"] for r in rows if r["play_time"] < CUTOFF and r["settled_at"] is not None}
    kept = {r["id"] for r in rows} - rolled
    assert rolled and kept and any(r["play_time"] < CUTOFF and r["settled_at"] is None for r in rows)
    assert roll_all(db) == len(rolled)
    assert _ids(db) == kept
    assert _rolled_fills(db) == len(rolled)
    with db.connect() as conn:
        buckets = conn.execute(sa.select(report_rollups.c.bucket)).scalars().all()
        hours = conn.execute(sa.select(sa.func.count()).select_from(request_stats)).scalar()
    assert buckets and all(b % BUCKET_SECONDS == 0 and b < CUTOFF for b in buckets)
    assert hours == 3 * 3 * 8 * 24  # request counts are the report's own hourly figures: all kept
    assert roll_all(db) == 0  # nothing left to do


def test_reports_are_byte_identical_after_the_rollup_in_every_grouping_and_zone(db: sa.Engine) -> None:
    seed(db)
    before = reports(db)
    assert roll_all(db) > 0
    after = reports(db)
    assert after.keys() == before.keys()
    changed = [name for name in before if before[name] != after[name]]
    assert not changed, changed[:3]


def test_a_rollup_stopped_after_any_batch_leaves_reports_identical(db: sa.Engine) -> None:
    seed(db)
    before = reports(db)
    first = roll_batch(db, CUTOFF, NOW, 97)  # then the process dies
    assert first.rows == 97
    assert reports(db) == before
    assert roll_all(db, limit=250) > 0  # started again later: the buckets the first batch began are added to
    assert reports(db) == before


def test_two_rollups_at_once_never_count_an_ad_request_twice(db: sa.Engine) -> None:
    rows = seed(db)
    before = reports(db)
    totals: list[int] = []
    failures: list[BaseException] = []

    def run() -> None:
        try:
            totals.append(roll_all(db, limit=40))
        except BaseException as exc:  # reported below
            failures.append(exc)

    threads = [threading.Thread(target=run) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    assert not failures, failures
    rolled = sum(1 for r in rows if r["play_time"] < CUTOFF and r["settled_at"] is not None)
    assert sum(totals) == rolled == _rolled_fills(db)
    assert reports(db) == before


def test_rolled_rows_sum_every_figure_per_bucket_and_dimension(db: sa.Engine) -> None:
    at = START + 3 * BUCKET_SECONDS
    rows = [
        played(at + 1, "start", "complete", impressions=1.25, duplicate_count=2, settle_reason="played"),
        played(at + 899, "start", impressions=0.5, late_count=1, settle_reason="played"),
        played(at + 10, screen_id="s1", settle_reason="played"),
    ]
    insert(db, [{**r, "settled_at": at + 2000} for r in rows])
    with db.connect() as conn:
        found = rolled_rows(conn, [r["id"] for r in rows], NOW)
    found.sort(key=lambda r: r["screen_id"])
    assert [(r["bucket"], r["screen_id"], r["fills"], r["plays"], r["impressions"]) for r in found] == [
        (at, "", 2, 2, 1.75),
        (at, "s1", 1, 1, 1.0),
    ]
    assert (found[0]["starts"], found[0]["completes"], found[0]["duplicates"], found[0]["late"]) == (
        2,
        1,
        2,
        1,
    )


def test_key_counts_older_than_the_cutoff_are_trimmed_in_batches(db: sa.Engine) -> None:
    old = [key_stat(key, CUTOFF - 3600 * hour, 5) for key in (1, 2) for hour in range(1, 4)]
    insert(db, [], by_key=[*old, key_stat(1, CUTOFF, 5), key_stat(2, CUTOFF + 3600, 5)])
    assert trim_key_stats(db, CUTOFF, 4) == 4
    assert trim_key_stats(db, CUTOFF, 4) == 2
    with db.connect() as conn:
        assert sorted(conn.execute(sa.select(key_stats.c.hour)).scalars()) == [CUTOFF, CUTOFF + 3600]


def test_flagged_fires_are_rolled_up_per_reason_and_deleted_with_their_ad_requests(db: sa.Engine) -> None:
    rows = seed(db)
    rolled = {r["id"] for r in rows if r["play_time"] < CUTOFF and r["settled_at"] is not None}
    fires = flagged(rows)
    expected = Counter(f["reason"] for f in fires if f["ad_request_id"] in rolled)
    assert len(expected) == 4
    roll_all(db)
    with db.connect() as conn:
        left = set(conn.execute(sa.select(invalid_fires.c.ad_request_id)).scalars())
        sums = conn.execute(
            sa.select(*(sa.func.sum(report_rollups.c[f"invalid_{reason}"]) for reason in expected))
        ).one()
    assert left == {f["ad_request_id"] for f in fires} - rolled
    assert dict(zip(expected, map(int, sums), strict=True)) == dict(expected)
