"""Console sign-in sessions: a random token in an HttpOnly cookie, stored only as its SHA-256 hash.

Sessions live in the production database, so every worker and node knows them, and signing out, disabling
a user or setting a password ends them at once.
"""

from __future__ import annotations

import hashlib
import secrets

import sqlalchemy as sa

from adslot.console.users import User, end_sessions_of, with_advertisers

__all__ = ["COOKIE", "end_session", "end_sessions_of", "session_user", "start_session"]
from adslot.storage.tables import console_sessions, console_users

COOKIE = "adslot_console"
LIFETIME_SECONDS = 12 * 3600
"""A session ends twelve hours after sign-in: a working day, then sign in again."""


def _hash(token: str) -> str:
    return hashlib.sha256(token.encode("utf-8", "surrogatepass")).hexdigest()


def start_session(conn: sa.Connection, user_id: int, now: int) -> str:
    token = secrets.token_urlsafe(32)
    conn.execute(sa.delete(console_sessions).where(console_sessions.c.expires_at <= now))
    conn.execute(
        sa.insert(console_sessions).values(
            token_hash=_hash(token), user_id=user_id, created_at=now, expires_at=now + LIFETIME_SECONDS
        )
    )
    return token


def session_user(conn: sa.Connection, token: str, now: int) -> User | None:
    """The signed-in user of a live session with an enabled account, else None."""
    row = (
        conn.execute(
            sa.select(console_users)
            .join(console_sessions, console_sessions.c.user_id == console_users.c.id)
            .where(
                console_sessions.c.token_hash == _hash(token),
                console_sessions.c.expires_at > now,
                console_users.c.disabled_at.is_(None),
            )
        )
        .mappings()
        .first()
    )
    return with_advertisers(conn, row) if row else None


def end_session(conn: sa.Connection, token: str) -> None:
    conn.execute(sa.delete(console_sessions).where(console_sessions.c.token_hash == _hash(token)))
