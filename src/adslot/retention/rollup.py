"""Rolling settled ad requests past the retention into report_rollups, and deleting them, a batch at a time.

Each batch is one write transaction (on SQLite it takes its turn with the ledger writer, like any management
write): it picks up to `limit` settled ad requests whose play_time lies before the cutoff, adds their
figures (the delivery report's own expressions, `reporting.repository.delivery_figures`) to their 15-minute
buckets' rows, and deletes them. The sums and the deletion commit together or not at all, so a process
killed between two batches (or in one) leaves every figure counted exactly once. Two rollups never take the
same rows: SQLite runs one write transaction at a time, and on PostgreSQL a batch runs only while it holds
the environment's advisory lock (another node's batch meanwhile finds it taken and stops its pass) and locks
the rows it picked (FOR UPDATE SKIP LOCKED) besides.

The bucket is 15 minutes, not an hour, because every UTC offset and DST change in use falls on a quarter
hour (India's +05:30, Nepal's +05:45, Lord Howe's half-hour DST): a local hour or day is then a whole number
of buckets, and a report over rolled periods is exactly the one the rows gave, in any time zone.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql, sqlite

from adslot.reporting.invalid import INVALID_FIGURES, invalid_figures
from adslot.reporting.repository import PROGRAMMATIC, delivery_figures
from adslot.storage.database import read_transaction, write_transaction
from adslot.storage.tables import ad_requests, demand_wins, invalid_fires, key_stats, report_rollups

BUCKET_SECONDS = 900
DAY = 86_400
HOUR = 3600
KEYS = ("bucket", "campaign_id", "creative_id", "venue_id", "screen_id")
ADVISORY_LOCK = "adslot retention "
"""Prefix of the PostgreSQL advisory lock's name; the environment's schema completes it."""


def cutoff(now: int, days: int) -> int:
    """Ad requests played before this instant are rolled: `days` before now, down to a whole bucket."""
    edge = now - days * DAY
    return edge - edge % BUCKET_SECONDS


@dataclass(frozen=True, slots=True)
class Batch:
    rows: int
    """Ad requests rolled up and deleted."""
    busy: bool = False
    """Another rollup of this environment held the lock: nothing was done."""


def _literal(value: int) -> sa.ColumnElement[int]:
    """A number written into the SQL: PostgreSQL matches a GROUP BY expression to the selected one by its
    text, which two bound parameters are not."""
    return sa.literal_column(str(int(value)), sa.BigInteger)


def holds_lock(conn: sa.Connection) -> bool:
    """On PostgreSQL, this transaction's hold on the environment's rollup lock; SQLite's is its write turn."""
    if conn.dialect.name != "postgresql":
        return True
    return bool(
        conn.execute(
            sa.text("SELECT pg_try_advisory_xact_lock(hashtext(:prefix || current_schema()))"),
            {"prefix": ADVISORY_LOCK},
        ).scalar()
    )


def _pick(conn: sa.Connection, before: int, now: int, limit: int) -> list[Any]:
    t = ad_requests.c
    statement = (
        sa.select(t.id)
        .where(t.play_time < before, t.settled_at.is_not(None), t.expires_at < now)
        .order_by(t.play_time)
        .limit(limit)
    )
    if conn.dialect.name == "postgresql":
        statement = statement.with_for_update(skip_locked=True)
    return [row[0] for row in conn.execute(statement)]


def _dimensions() -> tuple[sa.ColumnElement[Any], ...]:
    """An ad request's report_rollups key (KEYS): its bucket, campaign, creative, venue and screen. A
    programmatic ad request (no campaign, no creative) is kept under campaign and creative PROGRAMMATIC."""
    t = ad_requests.c
    bucket = t.play_time - t.play_time % _literal(BUCKET_SECONDS)
    screen = sa.func.coalesce(t.screen_id, sa.literal_column("''"))
    campaign = sa.func.coalesce(t.campaign_id, _literal(PROGRAMMATIC))
    creative = sa.func.coalesce(t.creative_id, _literal(PROGRAMMATIC))
    return (bucket, campaign, creative, t.venue_id, screen)


def rolled_rows(conn: sa.Connection, ids: Sequence[Any], now: int) -> list[dict[str, Any]]:
    """The report_rollups rows these ad requests add up to, one per bucket and dimension: the report's
    figures, and their flagged fires per reason."""
    dimensions = _dimensions()
    keyed = [d.label(name) for d, name in zip(dimensions, KEYS, strict=True)]
    statement = (
        sa.select(*keyed, *delivery_figures(now)).where(ad_requests.c.id.in_(ids)).group_by(*dimensions)
    )
    rows: dict[tuple[Any, ...], dict[str, Any]] = {}
    for row in conn.execute(statement).mappings():
        values = {str(name): value for name, value in row.items()}
        for name, value in values.items():
            if name not in KEYS:
                kind = float if isinstance(report_rollups.c[name].type, sa.Float) else int
                values[name] = kind(value or 0)  # PostgreSQL's SUM is NUMERIC, and NULL over no played row
        rows[tuple(values[name] for name in KEYS)] = values | dict.fromkeys(INVALID_FIGURES, 0)
    flagged = (
        sa.select(*keyed, *invalid_figures())
        .select_from(invalid_fires.join(ad_requests, invalid_fires.c.ad_request_id == ad_requests.c.id))
        .where(ad_requests.c.id.in_(ids))
        .group_by(*dimensions)
    )
    for row in conn.execute(flagged).mappings():
        rows[tuple(row[name] for name in KEYS)] |= {name: int(row[name] or 0) for name in INVALID_FIGURES}
    return list(rows.values())


def _add(conn: sa.Connection, rows: list[dict[str, Any]]) -> None:
    """Add the rows' figures to report_rollups, creating the rows that are new."""
    insert = (postgresql.insert if conn.dialect.name == "postgresql" else sqlite.insert)(report_rollups)
    figures = [name for name in rows[0] if name not in KEYS]
    statement = insert.on_conflict_do_update(
        index_elements=list(KEYS),
        set_={name: report_rollups.c[name] + insert.excluded[name] for name in figures},
    )
    conn.execute(statement, rows)


def roll_batch(engine: sa.Engine, before: int, now: int, limit: int) -> Batch:
    """Roll up and delete up to `limit` settled ad requests played before `before`, in one transaction."""
    with write_transaction(engine) as conn:
        if not holds_lock(conn):
            return Batch(0, busy=True)
        ids = _pick(conn, before, now, limit)
        if not ids:
            return Batch(0)
        _add(conn, rolled_rows(conn, ids, now))
        conn.execute(sa.delete(invalid_fires).where(invalid_fires.c.ad_request_id.in_(ids)))
        # A win's figures stay for the demand report; its markup (up to 256 KiB) served its play and goes.
        conn.execute(
            sa.update(demand_wins).where(demand_wins.c.ad_request_id.in_(ids)).values(adm=None, nurl=None)
        )
        deleted = conn.execute(sa.delete(ad_requests).where(ad_requests.c.id.in_(ids))).rowcount
        if deleted != len(ids):  # never expected: rolled back rather than counted twice
            raise RuntimeError(f"rollup deleted {deleted} of the {len(ids)} ad requests it summed")
        return Batch(len(ids))


def trim_key_stats(engine: sa.Engine, before: int, limit: int) -> int:
    """Delete up to `limit` key_stats hours before `before` (only the Health page reads them, a week at
    most); the number deleted."""
    k = key_stats.c
    oldest = sa.select(k.hour, k.key_id).where(k.hour < before).order_by(k.hour).limit(limit)
    with write_transaction(engine) as conn:
        return int(conn.execute(sa.delete(key_stats).where(sa.tuple_(k.hour, k.key_id).in_(oldest))).rowcount)


def due(engine: sa.Engine, before: int) -> bool:
    """Whether anything waits to be rolled up or trimmed: one indexed read, without a write turn."""
    t, k = ad_requests.c, key_stats.c
    with read_transaction(engine) as conn:
        rows = conn.execute(
            sa.select(t.id).where(t.play_time < before, t.settled_at.is_not(None)).limit(1)
        ).first()
        hours = conn.execute(sa.select(k.hour).where(k.hour < before).limit(1)).first()
    return rows is not None or hours is not None
