"""ledger answers: each worker's latest batch answers, so a resent batch is never applied twice

Revision ID: 0004
Revises: 0003
Create Date: 2026-11-25
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "ledger_answers",
        sa.Column("client", sa.LargeBinary(length=16), nullable=False),
        sa.Column("slot", sa.Integer(), autoincrement=False, nullable=False),
        sa.Column("seq", sa.BigInteger(), nullable=False),
        sa.Column("at", sa.BigInteger(), nullable=False),
        sa.Column("answer", sa.LargeBinary(), nullable=False),
        sa.PrimaryKeyConstraint("client", "slot", name=op.f("pk_ledger_answers")),
    )


def downgrade() -> None:
    op.drop_table("ledger_answers")
