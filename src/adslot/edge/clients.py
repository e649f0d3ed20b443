"""Which address a request comes from, behind the reverse proxies ADSLOT_TRUSTED_PROXIES names.

The client is the TCP peer, unless the peer is one of those proxies: then it is the right-most address of
X-Forwarded-For that is not a trusted proxy itself (each proxy appends the address it received from, so
that one was written by a proxy adslot trusts; anything left of it the client may have forged). The
invalid-traffic rules (api/sources.py, on either lane) and the console's sign-in throttle take the client
from here, never from uvicorn's `client`, which its proxy-headers middleware rewrites from any loopback
peer's X-Forwarded-For (FORWARDED_ALLOW_IPS).
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable, Sequence
from typing import Any

PEER = "adslot.peer"
"""The ASGI scope key where the protocol (api/protocol.py) keeps the connection's own peer, which uvicorn's
proxy-headers middleware may have replaced in `client` by an address a loopback peer's header named."""


class TrustedProxies:
    def __init__(self, networks: Iterable[str]) -> None:
        self._networks = tuple(ipaddress.ip_network(network) for network in networks)

    def __bool__(self) -> bool:
        return bool(self._networks)

    def trusted(self, address: str) -> bool:
        try:
            ip = ipaddress.ip_address(address.strip().partition("%")[0])
        except ValueError:
            return False
        return any(ip in proxy for proxy in self._networks)

    def forwarded(self, header: str | None) -> str | None:
        """The right-most address of a trusted proxy's X-Forwarded-For that is not a trusted proxy."""
        for item in reversed((header or "").split(",")):
            address = item.strip()
            if address and not self.trusted(address):
                return address
        return None

    def client(self, peer: str | None, header: str | None) -> str | None:
        """The client's address: the peer's, or, from a trusted proxy, the one its header names (the
        proxy's own when it names none)."""
        if peer and self._networks and self.trusted(peer):
            return self.forwarded(header) or peer
        return peer


def forwarded_for(headers: Sequence[tuple[bytes, bytes]]) -> str | None:
    """The raw X-Forwarded-For header of a request (its fields joined, as RFC 9110 5.3 allows)."""
    values = [value.decode("latin-1") for name, value in headers if name == b"x-forwarded-for"]
    return ", ".join(values) if values else None


def connection_of(scope: Any) -> tuple[str, int] | None:
    """The connection's own peer (host, port) of an ASGI request, whatever uvicorn's middleware made of it."""
    peer: tuple[str, int] | None = scope.get(PEER) or scope.get("client")
    return peer


def peer_of(scope: Any) -> str | None:
    """The connection's own peer address of an ASGI request."""
    peer = connection_of(scope)
    return str(peer[0]) if peer else None
