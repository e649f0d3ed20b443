"""screen status, plays per screen and hour, venue opening hours, alerts and their delivery outbox

Revision ID: 0020
Revises: 0019
Create Date: 2026-12-07
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0020"
down_revision = "0019"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "screen_status",
        sa.Column("venue_id", sa.String(length=128), nullable=False),
        sa.Column("screen_id", sa.String(length=128), nullable=False),
        sa.Column("first_seen_at", sa.BigInteger(), nullable=False),
        sa.Column("last_request_at", sa.BigInteger(), nullable=True),
        sa.Column("last_fill_at", sa.BigInteger(), nullable=True),
        sa.Column("last_play_at", sa.BigInteger(), nullable=True),
        sa.Column("window_start", sa.BigInteger(), nullable=False),
        sa.Column("window_fills", sa.BigInteger(), server_default="0", nullable=False),
        sa.Column("window_plays", sa.BigInteger(), server_default="0", nullable=False),
        sa.PrimaryKeyConstraint("venue_id", "screen_id", name=op.f("pk_screen_status")),
    )
    op.create_table(
        "screen_plays",
        sa.Column("venue_id", sa.String(length=128), nullable=False),
        sa.Column("screen_id", sa.String(length=128), nullable=False),
        sa.Column("hour", sa.BigInteger(), nullable=False),
        sa.Column("plays", sa.BigInteger(), server_default="0", nullable=False),
        sa.PrimaryKeyConstraint("venue_id", "screen_id", "hour", name=op.f("pk_screen_plays")),
    )
    op.create_table(
        "venue_hours",
        sa.Column("venue_id", sa.String(length=128), nullable=False),
        sa.Column("schedule", sa.Text(), nullable=False),
        sa.ForeignKeyConstraint(
            ["venue_id"], ["venues.venue_id"], name=op.f("fk_venue_hours_venue_id_venues")
        ),
        sa.PrimaryKeyConstraint("venue_id", name=op.f("pk_venue_hours")),
    )
    op.create_table(
        "alerts",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("kind", sa.String(length=32), nullable=False),
        sa.Column("venue_id", sa.String(length=128), nullable=False),
        sa.Column("screen_id", sa.String(length=128), nullable=False),
        sa.Column("episode", sa.BigInteger(), nullable=False),
        sa.Column("raised_at", sa.BigInteger(), nullable=False),
        sa.Column("cleared_at", sa.BigInteger(), nullable=True),
        sa.Column("detail", sa.Text(), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_alerts")),
        sa.UniqueConstraint("kind", "venue_id", "screen_id", "episode", name="uq_alerts_episode"),
    )
    op.create_index("ix_alerts_cleared_at", "alerts", ["cleared_at"])
    op.create_table(
        "alert_webhooks",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("url", sa.String(length=2048), nullable=False),
        sa.Column("secret", sa.String(length=128), nullable=False),
        sa.Column("created_at", sa.BigInteger(), nullable=False),
        sa.Column("removed_at", sa.BigInteger(), nullable=True),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_alert_webhooks")),
    )
    op.create_table(
        "alert_deliveries",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("alert_id", sa.Integer(), nullable=False),
        sa.Column("event", sa.String(length=16), nullable=False),
        sa.Column("channel", sa.String(length=16), nullable=False),
        sa.Column("target", sa.String(length=2048), nullable=False),
        sa.Column("body", sa.Text(), nullable=False),
        sa.Column("created_at", sa.BigInteger(), nullable=False),
        sa.Column("next_at", sa.BigInteger(), nullable=False),
        sa.Column("attempts", sa.Integer(), server_default="0", nullable=False),
        sa.Column("claimed_until", sa.BigInteger(), server_default="0", nullable=False),
        sa.Column("delivered_at", sa.BigInteger(), nullable=True),
        sa.Column("last_error", sa.Text(), nullable=True),
        sa.ForeignKeyConstraint(
            ["alert_id"], ["alerts.id"], name=op.f("fk_alert_deliveries_alert_id_alerts")
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_alert_deliveries")),
    )
    op.create_index(
        "ix_alert_deliveries_pending", "alert_deliveries", ["delivered_at", "channel", "target", "id"]
    )
    op.create_table(
        "alert_attempts",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("delivery_id", sa.Integer(), nullable=False),
        sa.Column("at", sa.BigInteger(), nullable=False),
        sa.Column("ok", sa.Boolean(), nullable=False),
        sa.Column("status", sa.Integer(), nullable=True),
        sa.Column("error", sa.Text(), nullable=True),
        sa.ForeignKeyConstraint(
            ["delivery_id"],
            ["alert_deliveries.id"],
            name=op.f("fk_alert_attempts_delivery_id_alert_deliveries"),
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_alert_attempts")),
    )
    op.create_index("ix_alert_attempts_delivery_id", "alert_attempts", ["delivery_id"])


def downgrade() -> None:
    op.drop_index("ix_alert_attempts_delivery_id", table_name="alert_attempts")
    op.drop_table("alert_attempts")
    op.drop_index("ix_alert_deliveries_pending", table_name="alert_deliveries")
    op.drop_table("alert_deliveries")
    op.drop_table("alert_webhooks")
    op.drop_index("ix_alerts_cleared_at", table_name="alerts")
    op.drop_table("alerts")
    op.drop_table("venue_hours")
    op.drop_table("screen_plays")
    op.drop_table("screen_status")
