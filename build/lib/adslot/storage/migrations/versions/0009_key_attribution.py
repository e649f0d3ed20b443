"""key attribution: which API key asked for each ad request, and requests per key and hour

ad_requests.key_id names the key (one key, one player integration) behind each filled ad request, and
key_stats counts every ad request per key and hour of play_time, filled or not, as request_stats does per
screen: together they give the Health page its go-live criteria per integration. The new column is nullable
and has no default, so adding it rewrites no row on either database; ad requests stored before stay
unattributed (null) and count for no key.

Revision ID: 0009
Revises: 0008
Create Date: 2026-12-04
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0009"
down_revision = "0008"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "key_stats",
        sa.Column("key_id", sa.Integer(), autoincrement=False, nullable=False),
        sa.Column("hour", sa.BigInteger(), nullable=False),
        sa.Column("requests", sa.BigInteger(), server_default="0", nullable=False),
        sa.Column("fills", sa.BigInteger(), server_default="0", nullable=False),
        sa.PrimaryKeyConstraint("hour", "key_id", name=op.f("pk_key_stats")),
    )
    with op.batch_alter_table("ad_requests", schema=None) as batch_op:
        batch_op.add_column(sa.Column("key_id", sa.Integer(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("ad_requests", schema=None) as batch_op:
        batch_op.drop_column("key_id")
    op.drop_table("key_stats")
