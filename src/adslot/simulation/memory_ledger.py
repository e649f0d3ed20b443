"""The ledger's rules on dicts instead of a database, for the forecast.

A forecast reads nothing back until its runs end and nothing else writes to its ledger, so durability and the
SQL round trips are pure cost: ~400 µs of CPU per slot decision, most of it SQLite and thread hops. This store
runs the same batch plan (store.Batch: fires resolved, counters admitted, verdicts with the counters as left),
keeping the counters, each ad request's state and the issued records in memory, so the verdicts and the
counters are those the SQLite store would give for the same operations in the same batches.

Pure: no I/O.
"""

from __future__ import annotations

import collections
import uuid
from collections.abc import Iterable, Sequence
from typing import NamedTuple

from adslot.ledger.budget import Snapshot
from adslot.ledger.claims import parse_claims
from adslot.ledger.records import AdRequest, Operation, Verdict
from adslot.ledger.remembered import after, issued
from adslot.ledger.resolve import TIME_INDEX, Current
from adslot.ledger.store import IMPRESSION_COLUMN, Batch

IMPRESSION_INDEX = TIME_INDEX[IMPRESSION_COLUMN]


class Play(NamedTuple):
    """An issued ad request whose impression counted: what the forecast's report reads (a NamedTuple: a
    forecast makes one per play, a frozen dataclass cost three times as much)."""

    venue_id: str
    screen_id: str | None
    play_time: int
    campaign_id: int | None
    impressions: float


class MemoryLedger:
    """Counters, ad request states and issued records, changed only through `apply`."""

    def __init__(self, counters: Iterable[tuple[str, Snapshot]] = (), *, fires: bool = True) -> None:
        """`counters`: the delivery counters the run starts from, as (key, (cap, reserved, delivered,
        last_at)).

        `fires` False: a run that sends no fire and counts every play at its end (play_all), as the forecast
        does. Then the ledger keeps, per issued ad request, only its Play and a tally of its claims (all that
        play_all and plays read), instead of its record, id and state: a forecast held ~0.6 KB per slot
        decision with them, ~0.3 KB without (bench/results/forecast.md: peak memory)."""
        self.counters: dict[str, Snapshot] = dict(counters)
        self._fires = fires
        self._states: dict[uuid.UUID, Current] = {}
        self._records: list[AdRequest] = []
        self._plays: list[Play] = []
        self._claimed: collections.Counter[str] = collections.Counter()
        """Without fires: how many issued ad requests hold each claims text."""
        self._played = False

    def apply(self, operations: Sequence[Operation]) -> list[Verdict]:
        """One batch, as a store applies it in one transaction. Settles and releases are not kept here: the
        forecast neither sweeps nor loses a Proof of Play."""
        batch = Batch.of(operations)
        if batch.settles or batch.releases:
            raise ValueError("the memory ledger keeps no expiry sweep and no releases")
        if batch.fires and not self._fires:
            raise ValueError("this memory ledger counts every play at the end and takes no fire")
        if self._played:
            raise ValueError("every play was counted already")
        states = self._states
        for ident in batch.named_ids():
            state = states.get(ident)
            if state is not None:
                batch.current[ident] = state
        batch.resolve(())
        counters = self.counters
        batch.load([(key, *counters[key]) for key in batch.counter_keys() if key in counters])
        batch.admit()
        for key, cap, reserved, delivered, last_at in batch.counter_writes():
            counters[key] = (cap, reserved, delivered, last_at)
        for ident, change in batch.changes.items():
            states[ident] = after(batch.current[ident], change)
        if self._fires:
            for record, claims in batch.admitted:
                states[record.id] = issued(record, claims)
                self._records.append(record)
        else:
            plays, claimed = self._plays, self._claimed
            for record, claims in batch.admitted:
                plays.append(
                    Play(
                        record.venue_id,
                        record.screen_id,
                        record.play_time,
                        record.campaign_id,
                        record.impressions,
                    )
                )
                if claims:
                    claimed[claims] += 1
        return batch.verdicts()

    def play_all(self) -> None:
        """Count every issued ad request's impression now, as its fire would have: its claimed units move
        from reserved to delivered. For a run in which every play is proven in time (no PoP lost or late):
        admission reads only delivered + reserved, so no decision depends on when the fires come. The units
        are summed by counter first: each counter then moves once (integers, so the order is immaterial)."""
        moved: collections.Counter[str] = collections.Counter()
        if self._fires:
            states = self._states
            for record in self._records:
                state = states[record.id]
                times = state.times
                if times[IMPRESSION_INDEX] is not None:
                    continue
                times = (*times[:IMPRESSION_INDEX], record.play_time, *times[IMPRESSION_INDEX + 1 :])
                states[record.id] = state._replace(times=times)
                if state.claims:
                    for key, units in parse_claims(state.claims):
                        moved[key] += units
        else:
            for text, count in self._claimed.items():
                for key, units in parse_claims(text):
                    moved[key] += units * count
            self._claimed.clear()
            self._played = True
        counters = self.counters
        for key, units in moved.items():
            if key in counters:
                cap, reserved, delivered, last_at = counters[key]
                counters[key] = (cap, reserved - units, delivered + units, last_at)

    def plays(self) -> list[Play]:
        """The issued ad requests whose impression counted, in the order they were issued."""
        if not self._fires:
            return self._plays if self._played else []
        states = self._states
        return [
            Play(r.venue_id, r.screen_id, r.play_time, r.campaign_id, r.impressions)
            for r in self._records
            if states[r.id].times[IMPRESSION_INDEX] is not None
        ]
