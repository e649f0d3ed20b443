"""The narrow interface between the ledger and a database, and the SQL both dialects share.

A store applies a batch of operations in ONE transaction, under a write lock on the rows it touches, and
returns one Verdict per operation; the group committer decides what goes in a batch. Dedupe rests on the
pop_fires primary key (INSERT ... ON CONFLICT DO NOTHING), never on a read followed by an unlocked write, so
simultaneous duplicate pixels count once, across workers too. The rules themselves live in resolve.py.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from typing import Protocol

from adslot.ledger.records import COLUMNS, EVENT_COLUMNS, ISSUE_COLUMNS, AdRequest, Operation, Verdict
from adslot.ledger.resolve import Current, RowChange

TIME_COLUMNS = tuple(EVENT_COLUMNS.values())
STATE_COLUMNS = ("id", "expires_at", *TIME_COLUMNS)


class LedgerStore(Protocol):
    async def start(self) -> None: ...

    async def close(self) -> None: ...

    async def get(self, ad_request_id: uuid.UUID) -> AdRequest | None: ...

    async def apply(self, operations: Sequence[Operation]) -> list[Verdict]: ...


def current_of(row: Sequence[object]) -> Current:
    """A STATE_COLUMNS row (without its id) as the resolver's view of it."""
    expires_at, *times = row
    return Current(int(expires_at), dict(zip(TIME_COLUMNS, times, strict=True)))  # type: ignore[call-overload,arg-type]


def change_values(change: RowChange) -> tuple[object, ...]:
    """(time per event column or None, duplicates to add, late fires to add), in UPDATE order."""
    return (*(change.set_times.get(c) for c in TIME_COLUMNS), change.duplicates, change.late)


def issue_values(record: AdRequest) -> tuple[object, ...]:
    return tuple(getattr(record, c) for c in ISSUE_COLUMNS)


SELECT_ONE = f"SELECT {', '.join(COLUMNS)} FROM ad_requests WHERE id = "
INSERT_COLUMNS = ", ".join(ISSUE_COLUMNS)
COALESCE_SET = ", ".join(f"{c} = COALESCE(ad_requests.{c}, {{{c}}})" for c in TIME_COLUMNS)
COUNTER_SET = (
    "duplicate_count = ad_requests.duplicate_count + {dups}, late_count = ad_requests.late_count + {late}"
)
