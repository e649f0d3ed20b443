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
from adslot.console.roles import ADVERTISER, ROLES
from adslot.errors import ApiError
from adslot.fields import MAX_ID
from adslot.storage.tables import advertisers, console_sessions, console_user_advertisers, console_users

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
    advertiser_ids: tuple[int, ...] = ()
    """An advertiser user's advertisers (production's): what console.scope lets them see."""


def user_of(row: sa.RowMapping, advertiser_ids: tuple[int, ...] = ()) -> User:
    return User(row["id"], row["email"], row["role"], row["created_at"], row["disabled_at"], advertiser_ids)


def bound_advertisers(conn: sa.Connection, user_ids: list[int]) -> dict[int, tuple[int, ...]]:
    """Each user's advertisers, in id order (none for a user of another role)."""
    out: dict[int, list[int]] = {uid: [] for uid in user_ids}
    if user_ids:
        t = console_user_advertisers.c
        statement = sa.select(t.user_id, t.advertiser_id).where(t.user_id.in_(user_ids))
        for user_id, advertiser_id in conn.execute(statement.order_by(t.user_id, t.advertiser_id)):
            out[user_id].append(advertiser_id)
    return {uid: tuple(ids) for uid, ids in out.items()}


def with_advertisers(conn: sa.Connection, row: sa.RowMapping) -> User:
    bound = bound_advertisers(conn, [row["id"]]) if row["role"] == ADVERTISER else {}
    return user_of(row, bound.get(row["id"], ()))


def check_advertisers(conn: sa.Connection, role: str, advertiser_ids: list[int]) -> tuple[int, ...]:
    """An advertiser user is bound to one or more existing advertisers; a user of another role to none."""
    ids = tuple(sorted(set(advertiser_ids)))
    if role != ADVERTISER:
        if ids:
            message = "only an advertiser user is bound to advertisers"
            raise ApiError(400, "invalid_field", message, "advertiser")
        return ids
    if not ids:
        raise ApiError(400, "missing_field", "an advertiser user needs at least one advertiser", "advertiser")
    if any(not 1 <= i <= MAX_ID for i in ids):
        raise ApiError(404, "unknown_advertiser", "no such advertiser", "advertiser")
    found = set(conn.execute(sa.select(advertisers.c.id).where(advertisers.c.id.in_(ids))).scalars())
    missing = [i for i in ids if i not in found]
    if missing:
        raise ApiError(404, "unknown_advertiser", f"no advertiser {missing[0]}", "advertiser")
    return ids


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


def create_user(
    conn: sa.Connection, email: str, role: str, password: str, advertiser_ids: list[int] | None = None
) -> User:
    """A user; an advertiser user with the advertisers it is bound to (production's, in this database)."""
    email, role = check_email(email), check_role(role)
    bound = check_advertisers(conn, role, advertiser_ids or [])
    digest = HASHER.hash(check_password(password))
    if _row(conn, email) is not None:
        raise ApiError(409, "user_exists", f"a user {email} already exists", "email")
    now = int(time.time())
    result = conn.execute(
        sa.insert(console_users).values(email=email, password_hash=digest, role=role, created_at=now)
    )
    user_id = int(result.inserted_primary_key[0])  # type: ignore[index]
    if bound:
        conn.execute(
            sa.insert(console_user_advertisers),
            [{"user_id": user_id, "advertiser_id": a} for a in bound],
        )
    return User(user_id, email, role, now, None, bound)


def list_users(conn: sa.Connection) -> list[User]:
    rows = list(conn.execute(sa.select(console_users).order_by(console_users.c.id)).mappings())
    bound = bound_advertisers(conn, [r["id"] for r in rows if r["role"] == ADVERTISER])
    return [user_of(r, bound.get(r["id"], ())) for r in rows]


def get_user(conn: sa.Connection, user_id: int) -> User | None:
    row = conn.execute(sa.select(console_users).where(console_users.c.id == user_id)).mappings().first()
    return with_advertisers(conn, row) if row else None


def _row(conn: sa.Connection, email: str) -> sa.RowMapping | None:
    statement = sa.select(console_users).where(console_users.c.email == email.strip().lower())
    return conn.execute(statement).mappings().first()


def find_user(conn: sa.Connection, email: str) -> User:
    row = _row(conn, email)
    if row is None:
        raise ApiError(404, "unknown_user", f"no user {email}", "email")
    return with_advertisers(conn, row)


def disable_user(conn: sa.Connection, email: str) -> User:
    """Disable the user and end their sessions at once; the row stays, for the audit log's sake."""
    user = find_user(conn, email)
    if user.disabled_at is None:
        now = int(time.time())
        conn.execute(sa.update(console_users).where(console_users.c.id == user.id).values(disabled_at=now))
        end_sessions_of(conn, user.id)
        user = User(user.id, user.email, user.role, user.created_at, now, user.advertiser_ids)
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
    return SignIn(with_advertisers(conn, row))


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
