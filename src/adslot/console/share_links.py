"""Read-only links to one campaign's proof-of-play report, opened without signing in.

The token is 192 random bits shown once, stored only as its SHA-256 hash (auth.keys.hash_key, as keys are:
a slow hash buys nothing for a random secret). A link opens until it expires or is revoked, and every
opening is counted in the same statement that checks it, so concurrent openings all count.
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass

import sqlalchemy as sa

from adslot.auth.keys import hash_key
from adslot.campaigns.repository import get_campaign
from adslot.console.proof import report_period
from adslot.errors import ApiError
from adslot.storage.tables import campaign_share_links

PREFIX = "adslot_share_"
DEFAULT_DAYS = 30
MAX_DAYS = 366
MAX_LABEL = 128
MAX_TOKEN = 128
DAY = 86_400


@dataclass(frozen=True, slots=True)
class ShareLink:
    """A link as listed and audited: never its token."""

    id: int
    campaign_id: int
    label: str | None
    period_start: int
    period_end: int
    created_by: str
    created_at: int
    expires_at: int
    revoked_at: int | None
    opens: int
    last_opened_at: int | None

    def live(self, now: int) -> bool:
        return self.revoked_at is None and self.expires_at > now


def _link(row: sa.RowMapping) -> ShareLink:
    return ShareLink(**{k: row[k] for k in ShareLink.__dataclass_fields__})


def link_path(env_name: str, token: str) -> str:
    """Where a link opens, under the console (prefix it with the public URL)."""
    return f"/console/shared/{env_name}/{token}"


def check_days(days: int | None) -> int:
    if days is None:
        return DEFAULT_DAYS
    if not 1 <= days <= MAX_DAYS:
        raise ApiError(400, "invalid_field", f"a link lasts 1 to {MAX_DAYS} days", "days")
    return days


def check_label(label: str | None) -> str | None:
    label = (label or "").strip() or None
    if label is not None and (len(label) > MAX_LABEL or any(ord(c) < 32 for c in label)):
        raise ApiError(400, "invalid_field", f"a label has at most {MAX_LABEL} printable characters", "label")
    return label


def create_link(
    conn: sa.Connection,
    campaign_id: int,
    *,
    actor: str,
    now: int,
    days: int | None = None,
    label: str | None = None,
    start: int | None = None,
    end: int | None = None,
) -> tuple[str, ShareLink]:
    """A new link and its token (shown once): the report of [start, end), by default the whole flight."""
    campaign = get_campaign(conn, campaign_id)
    lasts, label = check_days(days), check_label(label)
    period_start, period_end = report_period((campaign.start_at, campaign.end_at), start, end, now)
    token = PREFIX + secrets.token_urlsafe(24)
    values = {
        "campaign_id": campaign.id,
        "token_hash": hash_key(token),
        "label": label,
        "period_start": period_start,
        "period_end": period_end,
        "created_by": actor,
        "created_at": now,
        "expires_at": now + lasts * DAY,
        "revoked_at": None,
        "opens": 0,
        "last_opened_at": None,
    }
    result = conn.execute(sa.insert(campaign_share_links).values(**values))
    link_id = int(result.inserted_primary_key[0])  # type: ignore[index]
    del values["token_hash"]
    return token, ShareLink(id=link_id, **values)  # type: ignore[arg-type]


def list_links(conn: sa.Connection, campaign_id: int) -> list[ShareLink]:
    t = campaign_share_links.c
    statement = sa.select(campaign_share_links).where(t.campaign_id == campaign_id).order_by(t.id.desc())
    return [_link(r) for r in conn.execute(statement).mappings()]


def get_link(conn: sa.Connection, link_id: int) -> ShareLink | None:
    row = (
        conn.execute(sa.select(campaign_share_links).where(campaign_share_links.c.id == link_id))
        .mappings()
        .first()
    )
    return _link(row) if row else None


def revoke_link(conn: sa.Connection, link_id: int, now: int) -> ShareLink:
    """Revoke a link at once: its next opening is refused."""
    t = campaign_share_links.c
    done = conn.execute(
        sa.update(campaign_share_links).where(t.id == link_id, t.revoked_at.is_(None)).values(revoked_at=now)
    )
    if done.rowcount != 1:
        raise ApiError(404, "unknown_share_link", f"no unrevoked share link {link_id}", "link_id")
    found = get_link(conn, link_id)
    assert found is not None
    return found


def open_link(conn: sa.Connection, token: str, now: int) -> ShareLink | None:
    """The live link of `token`, its opening counted; None when unknown, expired or revoked (alike)."""
    if not token.startswith(PREFIX) or len(token) > MAX_TOKEN:
        return None
    t = campaign_share_links.c
    live = sa.and_(t.token_hash == hash_key(token), t.revoked_at.is_(None), t.expires_at > now)
    counted = conn.execute(
        sa.update(campaign_share_links).where(live).values(opens=t.opens + 1, last_opened_at=now)
    )
    if counted.rowcount != 1:
        return None
    row = conn.execute(sa.select(campaign_share_links).where(live)).mappings().first()
    return _link(row) if row else None


def find_live(conn: sa.Connection, token: str, now: int) -> ShareLink | None:
    """The live link of `token`, not counted (its CSV beside the page)."""
    if not token.startswith(PREFIX) or len(token) > MAX_TOKEN:
        return None
    t = campaign_share_links.c
    live = sa.and_(t.token_hash == hash_key(token), t.revoked_at.is_(None), t.expires_at > now)
    row = conn.execute(sa.select(campaign_share_links).where(live)).mappings().first()
    return _link(row) if row else None
