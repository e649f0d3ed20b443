"""ledger_written(): lets a PostgreSQL ledger batch that takes no row locks fail as a whole

A PostgreSQL ledger writer remembers the state of the ad requests it wrote, as SQLite's does, and sends a
batch of pixels on remembered ad requests as ONE statement outside an explicit transaction: each row is
updated only where its fired bits and settlement are still the ones the writer remembers, and the statement
ends by calling this function with how many rows it updated and answers it stored, against how many it
meant to. Any difference raises, and the error rolls the whole statement back: a row another node changed
meanwhile (SQLSTATE AL002, the writer then reads and locks the rows and applies the batch again), or a
resent frame already committed (AL001, answered with what that commit stored). SQLite has no functions of
this kind and needs none: its writer holds the database's one write lock for every batch.

Revision ID: 0008
Revises: 0007
Create Date: 2026-11-28
"""

from __future__ import annotations

from alembic import op

revision = "0008"
down_revision = "0007"
branch_labels = None
depends_on = None


def upgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        op.execute(
            """
            CREATE FUNCTION ledger_written(
                updated bigint, meant_updated bigint, answered bigint, meant_answered bigint
            ) RETURNS bigint LANGUAGE plpgsql AS $$
            BEGIN
                IF answered <> meant_answered THEN
                    RAISE EXCEPTION 'a resent ledger frame was committed before' USING ERRCODE = 'AL001';
                END IF;
                IF updated <> meant_updated THEN
                    RAISE EXCEPTION 'an ad request changed since this ledger writer last wrote it'
                        USING ERRCODE = 'AL002';
                END IF;
                RETURN answered;
            END
            $$
            """
        )


def downgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        op.execute("DROP FUNCTION ledger_written(bigint, bigint, bigint, bigint)")
