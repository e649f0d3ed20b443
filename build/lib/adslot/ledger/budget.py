"""Pure admission rules over delivery counters: reserve, deliver, release; and a worker's cached view of them.

The invariant every function here keeps, for every counter: delivered + reserved <= cap (when it has a cap).
- admit reserves all of an ad request's claims or none: a claim that would push its counter over the cap
  refuses the whole ad request, with the reason of the first claim that does not fit;
- deliver (a played ad request is settled) moves units from reserved to delivered: the sum does not change;
- release (the player gave the slot back, or it expired unplayed) returns reserved units: the sum shrinks.
The stores call these under the database's write lock on the counter rows, so the invariant holds on the rows
at every commit, across workers; DeliveryCache runs the same rules on a stale copy, only to avoid asking the
ledger for what it would refuse anyway.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Literal

from adslot.ledger.claims import Claim, Claims, parse_claims

Reason = Literal["cap_reached", "paced", "frequency", "separation"]
Snapshot = tuple[int | None, int, int, int | None]
"""A counter as verdicts report it: (cap, reserved, delivered, last_at)."""


@dataclass(slots=True)
class Counter:
    """One delivery_counters row. For a spacing row, `cap` is the gap (seconds) its last play asked for and
    `last_at` that play's time; for a pacing row, cap None means "not sized yet"."""

    cap: int | None
    reserved: int = 0
    delivered: int = 0
    last_at: int | None = None

    def snapshot(self) -> Snapshot:
        return (self.cap, self.reserved, self.delivered, self.last_at)


def ceil_div(numerator: int, denominator: int) -> int:
    """Integer ceiling division: counters are exact integers, never floats."""
    return -(-numerator // denominator)


def _reason(claim: Claim) -> Reason:
    if claim.pace is not None:
        return "paced"
    return "frequency" if claim.key.startswith("f") else "cap_reached"


def _empty() -> Counter:
    return Counter(None)


def stage(claims: Claims, play_time: int, counters: Mapping[str, Counter]) -> dict[str, Counter] | Reason:
    """The counters as they would be after admitting `claims`, or why they cannot be admitted.

    Reads `counters` and changes nothing in it; a key absent from it is a counter that does not exist yet.
    - a count claim fits if delivered + reserved + units <= cap; its cap is the campaign's current one (an
      operator may raise or lower it), except for pacing, whose hour is sized once, when its row is created:
      ceil((goal - used of the total) / remaining active hours), never below 0;
    - a spacing fits if no play was marked on its key, or play_time is at least max(the marked play's gap,
      its own gap) after the marked play. Plays earlier than the mark are refused too: the row remembers
      only the latest play, so an earlier slot could fall next to an older play it no longer knows, and a
      separation must never be broken (players ask for their next slot, so their play times rise anyway).
    """
    staged: dict[str, Counter] = {}
    for claim in claims.counts:
        current = staged.get(claim.key) or counters.get(claim.key) or _empty()
        pace = claim.pace
        if pace is None:
            cap = claim.cap
        elif current.cap is not None:
            cap = current.cap
        else:
            total = counters.get(pace.total_key)
            used = total.delivered + total.reserved if total is not None else 0
            cap = max(0, ceil_div(pace.goal - used, max(1, pace.remaining_active_hours)))
        if cap is not None and current.delivered + current.reserved + claim.units > cap:
            return _reason(claim)
        staged[claim.key] = Counter(cap, current.reserved + claim.units, current.delivered, current.last_at)
    for spacing in claims.spacings:
        current = staged.get(spacing.key) or counters.get(spacing.key) or _empty()
        if current.last_at is not None:
            gap = max(current.cap or 0, spacing.gap_seconds)
            if play_time < current.last_at + gap:
                return "separation"
        staged[spacing.key] = Counter(spacing.gap_seconds, current.reserved, current.delivered, play_time)
    return staged


def admit(claims: Claims, play_time: int, counters: dict[str, Counter]) -> Reason | None:
    """Reserve every claim (None) or none of them (the reason); counters change only on success."""
    staged = stage(claims, play_time, counters)
    if isinstance(staged, str):
        return staged
    counters.update(staged)
    return None


def deliver(claims_json: str | None, counters: Mapping[str, Counter]) -> None:
    """The ad request was played (settled so after its impression counted): each claimed unit moves from
    reserved to delivered."""
    for key, units in parse_claims(claims_json):
        counter = counters.get(key)
        if counter is not None:
            counter.reserved -= units
            counter.delivered += units


def release(claims_json: str | None, counters: Mapping[str, Counter]) -> None:
    """The ad request will not play (released by its player, or expired unplayed): return its reservations."""
    for key, units in parse_claims(claims_json):
        counter = counters.get(key)
        if counter is not None:
            counter.reserved -= units


def claim_keys(claims: Claims) -> Iterable[str]:
    """Every counter admission reads: the claims' own keys and the totals their pacing is sized from."""
    for claim in claims.counts:
        yield claim.key
        if claim.pace is not None:
            yield claim.pace.total_key
    for spacing in claims.spacings:
        yield spacing.key


class DeliveryCache:
    """A worker's last known view of the counters, to skip campaigns the ledger would refuse.

    It is only a hint: the ledger decides under its lock. A key it does not know is accepted (the ledger will
    say), and a known counter is forgotten after `ttl_seconds`, because releases by other workers and by the
    expiry sweep free room that this worker only learns about by asking again. At most `max_keys` counters are
    kept; the least recently refreshed go first, so memory stays bounded however many screens and hours pass.
    """

    def __init__(
        self,
        max_keys: int = 50_000,
        ttl_seconds: float = 5.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._max_keys = max_keys
        self._ttl = ttl_seconds
        self._clock = clock
        self._entries: dict[str, tuple[float, Counter]] = {}

    def __len__(self) -> int:
        return len(self._entries)

    def accepts(self, claims: Claims, play_time: int) -> bool:
        """Would the ledger admit these claims, as far as this worker knows? (Same rules as admit.)"""
        if not claims:
            return True
        entries = self._entries
        fresh_after = self._clock() - self._ttl
        known: dict[str, Counter] = {}
        for key in claim_keys(claims):
            entry = entries.get(key)
            if entry is not None:
                if entry[0] >= fresh_after:
                    known[key] = entry[1]
                else:
                    del entries[key]
        return not known or not isinstance(stage(claims, play_time, known), str)

    def update(self, counters: Mapping[str, Snapshot]) -> None:
        """Learn counters from a verdict: (cap, reserved, delivered, last_at) as the ledger committed them."""
        entries = self._entries
        now = self._clock()
        for key, (cap, reserved, delivered, last_at) in counters.items():
            entries.pop(key, None)  # re-insert at the end: the dict's order is the refresh order
            entries[key] = (now, Counter(cap, reserved, delivered, last_at))
        overflow = len(entries) - self._max_keys
        if overflow > 0:
            for key in list(_first(entries, overflow)):
                del entries[key]


def _first(entries: dict[str, tuple[float, Counter]], count: int) -> Iterable[str]:
    for index, key in enumerate(entries):
        if index >= count:
            return
        yield key
