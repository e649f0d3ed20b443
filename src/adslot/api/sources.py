"""Which network a request comes from, for the invalid-traffic rules (ledger/ivt.py): the ad request stores
its network, and each fire is judged against it.

The client is the TCP peer, or the one a trusted proxy's X-Forwarded-For names (edge/clients.py). The hot
lane finds the peer's network once per connection; the answer per address is cached, so a request
costs a dict lookup at most. With neither network rule switched on, every request's network is 0 (unknown).
"""

from __future__ import annotations

from adslot.edge.clients import TrustedProxies
from adslot.ledger.ivt import network_key
from adslot.settings import Settings

TRUSTED = -1
"""What peer() answers for a trusted proxy: the client is named per request, by its X-Forwarded-For."""
CACHE_LIMIT = 1 << 14
"""Addresses whose network is remembered; beyond it the cache starts again."""


class Sources:
    def __init__(self, settings: Settings) -> None:
        self._on = bool({"foreign_network", "burst"} & set(settings.ivt_rules))
        self._v4 = settings.ivt_ipv4_prefix
        self._v6 = settings.ivt_ipv6_prefix
        self._proxies = TrustedProxies(settings.trusted_proxies)
        self._cache: dict[str, int] = {}

    def network(self, address: str | None) -> int:
        """The network key of one address (0: unknown, or no rule needs it)."""
        if not self._on or not address:
            return 0
        cache = self._cache
        key = cache.get(address)
        if key is None:
            if len(cache) >= CACHE_LIMIT:
                cache.clear()
            key = cache[address] = network_key(address, self._v4, self._v6)
        return key

    def peer(self, client: tuple[str, int] | None) -> int:
        """The network of a connection's peer, or TRUSTED when it is a trusted proxy."""
        host = client[0] if client else None
        if self._on and self._proxies and host and self._proxies.trusted(host):
            return TRUSTED
        return self.network(host)

    def forwarded(self, header: str | None) -> int:
        """The client's network from a trusted proxy's X-Forwarded-For (0 when it names none)."""
        return self.network(self._proxies.forwarded(header))

    def of(self, client: tuple[str, int] | None, header: str | None) -> int:
        """The request's network, from its peer and (when the peer is trusted) its X-Forwarded-For."""
        source = self.peer(client)
        return self.forwarded(header) if source == TRUSTED else source


_by_settings: dict[int, tuple[Settings, Sources]] = {}


def sources_for(settings: Settings) -> Sources:
    """One Sources per Settings object (every connection of a server shares its settings)."""
    found = _by_settings.get(id(settings))
    if found is None or found[0] is not settings:
        found = _by_settings[id(settings)] = (settings, Sources(settings))
    return found[1]
