"""report rollups: settled ad requests past the retention, summed per 15-minute bucket

Revision ID: 0012
Revises: 0011
Create Date: 2026-12-10
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0012"
down_revision = "0011"
branch_labels = None
depends_on = None

FIGURES = (
    "fills",
    "plays",
    "starts",
    "first_quartiles",
    "midpoints",
    "third_quartiles",
    "completes",
    "late",
    "duplicates",
    "expired",
    "released",
    "invalid_too_fast",
    "invalid_out_of_order",
    "invalid_foreign_network",
    "invalid_burst",
)


def upgrade() -> None:
    op.create_table(
        "report_rollups",
        sa.Column("bucket", sa.BigInteger(), nullable=False),
        sa.Column("campaign_id", sa.Integer(), autoincrement=False, nullable=False),
        sa.Column("creative_id", sa.Integer(), autoincrement=False, nullable=False),
        sa.Column("venue_id", sa.String(length=128), nullable=False),
        sa.Column("screen_id", sa.String(length=128), nullable=False),
        *(sa.Column(name, sa.BigInteger(), server_default="0", nullable=False) for name in FIGURES[:2]),
        sa.Column("impressions", sa.Float(), server_default="0", nullable=False),
        *(sa.Column(name, sa.BigInteger(), server_default="0", nullable=False) for name in FIGURES[2:]),
        sa.PrimaryKeyConstraint(
            "bucket", "campaign_id", "creative_id", "venue_id", "screen_id", name=op.f("pk_report_rollups")
        ),
    )
    op.create_index("ix_report_rollups_venue_id_bucket", "report_rollups", ["venue_id", "bucket"])


def downgrade() -> None:
    op.drop_index("ix_report_rollups_venue_id_bucket", table_name="report_rollups")
    op.drop_table("report_rollups")
