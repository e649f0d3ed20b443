"""The ASGI application: production at `/`, sandbox at `/sandbox`, each a complete environment."""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

from adslot.api.http import build_litestar
from adslot.collector import settle_heap
from adslot.console.app import build_console
from adslot.console.web import ROOT as CONSOLE_ROOT
from adslot.edge.asgi import serve_with_edge
from adslot.edge.headers import EdgeHeaders
from adslot.environment import Environment
from adslot.ops.app import PATHS as OPS_PATHS
from adslot.ops.app import OpsApp
from adslot.sandbox.demo_bidder import Mounted, demo_bidder_mount
from adslot.settings import Settings, load_settings
from adslot.telemetry.logs import configure_logging

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]
log = logging.getLogger(__name__)
STOPPED_CLEANLY = "adslot stopped cleanly: every acknowledged write is committed"


class AdslotApp:
    def __init__(self, settings: Settings, *, seed: int | None = None, settle_heap: bool = False) -> None:
        self.settings = settings
        self._settle_heap = settle_heap
        self.environments = {env.name: Environment(settings, env, seed=seed) for env in settings.environments}
        # Longest mount first, so /sandbox is matched before production's "": the ASGI mounts and the
        # HTTP protocol's hot lane both walk this one order.
        self._by_mount = sorted(self.environments.values(), key=lambda e: -len(e.config.mount_path))
        self._mounts: list[tuple[str, ASGIApp]] = []
        for env in self._by_mount:
            litestar: ASGIApp = build_litestar(env)  # type: ignore[assignment]
            self._mounts.append((env.config.mount_path, litestar))
        # The console serves both environments from one place: its own app, matched before any mount.
        self._console: ASGIApp = build_console(self.environments)  # type: ignore[assignment]
        # The sandbox's built-in demo bidder (sandbox/demo_bidder.py), matched before the sandbox's own app.
        self._demo_bidder: Mounted | None = next(
            (m for env in self._by_mount if (m := demo_bidder_mount(env.config)) is not None), None
        )
        # /metrics, /healthz and /readyz belong to the host, not to an environment: matched before all.
        self._ops = OpsApp(settings, self.environments)
        self.edge = EdgeHeaders(settings, (mount for mount, _ in self._mounts))
        """The request id and CORS headers of every answer, which the hot lane (api/protocol.py) reads too."""

    def lanes(self) -> list[tuple[str, Environment]]:
        """(mount path, environment), longest mount first, for the HTTP protocol's hot lane
        (api/protocol.py); none when it is switched off (ADSLOT_FAST_LANE)."""
        if not self.settings.fast_lane:
            return []
        return [(env.config.mount_path, env) for env in self._by_mount]

    async def start(self) -> None:
        for env in self.environments.values():
            await env.start()
        self._ops.start()

    async def stop(self) -> None:
        for env in self.environments.values():
            await env.stop()
        await self._ops.stop()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            return await self._lifespan(receive, send)
        if scope["type"] == "http":
            return await serve_with_edge(self.edge, scope, receive, send, self._route)
        return await self._route(scope, receive, send)

    async def _route(self, scope: Scope, receive: Receive, send: Send) -> None:
        path: str = scope["path"]
        if path in OPS_PATHS:
            return await self._ops(scope, receive, send)
        if path == CONSOLE_ROOT or path.startswith(CONSOLE_ROOT + "/"):
            return await self._console(scope, receive, send)
        if self._demo_bidder is not None and self._demo_bidder.matches(path):
            return await self._demo_bidder(scope, receive, send)
        for mount, app in self._mounts:
            if not mount:
                return await app(scope, receive, send)
            if path == mount or path.startswith(mount + "/"):
                scope = dict(scope)
                scope["root_path"] = scope.get("root_path", "") + mount
                return await app(scope, receive, send)

    async def _lifespan(self, receive: Receive, send: Send) -> None:
        while True:
            message = await receive()
            if message["type"] == "lifespan.startup":
                try:
                    await self.start()
                except Exception as exc:
                    log.exception("start-up failed")
                    await send({"type": "lifespan.startup.failed", "message": str(exc)})
                    return
                if self._settle_heap:
                    # Everything built at start-up (framework, OpenAPI document, catalog) lives as long as the
                    # worker; and its requests in flight are no garbage (collector.py).
                    settle_heap()
                await send({"type": "lifespan.startup.complete"})
            elif message["type"] == "lifespan.shutdown":
                await self.stop()
                sys.stderr.write(f"{STOPPED_CLEANLY} (pid {os.getpid()})\n")
                await send({"type": "lifespan.shutdown.complete"})
                return


def create_app(**overrides: Any) -> AdslotApp:
    """uvicorn factory of `adslot serve`: settings from ADSLOT_* variables (the CLI sets them from flags)."""
    settings = load_settings(**overrides)
    configure_logging(settings.log_format, settings.log_level)  # in each worker: the factory runs there
    return AdslotApp(settings, settle_heap=True)
