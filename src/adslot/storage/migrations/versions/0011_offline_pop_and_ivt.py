"""offline proof of play and invalid traffic: what an ad request needs to judge its fires, and flagged fires

ad_requests.source_network is the network its ad request came from (ledger.ivt.network_key) and
ad_requests.duration_seconds its creative's duration at issue time: the foreign_network and too_fast rules
judge a fire against them. Both are nullable without a default, so adding them rewrites no row on either
database; rows stored before stay null and are judged by the other rules only. invalid_fires keeps each
flagged fire with its reason (reports count them per reason, never as plays).

Revision ID: 0011
Revises: 0010
Create Date: 2026-12-10
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0011"
down_revision = "0010"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "invalid_fires",
        sa.Column("ad_request_id", sa.Uuid(), nullable=False),
        sa.Column("event", sa.String(length=16), nullable=False),
        sa.Column("layer", sa.String(length=8), nullable=False),
        sa.Column("played_at", sa.BigInteger(), nullable=False),
        sa.Column("reason", sa.String(length=32), nullable=False),
        sa.PrimaryKeyConstraint("ad_request_id", "event", "layer", name=op.f("pk_invalid_fires")),
    )
    with op.batch_alter_table("ad_requests", schema=None) as batch_op:
        batch_op.add_column(sa.Column("source_network", sa.BigInteger(), nullable=True))
        batch_op.add_column(sa.Column("duration_seconds", sa.Integer(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("ad_requests", schema=None) as batch_op:
        batch_op.drop_column("duration_seconds")
        batch_op.drop_column("source_network")
    op.drop_table("invalid_fires")
