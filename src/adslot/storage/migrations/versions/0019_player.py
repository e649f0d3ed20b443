"""the reference player: player-link keys, venue player settings, player status

Revision ID: 0019
Revises: 0018
Create Date: 2026-12-07
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0019"
down_revision = "0018"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "player_keys",
        sa.Column("key_id", sa.Integer(), autoincrement=False, nullable=False),
        sa.Column("venue_id", sa.String(length=128), nullable=False),
        sa.Column("screen_id", sa.String(length=128), nullable=False),
        sa.Column("created_at", sa.BigInteger(), nullable=False),
        sa.ForeignKeyConstraint(["key_id"], ["api_keys.id"], name="fk_player_keys_key_id_api_keys"),
        sa.PrimaryKeyConstraint("key_id", name="pk_player_keys"),
    )
    op.create_index("ix_player_keys_venue_screen", "player_keys", ["venue_id", "screen_id"])
    op.create_table(
        "venue_players",
        sa.Column("venue_id", sa.String(length=128), nullable=False),
        sa.Column("slot_seconds", sa.Integer(), nullable=False),
        sa.Column("lead_seconds", sa.Integer(), nullable=False),
        sa.Column("fallback_urls", sa.Text(), server_default="[]", nullable=False),
        sa.ForeignKeyConstraint(["venue_id"], ["venues.venue_id"], name="fk_venue_players_venue_id_venues"),
        sa.PrimaryKeyConstraint("venue_id", name="pk_venue_players"),
    )
    op.create_table(
        "player_status",
        sa.Column("venue_id", sa.String(length=128), nullable=False),
        sa.Column("screen_id", sa.String(length=128), nullable=False),
        sa.Column("version", sa.String(length=32), nullable=False),
        sa.Column("fires_queued", sa.Integer(), nullable=False),
        sa.Column("cache_bytes", sa.BigInteger(), nullable=False),
        sa.Column("errors", sa.Integer(), nullable=False),
        sa.Column("last_error", sa.String(length=512), nullable=True),
        sa.Column("last_ad_request_at", sa.BigInteger(), nullable=True),
        sa.Column("reported_at", sa.BigInteger(), nullable=False),
        sa.PrimaryKeyConstraint("venue_id", "screen_id", name="pk_player_status"),
    )


def downgrade() -> None:
    op.drop_table("player_status")
    op.drop_table("venue_players")
    op.drop_index("ix_player_keys_venue_screen", table_name="player_keys")
    op.drop_table("player_keys")
