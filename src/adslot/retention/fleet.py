"""Trimming what the fleet keeps per hour and per alert, a batch at a time: screen_plays rows older than their
retention, and alerts past theirs with their deliveries and attempts.

An alert goes only once it cleared before the cutoff and none of its deliveries is still owed: an open alert
is a condition still true (one row per silent screen at most), and an owed notice stays until it is sent or
given up, however long its receiver is down. A delivery attempt older than the cutoff goes in any case: the
delivery keeps its count of attempts and its last error. Each batch is one write transaction; on PostgreSQL
it runs only while it holds the environment's retention lock (rollup.py), so two nodes never trim at once.
Deleting is all a batch does, so a batch killed midway leaves nothing half done.
"""

from __future__ import annotations

import sqlalchemy as sa

from adslot.retention.rollup import holds_lock
from adslot.storage.database import write_transaction
from adslot.storage.tables import alert_attempts, alert_deliveries, alerts, screen_plays


def trim_screen_plays(engine: sa.Engine, before: int, limit: int) -> int:
    """Delete up to `limit` screen_plays hours before `before`; the number deleted."""
    p = screen_plays.c
    oldest = sa.select(p.venue_id, p.screen_id, p.hour).where(p.hour < before).order_by(p.hour).limit(limit)
    with write_transaction(engine) as conn:
        if not holds_lock(conn):
            return 0
        keys = [tuple(row) for row in conn.execute(oldest)]
        if not keys:
            return 0
        done = conn.execute(
            sa.delete(screen_plays).where(sa.tuple_(p.venue_id, p.screen_id, p.hour).in_(keys))
        )
        return int(done.rowcount)


def trim_alerts(engine: sa.Engine, before: int, limit: int) -> int:
    """Delete up to `limit` alerts cleared before `before` whose every delivery is done (sent or given up),
    with their deliveries and those deliveries' attempts; the number of alerts deleted."""
    a, d, t = alerts.c, alert_deliveries.c, alert_attempts.c
    owed = sa.select(d.id).where(d.alert_id == a.id, d.delivered_at.is_(None)).exists()
    pick = sa.select(a.id).where(a.cleared_at < before, ~owed).order_by(a.id).limit(limit)
    with write_transaction(engine) as conn:
        if not holds_lock(conn):
            return 0
        ids = [row[0] for row in conn.execute(pick)]
        if not ids:
            return 0
        deliveries = sa.select(d.id).where(d.alert_id.in_(ids))
        conn.execute(sa.delete(alert_attempts).where(t.delivery_id.in_(deliveries)))
        conn.execute(sa.delete(alert_deliveries).where(d.alert_id.in_(ids)))
        return int(conn.execute(sa.delete(alerts).where(a.id.in_(ids))).rowcount)


def trim_attempts(engine: sa.Engine, before: int, limit: int) -> int:
    """Delete up to `limit` delivery attempts made before `before`, of any delivery; the number deleted."""
    t = alert_attempts.c
    with write_transaction(engine) as conn:
        if not holds_lock(conn):
            return 0
        ids = [
            row[0] for row in conn.execute(sa.select(t.id).where(t.at < before).order_by(t.id).limit(limit))
        ]
        if not ids:
            return 0
        return int(conn.execute(sa.delete(alert_attempts).where(t.id.in_(ids))).rowcount)
