"""Console users on SQLite and PostgreSQL: Argon2id hashes, locking after failures, sessions ending."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import sqlalchemy as sa
from argon2 import Type

from adslot.console import sessions, users
from adslot.console.roles import allows
from adslot.environment import transact
from adslot.errors import ApiError
from tests.conftest import PRODUCT_HASHER, migrated_engine

PASSWORD = "a long enough password"


@pytest.fixture(scope="module")
def engine(backend: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[sa.Engine]:
    yield from migrated_engine(Path(tmp_path_factory.mktemp("users")), backend)


def write(engine: sa.Engine, fn):  # type: ignore[no-untyped-def]
    return transact(engine, fn, write=True, catalog=False)


def test_a_password_is_stored_only_as_an_argon2id_hash(engine: sa.Engine) -> None:
    write(engine, lambda c: users.create_user(c, "Hash@Example.com", "viewer", PASSWORD))
    with engine.connect() as conn:
        stored = conn.execute(
            sa.text("SELECT email, password_hash FROM console_users WHERE email = 'hash@example.com'")
        ).one()
    assert stored.password_hash.startswith("$argon2id$") and PASSWORD not in stored.password_hash


def test_bad_users_are_refused_with_the_field() -> None:
    for email, role, password, field in (
        ("not-an-email", "viewer", PASSWORD, "email"),
        ("a@example.com", "owner", PASSWORD, "role"),
        ("a@example.com", "viewer", "short", "password"),
    ):
        with pytest.raises(ApiError) as caught:
            users.check_email(email), users.check_role(role), users.check_password(password)
        assert caught.value.field == field


def test_an_email_is_taken_once(engine: sa.Engine) -> None:
    write(engine, lambda c: users.create_user(c, "once@example.com", "viewer", PASSWORD))
    with pytest.raises(ApiError) as caught:
        write(engine, lambda c: users.create_user(c, "ONCE@example.com", "admin", PASSWORD))
    assert caught.value.code == "user_exists"


def test_failed_sign_ins_lock_the_account_for_longer_each_time_and_a_new_password_unlocks_it(
    engine: sa.Engine,
) -> None:
    write(engine, lambda c: users.create_user(c, "lock@example.com", "viewer", PASSWORD))
    now = 1_000_000
    outcomes = [write(engine, lambda c: users.sign_in(c, "lock@example.com", "wrong", now)) for _ in range(6)]
    # The fifth failure locks for 30 s; a try while locked is refused unchecked and not counted.
    assert [o.locked_for for o in outcomes] == [0, 0, 0, 0, 30, 30]
    assert write(engine, lambda c: users.sign_in(c, "lock@example.com", PASSWORD, now + 29)).user is None
    later = now + 31
    assert write(engine, lambda c: users.sign_in(c, "lock@example.com", "wrong", later)).locked_for == 60
    assert write(engine, lambda c: users.sign_in(c, "lock@example.com", PASSWORD, later + 59)).user is None
    assert (
        write(engine, lambda c: users.sign_in(c, "lock@example.com", PASSWORD, later + 61)).user is not None
    )
    assert users.lock_seconds(50) == users.MAX_LOCK_SECONDS


def test_a_session_ends_on_sign_out_on_disable_and_on_a_new_password(engine: sa.Engine) -> None:
    user = write(engine, lambda c: users.create_user(c, "sess@example.com", "admin", PASSWORD))
    now = 2_000_000
    tokens = [write(engine, lambda c: sessions.start_session(c, user.id, now)) for _ in range(3)]
    with engine.connect() as conn:
        assert sessions.session_user(conn, tokens[0], now + 1) == user
        assert sessions.session_user(conn, tokens[0], now + sessions.LIFETIME_SECONDS) is None
    write(engine, lambda c: sessions.end_session(c, tokens[0]))
    with engine.connect() as conn:
        assert sessions.session_user(conn, tokens[0], now + 1) is None
        assert sessions.session_user(conn, tokens[1], now + 1) is not None
    write(engine, lambda c: users.set_password(c, "sess@example.com", "another long password"))
    with engine.connect() as conn:
        assert sessions.session_user(conn, tokens[1], now + 1) is None
    token = write(engine, lambda c: sessions.start_session(c, user.id, now))
    write(engine, lambda c: users.disable_user(c, "sess@example.com"))
    with engine.connect() as conn:
        assert sessions.session_user(conn, token, now + 1) is None
    assert (
        write(engine, lambda c: users.sign_in(c, "sess@example.com", "another long password", now)).user
        is None
    )


def test_each_role_can_do_what_the_one_before_it_can() -> None:
    assert allows("admin", "trafficker") and allows("trafficker", "viewer")
    assert not allows("viewer", "trafficker") and not allows("trafficker", "admin")
    assert not allows("owner", "viewer")


def test_the_shipped_password_hasher_is_argon2id_at_owasps_cost_or_more() -> None:
    # OWASP's password storage cheat sheet: argon2id with at least 19 MiB of memory and 2 passes.
    assert PRODUCT_HASHER.type is Type.ID
    assert PRODUCT_HASHER.memory_cost >= 19 * 1024 and PRODUCT_HASHER.time_cost >= 2
