"""Sending an alert to a webhook whose URL is a third party's: a host name is checked on the addresses it
resolves to at the send, and a receiver's redirect is never followed. Receivers are on loopback, so the
tests that deliver say so with alert_webhooks_allow_private, as `adslot serve` is told with
ADSLOT_ALERT_WEBHOOKS_ALLOW_PRIVATE=1."""

from __future__ import annotations

import asyncio
import dataclasses
import ipaddress
import socket
from collections.abc import Iterator
from typing import Any

import pytest
import sqlalchemy as sa

from adslot.fleet import webhooks
from adslot.fleet.alert_store import Delivery
from adslot.fleet.watch import FleetWatch
from adslot.settings import DEFAULTS
from tests.fleet.receiver import Receiver

NAME = "hooks.example.test"
"""A host name that this test's resolver maps to 127.0.0.1, as an attacker's DNS would."""
SECRET = "s" * 64


@pytest.fixture
def inward(monkeypatch: pytest.MonkeyPatch) -> None:
    """NAME resolves to loopback; any other name as the system resolves it."""
    real = socket.getaddrinfo

    def getaddrinfo(host: Any, port: Any, *args: Any, **kwargs: Any) -> Any:
        return real("127.0.0.1" if host == NAME else host, port, *args, **kwargs)

    monkeypatch.setattr(socket, "getaddrinfo", getaddrinfo)


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    up = Receiver().up()
    yield up
    up.down()


def send(url: str, allow_private: bool) -> tuple[bool, int | None, str | None, bool]:
    """One notice to `url` through the watch's own sending path: (delivered, status, error, given up)."""
    settings = dataclasses.replace(DEFAULTS, alert_webhooks_allow_private=allow_private)
    delivery = Delivery(1, 1, "raised", "webhook", "1", '{"venue_id":"v"}', 0, 0)

    async def run() -> tuple[bool, int | None, str | None, bool]:
        watch = FleetWatch(sa.create_engine("sqlite://"), settings, "production")
        try:
            return await watch._send((delivery, (SECRET, url)))
        finally:
            await watch.stop()

    return asyncio.run(run())


def test_a_host_name_that_resolves_to_loopback_is_refused_at_the_send_and_given_up(
    inward: None, receiver: Receiver
) -> None:
    url = f"http://{NAME}:{receiver.port}/hook"
    assert webhooks.checked_url(url, allow_private=False) == url  # a name passes where it is added
    assert send(url, allow_private=False) == (
        False,
        None,
        "webhook host resolves to an internal address",
        True,
    )
    assert receiver.all() == []


def test_the_same_name_is_delivered_to_when_the_operator_allows_internal_addresses(
    inward: None, receiver: Receiver
) -> None:
    assert send(f"http://{NAME}:{receiver.port}/hook", allow_private=True) == (True, 204, None, False)
    assert [r.signed_by(SECRET) for r in receiver.all()] == [True]


def test_a_literal_internal_address_is_refused_before_any_connection(receiver: Receiver) -> None:
    for url in (receiver.url, f"http://localhost:{receiver.port}/hook", f"http://[::1]:{receiver.port}/"):
        assert send(url, allow_private=False) == (False, None, "webhook URL no longer allowed", True), url
    assert receiver.all() == []


def test_a_redirect_is_a_failed_attempt_and_its_target_gets_nothing(receiver: Receiver) -> None:
    target = Receiver().up()
    try:
        receiver.redirect_to = target.url
        assert send(receiver.url, allow_private=True) == (False, 307, "HTTP 307", False)
    finally:
        target.down()
    assert len(receiver.all()) == 1 and target.all() == []


@pytest.mark.parametrize(
    ("address", "internal"),
    [
        ("127.0.0.1", True),
        ("10.1.2.3", True),
        ("172.16.0.1", True),
        ("192.168.1.1", True),
        ("169.254.169.254", True),  # a cloud's metadata service
        ("100.64.0.1", True),  # shared (carrier-grade NAT)
        ("0.0.0.0", True),
        ("224.0.0.1", True),
        ("::1", True),
        ("fe80::1", True),
        ("fc00::1", True),
        ("::ffff:127.0.0.1", True),
        ("::ffff:10.0.0.1", True),
        ("93.184.215.14", False),
        ("2606:2800:21f:cb07:6820:80da:af6b:8b2c", False),
    ],
)
def test_internal_addresses_are_the_ones_not_globally_reachable(address: str, internal: bool) -> None:
    assert webhooks.internal_address(ipaddress.ip_address(address)) is internal
