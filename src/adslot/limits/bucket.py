"""Token buckets, pure: `rate` tokens a second, at most `burst` kept, one taken per request.

A request that finds a token is admitted; one that finds none is told how long until one is there, which
becomes its Retry-After (whole seconds, at least 1). The clock is passed in, so the rules are tested on a
fake one.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable


def default_burst(rate: float) -> float:
    """Twice the rate, at least one request: a player that asks a little early is not refused for it."""
    return max(1.0, 2 * rate)


def retry_after(wait: float) -> int:
    """Retry-After for a wait in seconds: whole seconds, rounded up, at least 1 (0 would invite a retry
    storm)."""
    return max(1, math.ceil(wait))


class TokenBucket:
    __slots__ = ("burst", "rate", "stamp", "tokens")

    def __init__(self, rate: float, burst: float, now: float) -> None:
        if rate <= 0 or burst < 1:
            raise ValueError("a bucket needs a positive rate and a burst of at least 1")
        self.rate = rate
        self.burst = burst
        self.tokens = burst
        """Starts full: a key's first requests are never refused."""
        self.stamp = now

    def take(self, now: float) -> float:
        """Take one token: 0.0 if there was one, else the seconds until there will be (nothing taken)."""
        tokens = self.tokens
        if now > self.stamp:
            tokens = min(self.burst, tokens + (now - self.stamp) * self.rate)
            self.stamp = now
        if tokens >= 1:
            self.tokens = tokens - 1
            return 0.0
        self.tokens = tokens
        return (1 - tokens) / self.rate


class KeyBuckets:
    """One bucket per key, made full on the key's first request. Keys are API keys, so their number is that
    of the keys in use: no eviction is needed."""

    def __init__(
        self, rate: float, burst: float | None = None, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.rate = rate
        self.burst = default_burst(rate) if burst is None else burst
        self._clock = clock
        self._buckets: dict[int, TokenBucket] = {}

    def check(self, key: int) -> int:
        """0 if `key` may make this request now (its token is taken), else its Retry-After in seconds."""
        now = self._clock()
        bucket = self._buckets.get(key)
        if bucket is None:
            bucket = self._buckets[key] = TokenBucket(self.rate, self.burst, now)
        wait = bucket.take(now)
        return 0 if wait == 0.0 else retry_after(wait)
