"""What a ledger writer remembers of the rows it wrote itself: each ad request's state and stored fires.

Every batch needs the state of the ad requests its fires name, and which of its fires pop_fires already
holds. Nearly all of them are rows this same writer wrote moments before (the ad request it issued, the
player's earlier fires and retries), so reading them back from the database on every batch is wasted work.
A writer may trust its memory only while nobody else has written: the store checks a version that changes
when any other connection commits (SQLite's data_version, read under the write lock) and forgets everything
when it moved. Only what a committed batch wrote is remembered; a failed batch forgets everything.

Pure: no I/O; the store feeds it versions, the batch it committed and the fires it offered.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType

from adslot.ledger.records import AdRequest
from adslot.ledger.resolve import Current, FireKey, RowChange

LIMIT = 100_000
"""Ad requests remembered at most, the ones written longest ago forgotten first: minutes of a busy screen
network's traffic (pixels follow their ad request within a play window). Each costs about 430 bytes besides
its uuid (tracemalloc, one remembered fire included; a fired one holds its own times, about 300 more): some
50-80 MB in all. An ad request no longer remembered is read from the database, as without this memory."""


@dataclass(slots=True)
class _Row:
    state: Current | None
    """None: only its fires are known (a store that must read every state, PostgreSQL's)."""
    fires: set[tuple[str, str]] | None = None
    """(event, layer) pairs that pop_fires holds for this ad request (None until the first)."""


def after(state: Current, change: RowChange | None) -> Current:
    """The state a committed change leaves: event times and the settlement are set once, as the UPDATE's
    COALESCE sets them; the counters are not part of the state."""
    if change is None or not (change.set_times or change.settle_reason):
        return state
    times = dict(state.times)
    for column, at in change.set_times.items():
        if times.get(column) is None:
            times[column] = at
    return Current(
        state.expires_at, times, state.account_id, state.claims, state.settle_reason or change.settle_reason
    )


_UNFIRED: dict[tuple[str, ...], Mapping[str, int | None]] = {}


def issued(record: AdRequest, claims: str | None, time_columns: Sequence[str]) -> Current:
    """The state of an ad request as its INSERT stores it: no event time, not settled. Every such state
    shares one read-only mapping of times (half of what each remembered ad request would cost)."""
    columns = tuple(time_columns)
    times = _UNFIRED.get(columns)
    if times is None:
        times = _UNFIRED[columns] = MappingProxyType(dict.fromkeys(columns))
    return Current(record.expires_at, times, record.account_id, claims, None)


class Remembered:
    def __init__(self, limit: int = LIMIT) -> None:
        self._rows: dict[uuid.UUID, _Row] = {}
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

    def states(self, ids: Iterable[uuid.UUID]) -> tuple[dict[uuid.UUID, Current], list[uuid.UUID]]:
        """(the remembered states, the ids to read from the database)."""
        found: dict[uuid.UUID, Current] = {}
        missing: list[uuid.UUID] = []
        rows = self._rows
        for ident in ids:
            row = rows.get(ident)
            if row is None or row.state is None:
                missing.append(ident)
            else:
                found[ident] = row.state
        return found, missing

    def unstored(self, keys: Sequence[FireKey]) -> list[FireKey]:
        """The fires among `keys` that pop_fires may not hold yet: the ones to offer it."""
        rows = self._rows
        out = []
        for key in keys:
            row = rows.get(key[0])
            if row is None or row.fires is None or (key[1], key[2]) not in row.fires:
                out.append(key)
        return out

    def commit(
        self,
        states: dict[uuid.UUID, Current],
        changes: dict[uuid.UUID, RowChange],
        offered: Iterable[FireKey],
        admitted: Iterable[tuple[uuid.UUID, Current]],
    ) -> None:
        """After a COMMIT: remember what it left. `offered` fires are all in pop_fires now (new or not)."""
        rows = self._rows
        for ident, state in states.items():
            row = rows.pop(ident, None)
            new = after(state, changes.get(ident))
            rows[ident] = _Row(new) if row is None else _Row(new, row.fires)  # re-inserted: newest last
        self.stored(offered)
        for ident, state in admitted:
            rows.pop(ident, None)
            rows[ident] = _Row(state)
        self._trim()

    def stored(self, offered: Iterable[FireKey]) -> None:
        """After a COMMIT: the `offered` fires are all in pop_fires now (new or not). pop_fires never drops
        a row, so this stays true whoever writes next."""
        rows = self._rows
        for ident, event, layer in offered:
            row = rows.get(ident)
            if row is None:
                row = rows[ident] = _Row(None)
            if row.fires is None:
                row.fires = set()
            row.fires.add((event, layer))
        self._trim()

    def _trim(self) -> None:
        rows = self._rows
        excess = len(rows) - self._limit
        if excess > 0:
            for ident in list(_first(rows, excess)):
                del rows[ident]


def _first(rows: dict[uuid.UUID, _Row], count: int) -> Iterable[uuid.UUID]:
    for n, ident in enumerate(rows):
        if n >= count:
            return
        yield ident
