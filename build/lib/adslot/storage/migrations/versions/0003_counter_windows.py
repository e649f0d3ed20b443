"""counter windows: delivery_counters.closes_at, so the expiry sweep can drop counters of windows long past

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-23
"""

from __future__ import annotations

import datetime

import sqlalchemy as sa
from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None

BACKFILL_CHUNK = 1000

counters = sa.table("delivery_counters", sa.column("key", sa.String), sa.column("closes_at", sa.BigInteger))
HOUR = 3600
DAY = 24 * HOUR
LATEST_MIDNIGHT = 12 * HOUR


def closes_at(key: str) -> int | None:
    """The window's close of a counter key as this revision's code wrote keys (ledger/claims.py then), kept
    here so that the migration does what it did whatever the ledger's code becomes."""
    try:
        if key.startswith("c"):  # c{id}:hour:{epoch hour}, c{id}:day:{date}:{metric}, c{id}:life:{metric}
            _, kind, when = key.split(":")[:3]
        elif key.startswith("f"):  # f{id}:{place}:h:{epoch hour}, f{id}:{place}:d:{date}
            head, _, when = key.rpartition(":")
            kind = head.rpartition(":")[2]
        else:
            return None
        if kind in ("hour", "h"):
            return int(when) + HOUR
        if kind not in ("day", "d"):
            return None
        day = datetime.date.fromisoformat(when)
    except ValueError:
        return None
    midnight = datetime.datetime(day.year, day.month, day.day, tzinfo=datetime.UTC)
    return int(midnight.timestamp()) + DAY + LATEST_MIDNIGHT


def upgrade() -> None:
    with op.batch_alter_table("delivery_counters", schema=None) as batch_op:
        batch_op.add_column(sa.Column("closes_at", sa.BigInteger(), nullable=True))
        batch_op.create_index("ix_delivery_counters_closes_at", ["closes_at"], unique=False)
    # Counters written before this revision learn their window from their key, as new ones do.
    conn = op.get_bind()
    keys = [row[0] for row in conn.execute(sa.select(counters.c.key))]
    rows = [{"k": key, "c": at} for key in keys if (at := closes_at(key)) is not None]
    statement = (
        sa.update(counters).where(counters.c.key == sa.bindparam("k")).values(closes_at=sa.bindparam("c"))
    )
    for i in range(0, len(rows), BACKFILL_CHUNK):
        conn.execute(statement, rows[i : i + BACKFILL_CHUNK])


def downgrade() -> None:
    with op.batch_alter_table("delivery_counters", schema=None) as batch_op:
        batch_op.drop_index("ix_delivery_counters_closes_at")
        batch_op.drop_column("closes_at")
