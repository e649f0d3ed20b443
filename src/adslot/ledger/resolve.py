"""Pure Proof-of-Play rules: what each fire in a batch counts as, and the row changes that follow.

The store gathers, under its write lock, the current state of the batch's ad requests and which
(ad request, event, layer) fires are new to the database; this module decides the rest without I/O:
- unknown ad request: `unknown`; fired after its expiry: `late` (kept in late_count, never counted);
- a repeat of a fire already stored, or earlier in the same batch: `duplicate` (kept in duplicate_count);
- the first fire of an event from a layer: `counted` if the event had no time yet, else `echo` (the
  other VAST layer already counted it).
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field

from adslot.ledger.records import EVENT_COLUMNS, Fire, Verdict

FireKey = tuple[uuid.UUID, str, str]


@dataclass(frozen=True, slots=True)
class Current:
    """An ad request's expiry and event times as stored before this batch."""

    expires_at: int
    times: dict[str, int | None]


@dataclass(slots=True)
class RowChange:
    """Per ad request: event columns to set (only where still NULL) and counters to add."""

    set_times: dict[str, int] = field(default_factory=dict)
    duplicates: int = 0
    late: int = 0


def resolve(
    fires: Sequence[Fire], current: dict[uuid.UUID, Current], fresh: set[FireKey]
) -> tuple[list[Verdict], dict[uuid.UUID, RowChange]]:
    verdicts: list[Verdict] = []
    changes: dict[uuid.UUID, RowChange] = {}
    consumed: set[FireKey] = set()
    for fire in fires:
        state = current.get(fire.ad_request_id)
        if state is None:
            verdicts.append(Verdict("unknown"))
            continue
        change = changes.setdefault(fire.ad_request_id, RowChange())
        key = (fire.ad_request_id, fire.event, fire.layer)
        if fire.at > state.expires_at:
            change.late += 1
            verdicts.append(Verdict("late", state.expires_at))
        elif key not in fresh or key in consumed:
            change.duplicates += 1
            verdicts.append(Verdict("duplicate", state.expires_at))
        else:
            consumed.add(key)
            column = EVENT_COLUMNS[fire.event]
            if state.times.get(column) is None and column not in change.set_times:
                change.set_times[column] = fire.at
                verdicts.append(Verdict("counted", state.expires_at))
            else:
                verdicts.append(Verdict("echo", state.expires_at))
    return verdicts, changes


def candidates(fires: Sequence[Fire], current: dict[uuid.UUID, Current]) -> list[FireKey]:
    """The fires worth offering to pop_fires: known ad requests, fired in time, each key once."""
    keys: dict[FireKey, int] = {}
    for fire in fires:
        state = current.get(fire.ad_request_id)
        if state is not None and fire.at <= state.expires_at:
            keys.setdefault((fire.ad_request_id, fire.event, fire.layer), fire.at)
    return list(keys)


def first_fire_times(fires: Sequence[Fire], keys: list[FireKey]) -> list[int]:
    """The time of the first fire of each key, in keys' order."""
    first: dict[FireKey, int] = {}
    for fire in fires:
        first.setdefault((fire.ad_request_id, fire.event, fire.layer), fire.at)
    return [first[k] for k in keys]
