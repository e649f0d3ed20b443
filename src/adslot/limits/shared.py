"""A key's ad request limit shared by every adslot process through Redis, without a round trip per request.

The bucket itself lives in Redis (`<prefix>:rl:<environment>:<key_id>`, a hash of tokens and the time they
were counted, refilled at the rate up to the burst by a Lua script that runs atomically on Redis's own clock).
Each process holds a small lease of that bucket's tokens per key and spends them locally: an admitted request
is a dict lookup and a decrement. When a lease falls to half, a task draws the next one ahead of need, so a
key under its limit never waits on Redis; only a process whose lease ran dry (a key's first request, or a key
at its limit) awaits a draw. A key Redis refuses is refused locally until Redis said a token would be back,
with no further round trip.

The bound: every admitted request spent a token Redis handed out, and a process holds at most `lease` unspent
tokens per key, so over any interval of t seconds all processes together admit at most
rate * t + burst + processes * lease requests of one key (processes: every worker of every node). The lease
is max(1, rate / 20): a twentieth of a second's worth.

Redis unreachable (or answering an error): each process falls back to its own bucket (KeyBuckets, the same
rate and burst per process), logs one warning, and tries Redis again in the background after RETRY_SECONDS.
No request is refused or failed because Redis is down.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable

import redis.asyncio as aioredis
from redis.exceptions import RedisError

from adslot.limits.bucket import KeyBuckets, default_burst, retry_after
from adslot.tasks import stop_tasks

log = logging.getLogger(__name__)

RETRY_SECONDS = 5.0
"""How long a process answers from its own buckets after Redis failed before it asks Redis again."""
TIMEOUT_SECONDS = 0.25
"""Connect and reply timeout of a draw: a Redis that hangs is treated as down after this long."""

# KEYS[1]: the bucket; ARGV: rate (tokens a second), burst, tokens wanted. Returns {granted, ms until one
# token is there (0 when some were granted)}. Time is Redis's, so the nodes' clocks do not matter.
DRAW = """
local now = redis.call('TIME')
now = tonumber(now[1]) * 1000 + math.floor(tonumber(now[2]) / 1000)
local rate = tonumber(ARGV[1]) / 1000
local burst = tonumber(ARGV[2])
local want = tonumber(ARGV[3])
local state = redis.call('HMGET', KEYS[1], 'tokens', 'at')
local tokens = tonumber(state[1])
local at = tonumber(state[2])
if tokens == nil or at == nil then
  tokens = burst
elseif now > at then
  tokens = math.min(burst, tokens + (now - at) * rate)
end
local granted = math.min(want, math.floor(tokens))
tokens = tokens - granted
redis.call('HSET', KEYS[1], 'tokens', tostring(tokens), 'at', now)
redis.call('PEXPIRE', KEYS[1], math.ceil((burst - tokens) / rate) + 1000)
local wait = 0
if granted == 0 then
  wait = math.ceil((1 - tokens) / rate)
end
return {granted, wait}
"""


def lease_size(rate: float) -> int:
    """A twentieth of a second's worth of tokens, at least one: small against the rate, so the bound's
    processes * lease term stays small, and large enough that a busy key draws a few times a second."""
    return max(1, int(rate / 20))


class _Lease:
    __slots__ = ("denied_until", "draw", "tokens")

    def __init__(self) -> None:
        self.tokens = 0
        self.draw: asyncio.Task[None] | None = None
        self.denied_until = 0.0


class SharedBuckets:
    """KeyLimiter (limits/keys.py) over a Redis bucket per key, spent through local leases."""

    def __init__(
        self,
        url: str,
        namespace: str,
        rate: float,
        burst: float | None = None,
        *,
        clock: Callable[[], float] = time.monotonic,
        retry_seconds: float = RETRY_SECONDS,
    ) -> None:
        self.rate = rate
        self.burst = default_burst(rate) if burst is None else burst
        self.lease = lease_size(rate)
        self._low = self.lease // 2
        self._url = url
        self._namespace = namespace
        self._clock = clock
        self._retry_seconds = retry_seconds
        self._local = KeyBuckets(rate, self.burst, clock)
        self._leases: dict[int, _Lease] = {}
        self._client: aioredis.Redis | None = None
        self._draw_script: Callable[..., object] | None = None
        self._down = False
        self._down_until = 0.0
        self._probe: asyncio.Task[None] | None = None

    async def start(self) -> None:
        """One connection pool for this limiter; it connects on the first draw, so a Redis that is down at
        start delays nothing."""
        self._client = aioredis.Redis.from_url(
            self._url, socket_timeout=TIMEOUT_SECONDS, socket_connect_timeout=TIMEOUT_SECONDS
        )
        self._draw_script = self._client.register_script(DRAW)

    async def stop(self) -> None:
        tasks = [lease.draw for lease in self._leases.values() if lease.draw is not None]
        if self._probe is not None:
            tasks.append(self._probe)
        await stop_tasks(*tasks)
        if self._client is not None:
            await self._client.aclose()
            self._client = None

    def check(self, key: int) -> int:
        """0: admitted, a token of the key's lease spent. -1: the lease is empty, await wait(key)."""
        lease = self._leases.get(key)
        if lease is not None and lease.tokens:
            lease.tokens -= 1
            if lease.tokens <= self._low and lease.draw is None and not self._down:
                lease.draw = asyncio.get_running_loop().create_task(self._draw(key, lease))
            return 0
        return -1

    async def wait(self, key: int) -> int:
        """0 if the request may go (a token drawn from Redis, or from the local bucket while Redis is down),
        else its Retry-After in seconds."""
        lease = self._leases.get(key)
        if lease is None:
            lease = self._leases[key] = _Lease()
        for _ in range(3):  # concurrent waiters may spend a small draw before this one: draw again
            now = self._clock()
            if self._down:
                if now >= self._down_until and (self._probe is None or self._probe.done()):
                    self._down_until = now + self._retry_seconds
                    self._probe = asyncio.get_running_loop().create_task(self._draw(key, lease))
                return self._local.check(key)
            if now < lease.denied_until:
                return retry_after(lease.denied_until - now)
            if lease.draw is None:
                lease.draw = asyncio.get_running_loop().create_task(self._draw(key, lease))
            await asyncio.shield(lease.draw)  # a request that goes away must not cancel the others' draw
            if lease.tokens:
                lease.tokens -= 1
                return 0
        now = self._clock()
        return retry_after(max(lease.denied_until - now, 1 / self.rate))

    async def _draw(self, key: int, lease: _Lease) -> None:
        """Top the lease up from the key's Redis bucket; note a refusal, or Redis being down."""
        try:
            assert self._draw_script is not None, "limiter not started"
            want = max(1, self.lease - lease.tokens)
            granted, wait_ms = await self._draw_script(  # type: ignore[misc]
                keys=[f"{self._namespace}:{key}"], args=[self.rate, self.burst, want]
            )
            lease.tokens += int(granted)
            if not granted:
                lease.denied_until = self._clock() + int(wait_ms) / 1000
            if self._down:
                self._down = False
                log.warning("Redis is reachable again: ad request limits are shared across nodes again")
        except (TimeoutError, RedisError, OSError) as exc:
            self._down_until = self._clock() + self._retry_seconds
            if not self._down:
                self._down = True
                log.warning(
                    "Redis at %s cannot be reached (%s: %s): ad request limits are per process until it is",
                    self._redacted_url(),
                    type(exc).__name__,
                    exc,
                )
        finally:
            if lease.draw is asyncio.current_task():
                lease.draw = None

    def _redacted_url(self) -> str:
        """The URL without a password, for the log."""
        scheme, sep, rest = self._url.partition("://")
        return f"{scheme}{sep}{rest.rpartition('@')[2]}"
