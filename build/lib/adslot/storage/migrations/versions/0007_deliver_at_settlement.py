"""deliver at settlement: a played ad request's reservation moves to delivered when it is settled

Until this revision a counted impression moved its ad request's claimed units from reserved to delivered in
the impression's own batch, which so locked and wrote the campaign's counters (the rows every ad request of
the campaign claims); now the expiry sweep moves them when it settles the ad request as played. Admission
reads only reserved + delivered, which a delivery leaves as it was.

The ad requests played before this revision and not yet settled have delivered already: upgrading settles
them as played at their impression's time, so the sweep does not deliver them again. Downgrading delivers
the reservations of the ad requests played since and not yet settled, which the older code expects
delivered, and leaves them for its sweep to mark as played. Claims are JSON [[counter key, units], ...], as
the ledger stores them.

Revision ID: 0007
Revises: 0006
Create Date: 2026-11-28
"""

from __future__ import annotations

import json
from collections import Counter

import sqlalchemy as sa
from alembic import op

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None

SELECTED = "settled_at IS NULL AND impression_at IS NOT NULL AND claims IS NOT NULL"
"""Played, not settled, holding claims."""


def upgrade() -> None:
    op.execute(
        f"UPDATE ad_requests SET settled_at = impression_at, settle_reason = 'played' WHERE {SELECTED}"
    )


def downgrade() -> None:
    conn = op.get_bind()
    units: Counter[str] = Counter()
    for (claims,) in conn.execute(sa.text(f"SELECT claims FROM ad_requests WHERE {SELECTED}")):
        for key, count in json.loads(claims):
            units[key] += count
    if units:
        conn.execute(
            sa.text(
                "UPDATE delivery_counters SET reserved = reserved - :units, delivered = delivered + :units "
                "WHERE key = :key"
            ),
            [{"key": key, "units": count} for key, count in sorted(units.items())],
        )
