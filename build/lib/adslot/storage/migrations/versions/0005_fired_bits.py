"""fired bits: the fires an ad request has stored become bits of its own row, and pop_fires goes

A first fire was an INSERT into pop_fires (a table and its primary-key index) and an UPDATE of the ad
request; now it is the UPDATE alone, which also sets the fire's bit. The bit values are the ledger's
FIRE_BITS, written out here as they were at this revision (a migration never imports code that may change).

Revision ID: 0005
Revises: 0004
Create Date: 2026-11-25
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None

EVENTS = (
    ("impression", "impression_at"),
    ("start", "start_at"),
    ("firstQuartile", "first_quartile_at"),
    ("midpoint", "midpoint_at"),
    ("thirdQuartile", "third_quartile_at"),
    ("complete", "complete_at"),
)
LAYERS = ("wrapper", "inline")
BITS = {
    (event, layer): 1 << (2 * n + k) for n, (event, _) in enumerate(EVENTS) for k, layer in enumerate(LAYERS)
}


def upgrade() -> None:
    with op.batch_alter_table("ad_requests") as batch:
        batch.add_column(sa.Column("fired", sa.Integer(), server_default="0", nullable=False))
    # Each stored (event, layer) is one pop_fires row (its primary key), so the sum of their bits is their OR.
    bit = " ".join(
        f"WHEN f.event = '{event}' AND f.layer = '{layer}' THEN {b}" for (event, layer), b in BITS.items()
    )
    op.execute(
        f"UPDATE ad_requests SET fired = (SELECT COALESCE(SUM(CASE {bit} ELSE 0 END), 0) FROM pop_fires f "
        "WHERE f.ad_request_id = ad_requests.id) "
        "WHERE id IN (SELECT ad_request_id FROM pop_fires)"
    )
    op.drop_table("pop_fires")


def downgrade() -> None:
    op.create_table(
        "pop_fires",
        sa.Column("ad_request_id", sa.Uuid(), nullable=False),
        sa.Column("event", sa.String(length=16), nullable=False),
        sa.Column("layer", sa.String(length=8), nullable=False),
        sa.Column("at", sa.BigInteger(), nullable=False),
        sa.PrimaryKeyConstraint("ad_request_id", "event", "layer", name=op.f("pk_pop_fires")),
    )
    # The bits keep no time of their own: each fire gets its event's first time (the first layer's).
    for (event, layer), b in BITS.items():
        column = dict(EVENTS)[event]
        op.execute(
            "INSERT INTO pop_fires (ad_request_id, event, layer, at) "
            f"SELECT id, '{event}', '{layer}', COALESCE({column}, created_at) FROM ad_requests "
            f"WHERE (fired & {b}) <> 0"
        )
    with op.batch_alter_table("ad_requests") as batch:
        batch.drop_column("fired")
