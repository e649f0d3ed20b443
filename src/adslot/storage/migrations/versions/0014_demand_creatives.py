"""demand creatives: each partner's crids, held for the media owner's approval when first seen

Revision ID: 0014
Revises: 0013
Create Date: 2026-12-05
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0014"
down_revision = "0013"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "demand_creatives",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("partner_id", sa.Integer(), nullable=False),
        sa.Column("crid", sa.String(length=256), nullable=False),
        sa.Column("adomain", sa.Text(), nullable=True),
        sa.Column("adm", sa.Text(), nullable=True),
        sa.Column("nurl", sa.String(length=2048), nullable=True),
        sa.Column("status", sa.String(length=16), nullable=False),
        sa.Column("first_seen_at", sa.BigInteger(), nullable=False),
        sa.Column("decided_at", sa.BigInteger(), nullable=True),
        sa.Column("decided_by", sa.String(length=128), nullable=True),
        sa.ForeignKeyConstraint(
            ["partner_id"],
            ["demand_partners.id"],
            name=op.f("fk_demand_creatives_partner_id_demand_partners"),
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_demand_creatives")),
        sa.UniqueConstraint("partner_id", "crid", name=op.f("uq_demand_creatives_partner_id")),
    )
    op.create_index(op.f("ix_demand_creatives_partner_id"), "demand_creatives", ["partner_id"], unique=False)


def downgrade() -> None:
    op.drop_index(op.f("ix_demand_creatives_partner_id"), table_name="demand_creatives")
    op.drop_table("demand_creatives")
