"""What a ledger writer remembers of the rows it wrote itself: each ad request's state, fired bits included.

Every batch needs the state of the ad requests its fires name. Nearly all of them are rows this same writer
wrote moments before (the ad request it issued, the player's earlier fires and retries), so reading them back
from the database on every batch is wasted work. A writer may trust its memory only while nobody else has
written: the store checks a version that changes when any other connection commits (SQLite's data_version,
read under the write lock) and forgets everything when it moved. Only what a committed batch wrote is
remembered; a failed batch forgets everything. A PostgreSQL writer has no such version (another node may
write any row at any moment): it keeps the same memory but only as a guess, which the UPDATE that relies on
it checks row by row, forgetting (drop()) the ad requests it finds changed (postgres_store.py).

Each ad request is kept as one tuple of plain values under its uuid's integer, so the garbage collector
stops looking at it after its first pass: with dataclasses, sets and uuid objects, 100,000 remembered ad
requests added ~35 ms to every full collection of the writer process, a stall every waiting request felt.
Equal tuples are kept once (most ad requests share their state with hundreds of others: the same expiry
second, owner and claims, nothing fired or the same fires in the same second), so a remembered ad request
costs its dict entry and its key, ~100 bytes, and the memory can cover a whole play window.

Pure: no I/O; the store feeds it versions and the batch it committed.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable
from itertools import islice
from typing import TypeGuard

from adslot.ledger.records import AdRequest
from adslot.ledger.resolve import NO_TIMES, TIME_INDEX, Current, RowChange

LIMIT = 1_000_000
"""Ad requests remembered at most, the ones written longest ago forgotten first, about 100 MB when full
(tracemalloc: ~96 bytes each, their key and dict entry; their states are shared). A fire on an ad request no
longer remembered reads its state from the database (~12 µs of the writer's CPU on SQLite, measured), as it
would without this memory. A million covers more than the play window of a busy network (40 minutes of 400
ad requests a second: 5,000 screens with 12-second slots); until `LIMIT` was raised from 100,000 the
benchmark's impressions, on ad requests minted a minute or two before, all missed it."""
SHARED_LIMIT = 1 << 14
"""Distinct states kept for sharing; beyond it the table starts again (remembered rows keep theirs)."""

_Row = tuple[object, ...]
"""A Current's fields as a plain tuple: (expires_at, event times, account_id, claims, settle_reason, fired
bits, network, duration). Not the Current itself: the collector untracks plain tuples of plain values, not
NamedTuples."""


def after(state: Current, change: RowChange | None) -> Current:
    """The state a committed change leaves: event times and the settlement are set once, as the UPDATE's
    COALESCE sets them, fired bits are added; the counters are not part of the state."""
    if not _alters(change):
        return state
    return _state(_row_after(state, change))


def _alters(change: RowChange | None) -> TypeGuard[RowChange]:
    return change is not None and bool(change.fired or change.set_times or change.settle_reason)


def _row_after(state: Current, change: RowChange) -> _Row:
    """after() as the plain tuple the memory keeps, made once: no Current to build and copy again."""
    times = state.times
    if change.set_times:
        changed = list(times)
        for column, at in change.set_times.items():
            index = TIME_INDEX[column]
            if changed[index] is None:
                changed[index] = at
        times = tuple(changed)
    return (
        state.expires_at,
        times,
        state.account_id,
        state.claims,
        state.settle_reason or change.settle_reason,
        state.fired | change.fired,
        state.network,
        state.duration,
        state.programmatic,
    )


def issued(record: AdRequest, claims: str | None) -> Current:
    """The state of an ad request as its INSERT stores it: no event time, no fire, not settled."""
    return Current(
        record.expires_at,
        NO_TIMES,
        record.account_id,
        claims,
        None,
        0,
        record.source_network or 0,
        record.duration_seconds,
        record.campaign_id is None,
    )


_state = Current._make


class Remembered:
    def __init__(self, limit: int = LIMIT) -> None:
        self._rows: dict[int, _Row] = {}
        """Oldest written first (a dict keeps insertion order; writing a row again moves it to the end). A
        plain dict, not an OrderedDict, which costs twice the bytes per entry."""
        self._shared: dict[_Row, _Row] = {}
        self._limit = limit
        self._version: object = None

    def __len__(self) -> int:
        return len(self._rows)

    def check(self, version: object) -> None:
        """Under the write lock, before a batch: forget everything if another writer committed since."""
        if version != self._version:
            self._rows.clear()
            self._version = version

    def forget(self) -> None:
        self._rows.clear()
        self._version = None

    def drop(self, ids: Iterable[uuid.UUID]) -> None:
        """Forget these ad requests only: the database holds something else for them than remembered."""
        rows = self._rows
        for ident in ids:
            rows.pop(ident.int, None)

    def states(self, ids: Iterable[uuid.UUID]) -> tuple[dict[uuid.UUID, Current], list[uuid.UUID]]:
        """(the remembered states, the ids to read from the database)."""
        found: dict[uuid.UUID, Current] = {}
        missing: list[uuid.UUID] = []
        rows = self._rows
        for ident in ids:
            row = rows.get(ident.int)
            if row is None:
                missing.append(ident)
            else:
                found[ident] = _state(row)
        return found, missing

    def commit(
        self,
        states: dict[uuid.UUID, Current],
        changes: dict[uuid.UUID, RowChange],
        admitted: Iterable[tuple[uuid.UUID, Current]],
        *,
        merge: bool = False,
    ) -> None:
        """After a COMMIT: remember what it left, each row now the newest.

        `states` are the batch's states as states() gave them (or the database, for the ids it did not
        remember), so a remembered one that no change altered is kept as it is.

        `merge`: the changes go onto the row as remembered now rather than onto `states`, for a batch that
        was resolved on the memory while others on the same ad requests were in flight (PostgreSQL's
        unlocked statement): what those committed meanwhile stays remembered. A change only adds to a row
        (fired bits, times and settlement set once), so the order the two are remembered in does not
        matter."""
        rows = self._rows
        share = self._share
        change_of = changes.get
        for ident, state in states.items():
            key = ident.int
            row = rows.pop(key, None)
            change = change_of(ident)
            if _alters(change):
                base = _state(row) if merge and row is not None else state
                rows[key] = share(_row_after(base, change))
            else:
                # What `state` was read from: unchanged (every repeat), the remembered row stays.
                rows[key] = row if row is not None else share(tuple(state))
        for ident, state in admitted:
            key = ident.int
            rows.pop(key, None)
            rows[key] = self._share(tuple(state))
        if len(rows) > self._limit:
            self._drop_oldest()

    def _share(self, row: _Row) -> _Row:
        shared = self._shared
        if len(shared) >= SHARED_LIMIT:
            shared.clear()
        return shared.setdefault(row, row)

    def _drop_oldest(self) -> None:
        """Down to seven eighths of the limit at once: finding the oldest walks the slots that the dict has
        freed at its front since it last compacted itself, so once per eighth, not once per batch."""
        rows = self._rows
        for key in list(islice(rows, len(rows) - (self._limit - self._limit // 8))):
            del rows[key]
