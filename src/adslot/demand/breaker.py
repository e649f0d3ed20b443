"""A circuit breaker per demand partner: a partner that keeps failing is left alone for a while.

Asking a dead or drowning partner costs every slot its `tmax` for nothing, and adds load to a partner that is
already failing. After `threshold` consecutive failures the breaker opens: the partner is skipped for
`cooldown` seconds. Then it lets one probe through (half-open): a success closes it, a failure opens it
again for twice as long, up to `max_cooldown`, so a partner that stays down costs one request per cool-down.

Pure: the clock is passed in (monotonic seconds), so the rules are tested without sleeping. A result that
arrives while the breaker is open and no probe is out (a request sent before it opened) changes nothing:
partners' timeouts (at most 2 s) are shorter than any cool-down, so such results are rare and stale.
"""

from __future__ import annotations

from typing import Literal

BreakerState = Literal["closed", "open", "half_open"]

DEFAULT_THRESHOLD = 5
DEFAULT_COOLDOWN_S = 10.0
DEFAULT_MAX_COOLDOWN_S = 300.0
"""Five minutes: a partner back up is asked again within that, however long it was down."""


class CircuitBreaker:
    """closed → (threshold consecutive failures) → open → (cool-down over) → half_open → one probe:
    success → closed, failure → open with the cool-down doubled (capped)."""

    __slots__ = (
        "_cooldown",
        "_failures",
        "_opened_until",
        "_probing_since",
        "base_cooldown",
        "max_cooldown",
        "threshold",
    )

    def __init__(
        self,
        threshold: int = DEFAULT_THRESHOLD,
        cooldown: float = DEFAULT_COOLDOWN_S,
        max_cooldown: float = DEFAULT_MAX_COOLDOWN_S,
    ) -> None:
        if threshold < 1 or cooldown <= 0 or max_cooldown < cooldown:
            raise ValueError("a breaker needs threshold >= 1 and 0 < cooldown <= max_cooldown")
        self.threshold = threshold
        self.base_cooldown = cooldown
        self.max_cooldown = max_cooldown
        self._failures = 0
        self._cooldown = cooldown
        self._opened_until: float | None = None
        self._probing_since: float | None = None

    @property
    def consecutive_failures(self) -> int:
        return self._failures

    @property
    def cooldown(self) -> float:
        """The cool-down the breaker opened (or will open) with: doubled by each failed probe."""
        return self._cooldown

    def state(self, now: float) -> BreakerState:
        if self._opened_until is None:
            return "closed"
        return "open" if now < self._opened_until else "half_open"

    def allow(self, now: float) -> bool:
        """May a request go now? Always when closed; never while open; when half-open, one probe at a time.

        A probe whose result never came (its ask was cancelled) is given up after one base cool-down, so the
        breaker cannot stay half-open and shut for good."""
        state = self.state(now)
        if state == "closed":
            return True
        if state == "open":
            return False
        if self._probing_since is not None and now - self._probing_since < self.base_cooldown:
            return False
        self._probing_since = now
        return True

    def success(self, now: float) -> None:
        """The partner answered (a bid, a no-bid, or bids dropped on their merits): it works."""
        self._failures = 0
        self._cooldown = self.base_cooldown
        self._opened_until = None
        self._probing_since = None

    def failure(self, now: float) -> None:
        """A timeout, a transport or HTTP error, or garbage."""
        self._failures += 1
        if self._probing_since is not None:
            self._cooldown = min(self.max_cooldown, self._cooldown * 2)
            self._open(now)
        elif self._opened_until is None and self._failures >= self.threshold:
            self._open(now)

    def _open(self, now: float) -> None:
        self._opened_until = now + self._cooldown
        self._probing_since = None
