"""Alert webhooks: where they may point, how their bodies are signed, and their rows.

A webhook's URL is a third party's, so it is checked as a demand partner's endpoint is (http(s), a host, no
user info, no fragment) and, unless ADSLOT_ALERT_WEBHOOKS_ALLOW_PRIVATE is set, may not lead to a loopback,
private, link-local or otherwise internal address (`internal_address`): adslot must not be made to POST to
its own network. The URL is checked when it is added and again at each send; a host name is checked where
it matters, on the addresses it resolves to when the notice is sent (`GuardedResolver`, which the sending
session connects through), so a name that points inward, or is made to between two sends, reaches nothing.
Redirects are not followed: a 3xx is a failed attempt, never a request to where it points. Each body is
signed with HMAC-SHA256 under the webhook's secret, shown once when it is created, in the
`X-Adslot-Signature: sha256=<hex>` header, so a receiver can tell adslot's alerts from anyone's.
"""

from __future__ import annotations

import hashlib
import hmac
import ipaddress
import secrets
import socket
from urllib.parse import urlsplit

import aiohttp
import msgspec
import sqlalchemy as sa
from aiohttp.abc import AbstractResolver, ResolveResult

from adslot.demand.partners import checked_endpoint
from adslot.errors import ApiError
from adslot.storage.tables import alert_webhooks

SIGNATURE_HEADER = "X-Adslot-Signature"
DELIVERY_HEADER = "X-Adslot-Delivery"
MAX_WEBHOOKS = 16


class Webhook(msgspec.Struct):
    id: int
    url: str
    created_at: int
    secret: str | None = None
    """Only in the answer that creates it: keep it, it is never shown again."""


def sign(secret: str, body: bytes) -> str:
    """The signature header's value for `body`."""
    return "sha256=" + hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()


def internal_address(address: ipaddress.IPv4Address | ipaddress.IPv6Address) -> bool:
    """Whether an address is not a public one: loopback, private, link-local, shared, reserved, multicast
    and the like (anything not globally reachable), an IPv4 one mapped into IPv6 by what it maps."""
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        address = address.ipv4_mapped
    return not address.is_global or address.is_multicast


def _internal(host: str) -> bool:
    host = host.lower().rstrip(".")
    if host == "localhost" or host.endswith(".localhost"):
        return True
    try:
        address = ipaddress.ip_address(host.removeprefix("[").removesuffix("]"))
    except ValueError:
        return False
    return internal_address(address)


class InternalAddress(OSError):
    """A webhook's host name resolved only to internal addresses: nothing is connected to."""


class GuardedResolver(AbstractResolver):
    """Resolves as aiohttp does, then keeps only the public addresses (`internal_address`); none left is
    InternalAddress. aiohttp connects only to what its resolver returns, so the check and the connection
    see the same addresses, whatever the name's DNS answers next."""

    def __init__(self, inner: AbstractResolver | None = None) -> None:
        self._inner = inner or aiohttp.ThreadedResolver()

    async def resolve(
        self, host: str, port: int = 0, family: socket.AddressFamily = socket.AF_INET
    ) -> list[ResolveResult]:
        found = await self._inner.resolve(host, port, family)
        kept = [r for r in found if not internal_address(ipaddress.ip_address(r["host"].split("%")[0]))]
        if not kept:
            raise InternalAddress(f"{host} resolves only to internal addresses")
        return kept

    async def close(self) -> None:
        await self._inner.close()


def sending_session(allow_private: bool, timeout_seconds: float) -> aiohttp.ClientSession:
    """The session webhooks are POSTed with: host names resolved through GuardedResolver (unless internal
    addresses are allowed), no proxy from the environment (it would connect for us, unchecked), no cookies
    kept from one receiver's answer for another."""
    resolver = None if allow_private else GuardedResolver()
    return aiohttp.ClientSession(
        connector=aiohttp.TCPConnector(resolver=resolver),
        cookie_jar=aiohttp.DummyCookieJar(),
        trust_env=False,
        timeout=aiohttp.ClientTimeout(total=timeout_seconds),
    )


def checked_url(url: str, allow_private: bool, field: str = "url") -> str:
    """The URL if alerts may be POSTed to it; else 400 naming what is wrong."""
    checked_endpoint(url, field)
    if len(url) > 2048:
        raise ApiError(400, "invalid_field", "a webhook URL is at most 2048 characters", field)
    host = urlsplit(url).hostname or ""
    if not allow_private and _internal(host):
        raise ApiError(
            400,
            "internal_address",
            "a webhook may not point at a loopback, private or link-local address",
            field,
        )
    return url


def create(conn: sa.Connection, url: str, now: int) -> Webhook:
    w = alert_webhooks.c
    count = conn.execute(sa.select(sa.func.count()).where(w.removed_at.is_(None))).scalar_one()
    if count >= MAX_WEBHOOKS:
        raise ApiError(409, "too_many_webhooks", f"at most {MAX_WEBHOOKS} alert webhooks", "url")
    secret = secrets.token_hex(32)
    ident = conn.execute(
        sa.insert(alert_webhooks).values(url=url, secret=secret, created_at=now).returning(w.id)
    ).scalar_one()
    return Webhook(ident, url, now, secret)


def active(conn: sa.Connection) -> list[Webhook]:
    w = alert_webhooks.c
    rows = conn.execute(sa.select(w.id, w.url, w.created_at).where(w.removed_at.is_(None)).order_by(w.id))
    return [Webhook(r.id, r.url, r.created_at) for r in rows]


def remove(conn: sa.Connection, ident: int, now: int) -> None:
    w = alert_webhooks.c
    done = conn.execute(
        sa.update(alert_webhooks).where(w.id == ident, w.removed_at.is_(None)).values(removed_at=now)
    )
    if done.rowcount != 1:
        raise ApiError(404, "not_found", f"no alert webhook {ident}", "webhook_id")


def secret_and_url(conn: sa.Connection, ident: int) -> tuple[str, str] | None:
    """A live webhook's (secret, url); None once it is removed."""
    w = alert_webhooks.c
    row = conn.execute(sa.select(w.secret, w.url).where(w.id == ident, w.removed_at.is_(None))).one_or_none()
    return None if row is None else (row.secret, row.url)
