"""partner notice hosts and credential header; credentials move out of endpoint URLs

Revision ID: 0016
Revises: 0015
Create Date: 2026-12-07

An endpoint stored with user info (`https://user:pass@bid.example/`) is rewritten without it, and its user
and password become the partner's `Authorization: Basic` header: the very header the bid requests carried
(aiohttp turned the URL's user info into it), so the partner sees no change, and the credentials are no
longer shown with the endpoint.
"""

from __future__ import annotations

import base64
from urllib.parse import unquote, urlsplit, urlunsplit

import sqlalchemy as sa
from alembic import op

revision = "0016"
down_revision = "0015"
branch_labels = None
depends_on = None


def basic_credentials(endpoint: str) -> tuple[str, str] | None:
    """(endpoint without user info, `Basic ...` value) for an endpoint with user info; None otherwise."""
    parts = urlsplit(endpoint)
    userinfo, at, hostport = parts.netloc.rpartition("@")
    if not at:
        return None
    user, _, password = userinfo.partition(":")
    pair = f"{unquote(user)}:{unquote(password)}"
    try:
        raw = pair.encode("latin-1")  # aiohttp's BasicAuth encoding
    except UnicodeEncodeError:
        raw = pair.encode()
    bare = urlunsplit((parts.scheme, hostport, parts.path, parts.query, parts.fragment))
    return bare, "Basic " + base64.b64encode(raw).decode("ascii")


def upgrade() -> None:
    with op.batch_alter_table("demand_partners") as batch:
        batch.add_column(sa.Column("notice_hosts", sa.Text(), nullable=True))
        batch.add_column(sa.Column("auth_header_name", sa.String(length=128), nullable=True))
        batch.add_column(sa.Column("auth_header_value", sa.Text(), nullable=True))
    partners = sa.table(
        "demand_partners",
        sa.column("id", sa.Integer()),
        sa.column("endpoint", sa.String()),
        sa.column("auth_header_name", sa.String()),
        sa.column("auth_header_value", sa.Text()),
    )
    conn = op.get_bind()
    rows = conn.execute(sa.select(partners.c.id, partners.c.endpoint).where(partners.c.endpoint.like("%@%")))
    for ident, endpoint in list(rows):
        moved = basic_credentials(endpoint)
        if moved is None:
            continue
        bare, value = moved
        conn.execute(
            sa.update(partners)
            .where(partners.c.id == ident)
            .values(endpoint=bare, auth_header_name="Authorization", auth_header_value=value)
        )


def downgrade() -> None:
    with op.batch_alter_table("demand_partners") as batch:
        batch.drop_column("auth_header_value")
        batch.drop_column("auth_header_name")
        batch.drop_column("notice_hosts")
