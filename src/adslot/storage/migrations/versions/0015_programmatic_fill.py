"""programmatic fill: ad requests a demand partner won, their billing outbox, the partners' tallies, deals

Revision ID: 0015
Revises: 0014
Create Date: 2026-12-05
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0015"
down_revision = "0014"
branch_labels = None
depends_on = None

DUE = "billed_at IS NULL AND bill_due_at IS NOT NULL"


def upgrade() -> None:
    with op.batch_alter_table("demand_partners") as batch:
        batch.add_column(sa.Column("deals", sa.Text(), nullable=True))
        batch.add_column(sa.Column("blocked_domains", sa.Text(), nullable=True))
    with op.batch_alter_table("ad_requests") as batch:
        batch.alter_column("campaign_id", existing_type=sa.Integer(), nullable=True)
        batch.alter_column("creative_id", existing_type=sa.Integer(), nullable=True)
    op.create_table(
        "demand_wins",
        sa.Column("ad_request_id", sa.Uuid(), nullable=False),
        sa.Column("partner", sa.String(length=64), nullable=False),
        sa.Column("demand_creative_id", sa.Integer(), nullable=True),
        sa.Column("crid", sa.String(length=256), nullable=True),
        sa.Column("auction_id", sa.String(length=64), nullable=False),
        sa.Column("bid_id", sa.String(length=256), nullable=True),
        sa.Column("imp_id", sa.String(length=64), nullable=False),
        sa.Column("seat", sa.String(length=256), nullable=True),
        sa.Column("ad_id", sa.String(length=256), nullable=True),
        sa.Column("deal_id", sa.String(length=256), nullable=True),
        sa.Column("adomain", sa.Text(), nullable=True),
        sa.Column("bid_price_micros", sa.BigInteger(), nullable=False),
        sa.Column("price_micros", sa.BigInteger(), nullable=False),
        sa.Column("min_to_win_micros", sa.BigInteger(), nullable=False),
        sa.Column("currency", sa.String(length=3), nullable=False),
        sa.Column("multiplier", sa.Float(), nullable=False),
        sa.Column("adm", sa.Text(), nullable=True),
        sa.Column("nurl", sa.Text(), nullable=True),
        sa.Column("burl", sa.Text(), nullable=True),
        sa.Column("play_time", sa.BigInteger(), nullable=False),
        sa.Column("created_at", sa.BigInteger(), nullable=False),
        sa.Column("bill_due_at", sa.BigInteger(), nullable=True),
        sa.Column("billed_at", sa.BigInteger(), nullable=True),
        sa.Column("bill_attempts", sa.Integer(), server_default="0", nullable=False),
        sa.Column("bill_claimed_until", sa.BigInteger(), nullable=True),
        sa.Column("bill_error", sa.String(length=256), nullable=True),
        sa.PrimaryKeyConstraint("ad_request_id", name=op.f("pk_demand_wins")),
    )
    op.create_index("ix_demand_wins_partner_play_time", "demand_wins", ["partner", "play_time"], unique=False)
    op.create_index(
        "ix_demand_wins_bill_due",
        "demand_wins",
        ["bill_due_at"],
        unique=False,
        sqlite_where=sa.text(DUE),
        postgresql_where=sa.text(DUE),
    )
    op.create_table(
        "demand_stats",
        sa.Column("partner", sa.String(length=64), nullable=False),
        sa.Column("hour", sa.BigInteger(), nullable=False),
        sa.Column("metric", sa.String(length=64), nullable=False),
        sa.Column("count", sa.BigInteger(), nullable=False),
        sa.PrimaryKeyConstraint("partner", "hour", "metric", name=op.f("pk_demand_stats")),
    )


def downgrade() -> None:
    op.drop_table("demand_stats")
    op.drop_index("ix_demand_wins_bill_due", table_name="demand_wins")
    op.drop_index("ix_demand_wins_partner_play_time", table_name="demand_wins")
    op.drop_table("demand_wins")
    op.execute("DELETE FROM ad_requests WHERE campaign_id IS NULL")
    with op.batch_alter_table("ad_requests") as batch:
        batch.alter_column("creative_id", existing_type=sa.Integer(), nullable=False)
        batch.alter_column("campaign_id", existing_type=sa.Integer(), nullable=False)
    with op.batch_alter_table("demand_partners") as batch:
        batch.drop_column("blocked_domains")
        batch.drop_column("deals")
