"""demand partners: the buyers' platforms asked for bids, per environment

Revision ID: 0013
Revises: 0012
Create Date: 2026-12-05
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0013"
down_revision = "0012"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "demand_partners",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("name", sa.String(length=64), nullable=False),
        sa.Column("endpoint", sa.String(length=2048), nullable=False),
        sa.Column("timeout_ms", sa.Integer(), nullable=False),
        sa.Column("floor_cpm_micros", sa.BigInteger(), nullable=False),
        sa.Column("currency", sa.String(length=3), nullable=False),
        sa.Column("auction", sa.String(length=8), nullable=False),
        sa.Column("max_qps", sa.Integer(), nullable=True),
        sa.Column("venues", sa.Text(), nullable=True),
        sa.Column("auto_approve", sa.Boolean(), nullable=False),
        sa.Column("status", sa.String(length=16), nullable=False),
        sa.Column("created_at", sa.BigInteger(), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_demand_partners")),
        sa.UniqueConstraint("name", name=op.f("uq_demand_partners_name")),
    )


def downgrade() -> None:
    op.drop_table("demand_partners")
