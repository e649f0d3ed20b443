"""The ad request limit of an environment: none, per process, or shared through Redis (settings decide).

The ad request handler calls `check(key_id)` right after the key is authenticated: 0 lets the request on,
a positive number refuses it with that Retry-After, and -1 (only the shared limiter says it, when its lease is
empty) means `await wait(key_id)` for the answer. So the common request creates no coroutine.
"""

from __future__ import annotations

from typing import Protocol

from adslot.limits.bucket import KeyBuckets
from adslot.limits.shared import SharedBuckets
from adslot.settings import Settings


class KeyLimiter(Protocol):
    def check(self, key: int) -> int: ...

    async def wait(self, key: int) -> int: ...

    async def start(self) -> None: ...

    async def stop(self) -> None: ...


class Unlimited:
    """ADSLOT_RATE_LIMIT_AD_REQUESTS=0: every request goes."""

    def check(self, key: int) -> int:
        return 0

    async def wait(self, key: int) -> int:
        return 0

    async def start(self) -> None:
        return None

    async def stop(self) -> None:
        return None


class LocalBuckets(KeyBuckets):
    """KeyBuckets with the KeyLimiter lifecycle: one bucket per key in this process."""

    async def wait(self, key: int) -> int:
        return self.check(key)

    async def start(self) -> None:
        return None

    async def stop(self) -> None:
        return None


def key_limiter(settings: Settings, environment: str) -> KeyLimiter:
    rate = settings.rate_limit_ad_requests
    if rate <= 0:
        return Unlimited()
    burst = settings.rate_limit_burst or None
    if settings.redis_url:
        namespace = f"{settings.redis_key_prefix}:rl:{environment}"
        return SharedBuckets(settings.redis_url, namespace, rate, burst)
    return LocalBuckets(rate, burst)
