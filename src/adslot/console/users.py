"""Console users in the production database: Argon2id password hashes, roles, and sign-in throttling.

A run of failed sign-ins locks the account for a while that doubles with each further failure, so a
guessing attack gets a handful of tries an hour rather than thousands a second, whatever number of workers
or nodes it spreads them over (the count is in the database, not in a process); the client address's own
count (sign_in_sources.py) stops one address from trying a few guesses on each of many accounts.
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass

import sqlalchemy as sa
from argon2 import PasswordHasher
from argon2.exceptions import InvalidHashError, VerificationError

from adslot.console import sign_in_sources
from adslot.console.roles import ROLES
from adslot.errors import ApiError
from adslot.storage.tables import console_sessions, console_users

HASHER = PasswordHasher()
DUMMY_HASH = HASHER.hash("adslot: not a password of anyone")
"""Verified against when the email is unknown, so that a wrong email costs as long as a wrong password."""
MIN_PASSWORD = 10
MAX_PASSWORD = 1024
FREE_FAILURES = 5
"""Failed sign-ins in a row before the account is locked."""
FIRST_LOCK_SECONDS = 30
MAX_LOCK_SECONDS = 15 * 60
_EMAIL = re.compile(r"^[^@\s\x00-\x1f\x7f]{1,64}@[^@\s\x00-\x1f\x7f]{1,189}\.[^@\s\x00-\x1f\x7f.]{2,}$")


@dataclass(frozen=True, slots=True)
class User:
    id: int
    email: str
    role: str
    created_at: int
    disabled_at: int | None


def user_of(row: sa.RowMapping) -> User:
    return User(row["id"], row["email"], row["role"], row["created_at"], row["disabled_at"])


def check_email(email: str) -> str:
    email = email.strip().lower()
    if not _EMAIL.match(email):
        raise ApiError(400, "invalid_field", "not an email address", "email")
    return email


def check_password(password: str) -> str:
    if not MIN_PASSWORD <= len(password) <= MAX_PASSWORD:
        raise ApiError(
            400,
            "invalid_field",
            f"a password has {MIN_PASSWORD} to {MAX_PASSWORD} characters",
            "password",
        )
    return password


def check_role(role: str) -> str:
    if role not in ROLES:
        raise ApiError(400, "invalid_field", f"the role is one of {', '.join(ROLES)}", "role")
    return role


def create_user(conn: sa.Connection, email: str, role: str, password: str) -> User:
    email, role = check_email(email), check_role(role)
    digest = HASHER.hash(check_password(password))
    if _row(conn, email) is not None:
        raise ApiError(409, "user_exists", f"a user {email} already exists", "email")
    now = int(time.time())
    result = conn.execute(
        sa.insert(console_users).values(email=email, password_hash=digest, role=role, created_at=now)
    )
    return User(int(result.inserted_primary_key[0]), email, role, now, None)  # type: ignore[index]


def list_users(conn: sa.Connection) -> list[User]:
    return [
        user_of(r) for r in conn.execute(sa.select(console_users).order_by(console_users.c.id)).mappings()
    ]


def get_user(conn: sa.Connection, user_id: int) -> User | None:
    row = conn.execute(sa.select(console_users).where(console_users.c.id == user_id)).mappings().first()
    return user_of(row) if row else None


def _row(conn: sa.Connection, email: str) -> sa.RowMapping | None:
    statement = sa.select(console_users).where(console_users.c.email == email.strip().lower())
    return conn.execute(statement).mappings().first()


def find_user(conn: sa.Connection, email: str) -> User:
    row = _row(conn, email)
    if row is None:
        raise ApiError(404, "unknown_user", f"no user {email}", "email")
    return user_of(row)


def disable_user(conn: sa.Connection, email: str) -> User:
    """Disable the user and end their sessions at once; the row stays, for the audit log's sake."""
    user = find_user(conn, email)
    if user.disabled_at is None:
        now = int(time.time())
        conn.execute(sa.update(console_users).where(console_users.c.id == user.id).values(disabled_at=now))
        end_sessions_of(conn, user.id)
        user = User(user.id, user.email, user.role, user.created_at, now)
    return user


def set_password(conn: sa.Connection, email: str, password: str) -> User:
    """A new password also unlocks the account and ends its sessions (a stolen cookie stops working)."""
    user = find_user(conn, email)
    conn.execute(
        sa.update(console_users)
        .where(console_users.c.id == user.id)
        .values(password_hash=HASHER.hash(check_password(password)), failed_sign_ins=0, locked_until=0)
    )
    end_sessions_of(conn, user.id)
    return user


@dataclass(frozen=True, slots=True)
class SignIn:
    user: User | None
    """The user signed in; None when refused."""
    locked_for: int = 0
    """Seconds until another attempt will be considered, when the account or the address is locked."""
    failures: int = 0
    source_failures: int = 0
    """The address's failed sign-ins within the hour (sign_in_sources.py)."""


def lock_seconds(failures: int) -> int:
    """How long an account stays locked after `failures` failed sign-ins in a row."""
    if failures < FREE_FAILURES:
        return 0
    return int(min(FIRST_LOCK_SECONDS * 2 ** (failures - FREE_FAILURES), MAX_LOCK_SECONDS))


def sign_in(conn: sa.Connection, email: str, password: str, now: int, source: str = "unknown") -> SignIn:
    """Check a sign-in from the client address `source` (sign_in_sources.source_of) in a write
    transaction: the failure counts, the account's and the address's, move with the check, so concurrent
    guesses on several workers cannot each get the free ones. A locked address is refused before any
    password is checked."""
    address_lock = sign_in_sources.locked_for(conn, source, now)
    if address_lock:
        return SignIn(None, locked_for=address_lock)
    row = _row(conn, email)
    if row is None or row["disabled_at"] is not None:
        _verify(DUMMY_HASH, password)
        return _failed(conn, source, now, 0, 0)
    if row["locked_until"] > now:
        return _failed(conn, source, now, row["failed_sign_ins"], row["locked_until"] - now)
    if not _verify(row["password_hash"], password):
        failures = row["failed_sign_ins"] + 1
        conn.execute(
            sa.update(console_users)
            .where(console_users.c.id == row["id"])
            .values(failed_sign_ins=failures, locked_until=now + lock_seconds(failures))
        )
        return _failed(conn, source, now, failures, lock_seconds(failures))
    values: dict[str, object] = {"failed_sign_ins": 0, "locked_until": 0}
    if HASHER.check_needs_rehash(row["password_hash"]):
        values["password_hash"] = HASHER.hash(password)
    conn.execute(sa.update(console_users).where(console_users.c.id == row["id"]).values(**values))
    return SignIn(user_of(row))


def _failed(conn: sa.Connection, source: str, now: int, failures: int, account_lock: int) -> SignIn:
    counted = sign_in_sources.record_failure(conn, source, now)
    locked_for = max(account_lock, counted.locked_for)
    return SignIn(None, locked_for=locked_for, failures=failures, source_failures=counted.failures)


def _verify(digest: str, password: str) -> bool:
    try:
        return HASHER.verify(digest, password[:MAX_PASSWORD])
    except (VerificationError, InvalidHashError):
        return False


def end_sessions_of(conn: sa.Connection, user_id: int) -> None:
    conn.execute(sa.delete(console_sessions).where(console_sessions.c.user_id == user_id))
