"""console sign-in throttle per client address

Revision ID: 0017
Revises: 0016
Create Date: 2026-12-07
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0017"
down_revision = "0016"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "console_sign_in_sources",
        sa.Column("source", sa.String(length=64), nullable=False),
        sa.Column("failures", sa.Integer(), nullable=False),
        sa.Column("last_failed_at", sa.BigInteger(), nullable=False),
        sa.Column("locked_until", sa.BigInteger(), nullable=False),
        sa.PrimaryKeyConstraint("source"),
    )
    op.create_index(
        "ix_console_sign_in_sources_last_failed_at", "console_sign_in_sources", ["last_failed_at"]
    )


def downgrade() -> None:
    op.drop_index("ix_console_sign_in_sources_last_failed_at", table_name="console_sign_in_sources")
    op.drop_table("console_sign_in_sources")
