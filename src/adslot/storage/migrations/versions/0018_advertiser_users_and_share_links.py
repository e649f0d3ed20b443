"""console advertiser users' bindings and campaign share links

Revision ID: 0018
Revises: 0017
Create Date: 2026-12-07
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0018"
down_revision = "0017"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "console_user_advertisers",
        sa.Column("user_id", sa.Integer(), nullable=False),
        sa.Column("advertiser_id", sa.Integer(), nullable=False),
        sa.ForeignKeyConstraint(
            ["user_id"], ["console_users.id"], name=op.f("fk_console_user_advertisers_user_id_console_users")
        ),
        sa.ForeignKeyConstraint(
            ["advertiser_id"],
            ["advertisers.id"],
            name=op.f("fk_console_user_advertisers_advertiser_id_advertisers"),
        ),
        sa.PrimaryKeyConstraint("user_id", "advertiser_id", name=op.f("pk_console_user_advertisers")),
    )
    op.create_table(
        "campaign_share_links",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("campaign_id", sa.Integer(), nullable=False),
        sa.Column("token_hash", sa.String(length=64), nullable=False),
        sa.Column("label", sa.String(length=128), nullable=True),
        sa.Column("period_start", sa.BigInteger(), nullable=False),
        sa.Column("period_end", sa.BigInteger(), nullable=False),
        sa.Column("created_by", sa.String(length=300), nullable=False),
        sa.Column("created_at", sa.BigInteger(), nullable=False),
        sa.Column("expires_at", sa.BigInteger(), nullable=False),
        sa.Column("revoked_at", sa.BigInteger(), nullable=True),
        sa.Column("opens", sa.Integer(), server_default="0", nullable=False),
        sa.Column("last_opened_at", sa.BigInteger(), nullable=True),
        sa.ForeignKeyConstraint(
            ["campaign_id"], ["campaigns.id"], name=op.f("fk_campaign_share_links_campaign_id_campaigns")
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_campaign_share_links")),
        sa.UniqueConstraint("token_hash", name=op.f("uq_campaign_share_links_token_hash")),
    )
    op.create_index(
        op.f("ix_campaign_share_links_campaign_id"), "campaign_share_links", ["campaign_id"], unique=False
    )


def downgrade() -> None:
    op.drop_index(op.f("ix_campaign_share_links_campaign_id"), table_name="campaign_share_links")
    op.drop_table("campaign_share_links")
    op.drop_table("console_user_advertisers")
