"""The host's operations endpoints, matched before either environment: /metrics, /healthz and /readyz.

None takes an API key and none is a player path (no CORS, no rate limit). /healthz answers at once without
I/O: the process serves. /readyz runs the checks of ops/health.py. /metrics is for the operator's scraper
only: the client (the peer, or what a proxy of ADSLOT_TRUSTED_PROXIES forwards; a request another proxy
forwarded has none) must be in ADSLOT_METRICS_ALLOW (loopback by default: 403 otherwise) and, when
ADSLOT_METRICS_TOKEN is set, send `Authorization: Bearer <token>` (401 otherwise).

It also runs this worker's metrics flush (telemetry/metrics.py): once a second, at shutdown and before
a render.
"""

from __future__ import annotations

import asyncio
import hmac
import ipaddress
import logging
import os
from collections.abc import Awaitable, Callable, Mapping, MutableMapping
from typing import Any

import anyio.to_thread
import msgspec
from prometheus_client import CONTENT_TYPE_LATEST

from adslot.edge.clients import TrustedProxies, forwarded_for, peer_of
from adslot.environment import Environment
from adslot.errors import ApiError
from adslot.ops.health import Readiness
from adslot.settings import Settings
from adslot.tasks import stop_tasks
from adslot.telemetry import metrics

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]

METRICS = "/metrics"
HEALTHZ = "/healthz"
READYZ = "/readyz"
PATHS = frozenset({METRICS, HEALTHZ, READYZ})
"""What AdslotApp hands to OpsApp, before the console and the environments' mounts."""
FLUSH_SECONDS = 1.0
JSON = b"application/json"
NO_STORE = (b"cache-control", b"no-store")
log = logging.getLogger(__name__)


def _json(data: object) -> bytes:
    return msgspec.json.encode(data)


def _error(status: int, code: str, message: str, field: str | None = None) -> bytes:
    return ApiError(status, code, message, field).body()


class OpsApp:
    def __init__(self, settings: Settings, environments: Mapping[str, Environment]) -> None:
        self._environments = environments
        self._allow = tuple(ipaddress.ip_network(network) for network in settings.metrics_allow)
        self._proxies = TrustedProxies(settings.trusted_proxies)
        self._token = None if settings.metrics_token is None else settings.metrics_token.encode("ascii")
        self._readiness = Readiness(environments)
        self._healthy = _json({"status": "ok", "worker_pid": os.getpid()})
        self._flusher: asyncio.Task[None] | None = None

    def start(self) -> None:
        self._healthy = _json(
            {"status": "ok", "worker_pid": os.getpid()}
        )  # the worker's pid, not the parent's
        self._flusher = asyncio.get_running_loop().create_task(
            self._flush_every_second(), name="adslot-metrics"
        )

    async def stop(self) -> None:
        await stop_tasks(self._flusher)
        self._flusher = None
        await self._readiness.close()
        self.flush()  # what was counted since the last flush, before the process goes

    def flush(self) -> None:
        for env in self._environments.values():
            catalog = env.catalog
            metrics.set_gauges(env.name, env.writer.depth(), 0 if catalog is None else catalog.version)
            caller = env.exchange.caller
            metrics.set_demand(env.name, caller, caller.outcome_counts())
        metrics.flush()

    async def _flush_every_second(self) -> None:
        while True:
            await asyncio.sleep(FLUSH_SECONDS)
            try:
                self.flush()
            except Exception:  # a metrics failure must not stop the flushes after it
                log.exception("the metrics flush failed")

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        path = scope["path"]
        method = scope["method"]
        if method not in ("GET", "HEAD"):
            body = _error(405, "method_not_allowed", f"{path} answers GET and HEAD")
            return await _send(send, 405, body, JSON, method, [(b"allow", b"GET, HEAD")])
        if path == HEALTHZ:
            return await _send(send, 200, self._healthy, JSON, method)
        if path == READYZ:
            ready, checks = await self._readiness.check()
            state = "ok" if ready else "unavailable"
            body = _json({"status": state, "worker_pid": os.getpid(), "checks": checks})
            return await _send(send, 200 if ready else 503, body, JSON, method)
        refusal = self._refusal(scope)
        if refusal is not None:
            code, body, headers = refusal
            return await _send(send, code, body, JSON, method, headers)
        self.flush()  # this worker's counts exactly; the others' as of their last flush
        text = await anyio.to_thread.run_sync(metrics.render)  # reads every worker's files
        return await _send(send, 200, text, CONTENT_TYPE_LATEST.encode("ascii"), method)

    def _refusal(self, scope: Scope) -> tuple[int, bytes, list[tuple[bytes, bytes]]] | None:
        """Why this client may not read /metrics (status, body, headers), or None."""
        if not self._allowed(self._client(scope)):
            return 403, _error(403, "forbidden_network", "metrics are not served to this network"), []
        if self._token is None:
            return None
        sent = None
        for name, value in scope["headers"]:
            if name == b"authorization":
                sent = value
                break
        scheme, _, token = (sent or b"").partition(b" ")
        if scheme.lower() == b"bearer" and hmac.compare_digest(token.strip(), self._token):
            return None
        message = "send Authorization: Bearer <ADSLOT_METRICS_TOKEN>"
        code = "missing_token" if sent is None else "invalid_token"
        challenge = (b"www-authenticate", b'Bearer realm="adslot metrics"')
        return 401, _error(401, code, message, "Authorization"), [challenge]

    def _client(self, scope: Scope) -> str | None:
        """The client by ADSLOT_TRUSTED_PROXIES' rule (edge/clients.py), or None (refused) for a request that
        a proxy adslot does not trust forwarded: its client is unknown, and a scraper sends no such header."""
        peer, header = peer_of(scope), forwarded_for(scope["headers"])
        if header is not None and not (peer and self._proxies.trusted(peer)):
            return None
        return self._proxies.client(peer, header)

    def _allowed(self, host: str | None) -> bool:
        if host is None:
            return False
        try:
            address = ipaddress.ip_address(host.partition("%")[0])
        except ValueError:
            return False
        if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
            address = address.ipv4_mapped
        return any(address in network for network in self._allow)


async def _send(
    send: Send,
    status: int,
    body: bytes,
    content_type: bytes,
    method: str,
    headers: list[tuple[bytes, bytes]] | None = None,
) -> None:
    head = [
        (b"content-type", content_type),
        (b"content-length", b"%d" % len(body)),
        NO_STORE,
        *(headers or ()),
    ]
    await send({"type": "http.response.start", "status": status, "headers": head})
    await send({"type": "http.response.body", "body": b"" if method == "HEAD" else body})
