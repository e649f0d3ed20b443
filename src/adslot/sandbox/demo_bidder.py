"""The sandbox's built-in demo bidder: the test bidder (demand/bidder.py), served by adslot itself.

Trying programmatic demand should not take a second process: the sandbox mounts the same `Bidder` at
`{sandbox}/demo-bidder` (app.py) and registers it as the partner `demo-bidder` of one venue,
`programmatic-lobby` (seed.py). Every other sandbox venue has no partner, so it keeps direct fill only.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

from adslot.demand.bidder import AUCTION_PATH, Bidder, BidderSettings, create_bidder
from adslot.settings import EnvironmentSettings

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]

DEMO_BIDDER_PATH = "/demo-bidder"
"""Under the sandbox's base URL: `{sandbox}/demo-bidder/openrtb2/auction`, its media, notices and pixels."""
LOG_ENTRIES = 1000
"""What its `GET /log` keeps, per worker: enough to follow a few slots, bounded in a server left running."""
DELAY_MS = 20
"""A real bidder's answer takes time; 20 ms (the test bidder's default) is well inside the 150 ms timeout."""


def demo_bidder_base_url(public_url: str) -> str:
    """The bidder's own base URL, for the links it writes into its bids: players and adslot must reach it."""
    return public_url.rstrip("/") + DEMO_BIDDER_PATH


def demo_bidder_endpoint(public_url: str) -> str:
    """The partner's endpoint: absolute, through the sandbox's public URL, as any partner's is."""
    return demo_bidder_base_url(public_url) + AUCTION_PATH


def build_demo_bidder(public_url: str) -> Bidder:
    """Always bids (the demo venue should fill from it), logs in memory only (an integrator reads `/log`)."""
    settings = BidderSettings(base_url=demo_bidder_base_url(public_url), no_bid_rate=0, delay_ms=DELAY_MS)
    return create_bidder(settings, max_entries=LOG_ENTRIES)


class Mounted:
    """An ASGI app served under a path prefix, seeing paths relative to it (as the bidder routes them)."""

    def __init__(self, prefix: str, app: Callable[[Scope, Receive, Send], Awaitable[None]]) -> None:
        self.prefix = prefix
        self.app = app

    def matches(self, path: str) -> bool:
        return path == self.prefix or path.startswith(self.prefix + "/")

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        scope = dict(scope)
        scope["path"] = scope["path"][len(self.prefix) :] or "/"
        scope["root_path"] = scope.get("root_path", "") + self.prefix
        raw = scope.get("raw_path")
        if isinstance(raw, bytes) and raw.startswith(self.prefix.encode()):
            scope["raw_path"] = raw[len(self.prefix) :] or b"/"
        await self.app(scope, receive, send)


def demo_bidder_mount(env: EnvironmentSettings) -> Mounted | None:
    """The sandbox's demo bidder at `{mount}/demo-bidder`; None for production, which never has one."""
    if env.name != "sandbox":
        return None
    return Mounted(env.mount_path + DEMO_BIDDER_PATH, build_demo_bidder(env.public_url))
