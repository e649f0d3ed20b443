"""Sign-in throttling per client address: one address trying many accounts is locked out whatever accounts
it tries, another is not, on every worker alike (the count is in the database); behind a proxy,
ADSLOT_TRUSTED_PROXIES decides which address a sign-in comes from."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
import sqlalchemy as sa

from adslot.console import sign_in_sources, users
from adslot.console.sign_in_sources import FORGET_SECONDS, FREE_FAILURES, lock_seconds, source_of
from adslot.environment import transact
from adslot.storage.tables import console_sign_in_sources
from tests.conftest import BACKENDS, LiveServer, drop_schemas, migrated_engine
from tests.console.conftest import PASSWORD, ROLE_EMAILS, csrf_of, start_console_server

NOW = 1_800_000_000


@pytest.fixture(scope="module", params=BACKENDS)
def engine(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[sa.Engine]:
    yield from migrated_engine(tmp_path_factory.mktemp("sources"), str(request.param))


def test_an_address_is_counted_as_itself_and_an_ipv6_one_by_its_64() -> None:
    assert source_of("203.0.113.7") == "203.0.113.7"
    assert source_of("::ffff:203.0.113.7") == "203.0.113.7"
    assert source_of("2001:db8:1:2:aaaa::1") == source_of("2001:db8:1:2:ffff::9") == "2001:db8:1:2::/64"
    assert source_of("2001:db8:1:3::1") != source_of("2001:db8:1:2::1")
    assert source_of(None) == "unknown"


def test_an_address_is_locked_past_its_free_failures_for_a_while_that_doubles_up_to_15_minutes() -> None:
    assert [lock_seconds(n) for n in range(FREE_FAILURES)] == [0] * FREE_FAILURES
    assert [lock_seconds(FREE_FAILURES + n) for n in range(7)] == [30, 60, 120, 240, 480, 900, 900]


def _fail(engine: sa.Engine, email: str, source: str, now: int = NOW) -> users.SignIn:
    return transact(engine, lambda c: users.sign_in(c, email, "wrong guess!", now, source), write=True)


def test_one_address_trying_many_accounts_is_locked_and_another_address_is_not(engine: sa.Engine) -> None:
    transact(engine, lambda c: users.create_user(c, "someone@example.com", "viewer", PASSWORD), write=True)
    outcomes = [_fail(engine, f"guess{n}@example.com", "198.51.100.1") for n in range(FREE_FAILURES)]
    assert [o.locked_for for o in outcomes] == [0] * (FREE_FAILURES - 1) + [30]
    assert [o.source_failures for o in outcomes] == list(range(1, FREE_FAILURES + 1))
    # Locked: even the right password of a real account is refused from that address, unchecked.
    right = transact(
        engine,
        lambda c: users.sign_in(c, "someone@example.com", PASSWORD, NOW + 1, "198.51.100.1"),
        write=True,
    )
    assert right.user is None and right.locked_for == 29
    other = transact(
        engine,
        lambda c: users.sign_in(c, "someone@example.com", PASSWORD, NOW + 1, "198.51.100.2"),
        write=True,
    )
    assert other.user is not None
    # The lock passes; the next failure within the hour locks it again, for longer.
    assert _fail(engine, "guess@example.com", "198.51.100.1", NOW + 31).locked_for == 60
    # An hour after its last failure, an address starts again from nothing.
    later = _fail(engine, "guess@example.com", "198.51.100.1", NOW + 31 + FORGET_SECONDS + 1)
    assert (later.locked_for, later.source_failures) == (0, 1)


def test_failures_counted_at_once_on_many_connections_are_each_counted(engine: sa.Engine) -> None:
    """As workers would: each thread its own connection and write transaction."""
    errors: list[BaseException] = []

    def guess(n: int) -> None:
        try:
            transact(engine, lambda c: sign_in_sources.record_failure(c, "192.0.2.50", NOW), write=True)
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=guess, args=(n,)) for n in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert not errors, errors
    with engine.connect() as conn:
        counted = conn.execute(
            sa.select(console_sign_in_sources.c.failures).where(
                console_sign_in_sources.c.source == "192.0.2.50"
            )
        ).scalar_one()
    assert counted == 8


def _sign_in(http: httpx.Client, token: str, email: str, password: str, address: str) -> int:
    answer = http.post(
        "/console/sign-in",
        data={"csrf_token": token, "email": email, "password": password},
        headers={"X-Forwarded-For": address},
    )
    return answer.status_code


def _spray(live: LiveServer, address: str) -> list[int]:
    with httpx.Client(base_url=live.url, timeout=30) as http:
        token = csrf_of(http.get("/console/sign-in").text)
        return [
            _sign_in(http, token, f"nobody{n}@example.com", "wrong guess!", address)
            for n in range(FREE_FAILURES)
        ]


def _signs_in(live: LiveServer, address: str) -> int:
    with httpx.Client(base_url=live.url, timeout=30) as http:
        token = csrf_of(http.get("/console/sign-in").text)
        return _sign_in(http, token, ROLE_EMAILS["viewer"], PASSWORD, address)


@pytest.fixture()
def console_server(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[LiveServer]:
    env = {"ADSLOT_TRUSTED_PROXIES": "127.0.0.1"} if request.param else {}
    server, schemas = start_console_server(tmp_path, "sqlite", **env)
    yield server
    server.stop()
    if schemas:
        drop_schemas(schemas)


@pytest.mark.slow("server")
@pytest.mark.parametrize("console_server", [True], indirect=True)
def test_behind_a_trusted_proxy_the_forwarded_address_is_throttled_and_another_is_not(
    console_server: LiveServer,
) -> None:
    assert _spray(console_server, "203.0.113.5") == [401] * (FREE_FAILURES - 1) + [429]
    assert _signs_in(console_server, "203.0.113.5") == 429
    assert _signs_in(console_server, "203.0.113.6") == 303
    assert _signs_in(console_server, "203.0.113.6, 203.0.113.5") == 429  # the right-most untrusted counts


@pytest.mark.slow("server")
@pytest.mark.parametrize("console_server", [False], indirect=True)
def test_without_trusted_proxies_a_forwarded_header_names_no_one_and_the_peer_is_throttled(
    console_server: LiveServer,
) -> None:
    assert _spray(console_server, "203.0.113.5") == [401] * (FREE_FAILURES - 1) + [429]
    assert _signs_in(console_server, "203.0.113.6") == 429  # the same peer, whatever the header says
