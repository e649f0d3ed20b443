"""Pure Proof-of-Play rules: what each fire in a batch counts as, and the row changes that follow.

The store gathers, under its write lock, the current state of the batch's ad requests, with the bits of
the (event, layer) fires each has stored (records.FIRE_BITS); this module decides the rest without I/O:
- unknown ad request: `unknown`; fired after its expiry: `late` (kept in late_count, never counted);
- a repeat of a fire already stored, or earlier in the same batch: `duplicate` (kept in duplicate_count);
- the first fire of an event from a layer: `counted` if the event had no time yet, else `echo` (the
  other VAST layer already counted it);
- a fire in time on an ad request its player released: `released` (kept in late_count, never counted: its
  reservation was already given back, so counting it could over-deliver a cap);
- a first fire that an invalid-traffic rule flags (ivt.py, when the store has a Judge): `invalid`, kept in
  the change's `flagged` (the store writes it to invalid_fires) with both layers' bits of its event set, so
  its repeats and the other layer's fire are duplicates; its event's time is never set.
It also settles ad requests: a player's early release and the expiry sweep, and says which reservations
move (delivered when a played ad request is settled, returned with a release or an unplayed expiry).
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import NamedTuple

from adslot.ledger.ivt import NO_EVENTS, Judge
from adslot.ledger.records import (
    EVENT_COLUMNS,
    FIRE_BITS,
    Fire,
    Outcome,
    Release,
    SettleReason,
    Verdict,
)

Times = tuple[int | None, ...]
"""An ad request's event times, one per EVENT_COLUMNS entry in its order (None: not fired yet)."""
NO_TIMES: Times = NO_EVENTS
"""The times of every ad request with no event yet: one tuple that all of them share."""
TIME_INDEX: Mapping[str, int] = {column: i for i, column in enumerate(EVENT_COLUMNS.values())}
"""Where each event column's time sits in Times."""
_SLOTS: Mapping[str, tuple[str, int]] = {
    event: (column, TIME_INDEX[column]) for event, column in EVENT_COLUMNS.items()
}
_IMPRESSION = TIME_INDEX["impression_at"]
_UNKNOWN = Verdict("unknown")
_EVENT_BITS: Mapping[str, int] = {
    event: FIRE_BITS[event, "wrapper"] | FIRE_BITS[event, "inline"] for event in EVENT_COLUMNS
}
"""Both layers' bits of each event: what a flagged fire sets."""
Flagged = tuple[str, str, int, str]
"""A flagged fire as invalid_fires keeps it: (event, layer, played_at, reason)."""


class Current(NamedTuple):
    """An ad request as stored before this batch: expiry, event times, owner, claims, settlement and the bits
    of its stored fires.

    A NamedTuple (immutable, as a frozen dataclass would be, at a third of its construction cost) of plain
    values, the times a tuple rather than a mapping: the writer makes one for every ad request of every
    batch, from a database row or from its memory (remembered.py), and both are tuples already."""

    expires_at: int
    times: Times = NO_TIMES
    account_id: int = 0
    claims: str | None = None
    settle_reason: str | None = None
    fired: int = 0
    network: int = 0
    """Its ad request's network (ivt.network_key); 0: unknown."""
    duration: int | None = None
    """Its creative's duration in seconds; None: unknown."""
    programmatic: bool = False
    """A demand partner won it: its first counted impression makes its billing notice due."""

    @property
    def played(self) -> bool:
        return self.times[_IMPRESSION] is not None


@dataclass(slots=True)
class RowChange:
    """Per ad request: event columns to set (only where still NULL), fire bits to set, counters to add,
    settlement to set."""

    set_times: dict[str, int] = field(default_factory=dict)
    fired: int = 0
    duplicates: int = 0
    late: int = 0
    settled_at: int | None = None
    settle_reason: SettleReason | None = None
    flagged: list[Flagged] | None = None
    """Fires the invalid-traffic rules flagged (None: none, nearly always)."""

    def settle(self, at: int, reason: SettleReason) -> None:
        self.settled_at = at
        self.settle_reason = reason

    @property
    def writes(self) -> bool:
        return bool(self.set_times or self.fired or self.duplicates or self.late or self.settle_reason)


def _known(state: Current, change: RowChange) -> Times:
    """The ad request's counted event times, this batch's included."""
    if not change.set_times:
        return state.times
    times = list(state.times)
    for column, at in change.set_times.items():
        index = TIME_INDEX[column]
        if times[index] is None:
            times[index] = at
    return tuple(times)


def resolve(
    fires: Sequence[Fire], current: dict[uuid.UUID, Current], judge: Judge | None = None
) -> tuple[list[Verdict], dict[uuid.UUID, RowChange]]:
    """`judge`: the invalid-traffic rules asked about each fire that would count (None: none)."""
    verdicts: list[Verdict] = []
    changes: dict[uuid.UUID, RowChange] = {}
    outcome: Outcome
    for ident, event, layer, at, source in fires:
        state = current.get(ident)
        if state is None:
            verdicts.append(_UNKNOWN)
            continue
        change = changes.get(ident)
        if change is None:
            change = changes[ident] = RowChange()
        expires_at = state.expires_at
        bit = FIRE_BITS[event, layer]
        if at > expires_at:
            change.late += 1
            outcome = "late"
        elif state.settle_reason == "released":
            change.late += 1
            outcome = "released"
        elif (state.fired | change.fired) & bit:
            change.duplicates += 1
            outcome = "duplicate"
        else:
            column, index = _SLOTS[event]
            if state.times[index] is None and column not in change.set_times:
                if judge is not None:
                    reason = judge.judge(
                        index, at, _known(state, change), state.duration, state.network, source
                    )
                    if reason is not None:
                        change.fired |= _EVENT_BITS[event]
                        if change.flagged is None:
                            change.flagged = []
                        change.flagged.append((event, layer, at, reason))
                        verdicts.append(Verdict("invalid", expires_at, reason))
                        continue
                change.fired |= bit
                change.set_times[column] = at
                outcome = "counted"
            else:
                change.fired |= bit
                outcome = "echo"
        verdicts.append(Verdict(outcome, expires_at))
    return verdicts, changes


def _played(state: Current, change: RowChange | None) -> bool:
    return state.played or (change is not None and "impression_at" in change.set_times)


def resolve_releases(
    releases: Sequence[Release], current: dict[uuid.UUID, Current], changes: dict[uuid.UUID, RowChange]
) -> list[Verdict]:
    """Each release's outcome, after this batch's fires (a release behind a counted impression is `played`).

    Another account's ad request is `unknown`, exactly like a missing one: the uuid must not reveal that it
    exists. A release after the expiry is `late` and settles the ad request as expired, which returns the
    same reservations the sweep would, only sooner.
    """
    verdicts: list[Verdict] = []
    for op in releases:
        state = current.get(op.ad_request_id)
        if state is None or state.account_id != op.account_id:
            verdicts.append(Verdict("unknown"))
            continue
        change = changes.get(op.ad_request_id)
        settled = (change.settle_reason if change is not None else None) or state.settle_reason
        outcome: Outcome
        if _played(state, change):
            outcome = "played"
        elif settled == "released":
            outcome = "already_released"
        elif op.at > state.expires_at or settled is not None:
            outcome = "late"
            if settled is None:
                changes.setdefault(op.ad_request_id, RowChange()).settle(op.at, "expired")
        else:
            outcome = "released"
            changes.setdefault(op.ad_request_id, RowChange()).settle(op.at, "released")
        verdicts.append(Verdict(outcome, state.expires_at))
    return verdicts


def resolve_settles(
    due: Sequence[uuid.UUID], current: dict[uuid.UUID, Current], changes: dict[uuid.UUID, RowChange], now: int
) -> int:
    """Settle the expired ad requests the sweep found: `played` if their impression counted, else `expired`.

    Ones already settled (before this batch, or by a release in it) are skipped. Returns how many it settled.
    """
    settled = 0
    for ad_request_id in due:
        state = current.get(ad_request_id)
        if state is None or state.settle_reason is not None:
            continue
        change = changes.setdefault(ad_request_id, RowChange())
        if change.settle_reason is not None:
            continue
        change.settle(now, "played" if _played(state, change) else "expired")
        settled += 1
    return settled


def counter_moves(
    current: dict[uuid.UUID, Current], changes: dict[uuid.UUID, RowChange]
) -> tuple[list[str], list[str]]:
    """The claims (JSON) to deliver and to release because of this batch's changes.

    Delivered: an ad request settled as played in this batch (by the expiry sweep, after its impression
    counted). Released: one settled as released or expired in this batch. A counted impression moves nothing
    at once: delivering leaves reserved + delivered, all that admission reads, as it was, so it waits for
    the settlement, and a batch of impressions never locks or writes a campaign's counters (the rows every
    ad request of that campaign claims). An ad request settled before this batch holds nothing any more (a
    fire still in time after an early expiry settle is counted as Proof of Play, but no reservation is left
    to move, so no cap can be over-delivered by it).
    """
    delivered: list[str] = []
    released: list[str] = []
    for ad_request_id, change in changes.items():
        state = current[ad_request_id]
        if state.claims is None or state.settle_reason is not None:
            continue
        if change.settle_reason == "played":
            delivered.append(state.claims)
        elif change.settle_reason in ("released", "expired"):
            released.append(state.claims)
    return delivered, released
