"""Alerts and their outbox in the database: raising and clearing an episode once, whoever looks, and the
deliveries each notice owes, claimed and marked so that each is sent by one node, in order per receiver.

Raising inserts the alert under its unique (kind, venue, screen, episode) key and, only if that insert
landed, one delivery per receiver in the same transaction; clearing sets cleared_at only where it is still
null and, only if it did, adds the recovery's deliveries. So two nodes looking at once raise and clear each
episode once, and a notice is owed exactly when its alert's change commits (a durable outbox).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass

import msgspec
import sqlalchemy as sa
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert

from adslot.fleet.alerts import AlertKey, OpenAlert
from adslot.storage.tables import alert_attempts, alert_deliveries, alerts

CLAIM_SECONDS = 60
"""How long a claimed delivery is held: far longer than one attempt takes (webhooks time out at 10 s)."""
MAX_BACKOFF_SECONDS = 900


def backoff(attempts: int) -> int:
    """Seconds before the next try after `attempts` failed ones: 1, 2, 4 ... up to 15 minutes, forever."""
    return int(min(MAX_BACKOFF_SECONDS, 2 ** max(0, attempts - 1)))


@dataclass(frozen=True, slots=True)
class Receiver:
    channel: str
    """webhook or email"""
    target: str
    """The webhook's id, or the email address."""


@dataclass(frozen=True, slots=True)
class Delivery:
    id: int
    alert_id: int
    event: str
    channel: str
    target: str
    body: str
    attempts: int
    claimed_until: int


class AlertRow(msgspec.Struct):
    id: int
    kind: str
    venue_id: str
    screen_id: str
    episode: int
    raised_at: int
    cleared_at: int | None
    detail: str


class AttemptRow(msgspec.Struct):
    delivery_id: int
    alert_id: int
    event: str
    channel: str
    target: str
    at: int
    ok: bool
    status: int | None
    error: str | None


def open_alerts(conn: sa.Connection) -> list[OpenAlert]:
    a = alerts.c
    rows = conn.execute(
        sa.select(a.id, a.kind, a.venue_id, a.screen_id, a.episode).where(a.cleared_at.is_(None))
    )
    return [OpenAlert(r.id, AlertKey(r.kind, r.venue_id, r.screen_id, r.episode)) for r in rows]


def body_of(alert_id: int, event: str, key: AlertKey, detail: str, at: int, environment: str) -> str:
    return json.dumps(
        {
            "alert_id": alert_id,
            "event": event,
            "kind": key.kind,
            "venue_id": key.venue_id,
            "screen_id": key.screen_id or None,
            "since": key.episode,
            "at": at,
            "environment": environment,
            "message": detail if event == "raised" else f"recovered: {detail}",
        },
        separators=(",", ":"),
    )


def _owe(
    conn: sa.Connection, alert_id: int, event: str, body: str, receivers: Sequence[Receiver], now: int
) -> None:
    if receivers:
        conn.execute(
            sa.insert(alert_deliveries),
            [
                {
                    "alert_id": alert_id,
                    "event": event,
                    "channel": r.channel,
                    "target": r.target,
                    "body": body,
                    "created_at": now,
                    "next_at": now,
                }
                for r in receivers
            ],
        )


def raise_alert(
    conn: sa.Connection,
    key: AlertKey,
    detail: str,
    now: int,
    receivers: Sequence[Receiver],
    environment: str,
) -> int | None:
    """The new alert's id, with its deliveries owed; None when another look raised this episode first."""
    insert = pg_insert if conn.dialect.name == "postgresql" else sqlite_insert
    statement = (
        insert(alerts)
        .values(
            kind=key.kind,
            venue_id=key.venue_id,
            screen_id=key.screen_id,
            episode=key.episode,
            raised_at=now,
            detail=detail,
        )
        .on_conflict_do_nothing()
        .returning(alerts.c.id)
    )
    ident = conn.execute(statement).scalar_one_or_none()
    if ident is None:
        return None
    _owe(conn, ident, "raised", body_of(ident, "raised", key, detail, now, environment), receivers, now)
    return int(ident)


def clear_alert(
    conn: sa.Connection, alert: OpenAlert, now: int, receivers: Sequence[Receiver], environment: str
) -> bool:
    """Whether this look cleared it (and owes its recovery notices); False when another did first."""
    a = alerts.c
    done = conn.execute(
        sa.update(alerts).where(a.id == alert.id, a.cleared_at.is_(None)).values(cleared_at=now)
    )
    if done.rowcount != 1:
        return False
    detail = conn.execute(sa.select(a.detail).where(a.id == alert.id)).scalar_one()
    _owe(
        conn,
        alert.id,
        "cleared",
        body_of(alert.id, "cleared", alert.key, detail, now, environment),
        receivers,
        now,
    )
    return True


def pending_heads(conn: sa.Connection, now: int) -> list[Delivery]:
    """The oldest undelivered delivery of each receiver, if it is due and unclaimed: a receiver's notices go
    one at a time, in order, the next only once the one before it got through."""
    d = alert_deliveries.c
    heads = (
        sa.select(sa.func.min(d.id).label("id"))
        .where(d.delivered_at.is_(None))
        .group_by(d.channel, d.target)
        .subquery()
    )
    rows = conn.execute(
        sa.select(d.id, d.alert_id, d.event, d.channel, d.target, d.body, d.attempts, d.claimed_until)
        .join(heads, heads.c.id == d.id)
        .where(d.next_at <= now, d.claimed_until < now)
        .order_by(d.id)
    )
    return [Delivery(*row) for row in rows]


def claim(conn: sa.Connection, delivery: Delivery, now: int) -> bool:
    """Take `delivery` for CLAIM_SECONDS, unless another node took it since it was read."""
    d = alert_deliveries.c
    done = conn.execute(
        sa.update(alert_deliveries)
        .where(d.id == delivery.id, d.claimed_until == delivery.claimed_until, d.delivered_at.is_(None))
        .values(claimed_until=now + CLAIM_SECONDS)
    )
    return done.rowcount == 1


def mark(
    conn: sa.Connection, delivery: Delivery, now: int, ok: bool, status: int | None, error: str | None
) -> None:
    d = alert_deliveries.c
    attempts = delivery.attempts + 1
    values: dict[str, object] = {"attempts": attempts, "claimed_until": 0, "last_error": error}
    if ok:
        values["delivered_at"] = now
    else:
        values["next_at"] = now + backoff(attempts)
    conn.execute(sa.update(alert_deliveries).where(d.id == delivery.id).values(**values))
    conn.execute(
        sa.insert(alert_attempts).values(delivery_id=delivery.id, at=now, ok=ok, status=status, error=error)
    )


def give_up(conn: sa.Connection, delivery: Delivery, now: int, error: str) -> None:
    """A delivery that can never go (its webhook was removed, or its URL or host leads somewhere internal):
    kept as delivered nowhere, with why, and that why shown with the attempts (nothing was sent)."""
    d = alert_deliveries.c
    conn.execute(
        sa.update(alert_deliveries)
        .where(d.id == delivery.id)
        .values(delivered_at=now, claimed_until=0, last_error=error, attempts=delivery.attempts)
    )
    conn.execute(
        sa.insert(alert_attempts).values(delivery_id=delivery.id, at=now, ok=False, status=None, error=error)
    )


def history(conn: sa.Connection, limit: int = 200) -> list[AlertRow]:
    a = alerts.c
    rows = conn.execute(sa.select(alerts).order_by(a.id.desc()).limit(limit))
    return [AlertRow(**dict(r._mapping)) for r in rows]


def attempts_of(conn: sa.Connection, limit: int = 500) -> list[AttemptRow]:
    t, d = alert_attempts.c, alert_deliveries.c
    rows = conn.execute(
        sa.select(t.delivery_id, d.alert_id, d.event, d.channel, d.target, t.at, t.ok, t.status, t.error)
        .join(alert_deliveries, d.id == t.delivery_id)
        .order_by(t.id.desc())
        .limit(limit)
    )
    return [AttemptRow(*r) for r in rows]
