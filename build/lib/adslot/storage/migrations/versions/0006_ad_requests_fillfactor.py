"""ad_requests fillfactor on PostgreSQL: room on each page for the row's updates, so pixels stay HOT

Every pixel updates its ad request's row; rows are inserted in id (time) order, so PostgreSQL packs each
heap page full, and a full page cannot take the row's new version. The update then moves the row to another
page and adds an entry to each of the table's four indexes (a non-HOT update): about half of the pixels'
updates were, measured. Pages filled to half leave room for the new versions (HOT: no index entries; the
old versions are pruned in place): 100% HOT under the benchmark's impressions and tracking, and about a
third less PostgreSQL CPU per pixel (measured at 60%; 50% also keeps a group commit's batch of 20 fires on
consecutive rows in place, which 60% did not). The table takes about twice the pages; without this, the
moved rows and their index entries made it grow anyway. New pages only: rows stored before keep their pages
until rewritten. SQLite has no such setting; this is a no-op there.

Revision ID: 0006
Revises: 0005
Create Date: 2026-11-26
"""

from __future__ import annotations

from alembic import op

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None

FILLFACTOR = 50


def upgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        op.execute(f"ALTER TABLE ad_requests SET (fillfactor = {FILLFACTOR})")


def downgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        op.execute("ALTER TABLE ad_requests RESET (fillfactor)")
