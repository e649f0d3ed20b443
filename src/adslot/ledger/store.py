"""The narrow interface between the ledger and a database, and the SQL both dialects share.

A store applies a batch of operations in ONE transaction and returns one outcome per operation; the
group committer decides what goes in a batch. Dedupe is one atomic INSERT ... ON CONFLICT DO NOTHING per
fire, never a read followed by a write, so simultaneous duplicate pixels count once.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Sequence
from typing import Protocol

from adslot.ledger.records import COLUMNS, EVENT_COLUMNS, ISSUE_COLUMNS, AdRequest, Fire, Operation, Outcome


class LedgerStore(Protocol):
    async def start(self) -> None: ...

    async def close(self) -> None: ...

    async def get(self, ad_request_id: uuid.UUID) -> AdRequest | None: ...

    async def apply(self, operations: Sequence[Operation]) -> list[Outcome]: ...


class LedgerSql:
    """Statement texts for one placeholder style (`?` for sqlite3, `$n` for asyncpg)."""

    def __init__(self, placeholder: Callable[[int], str]) -> None:
        p = placeholder
        self.select = f"SELECT {', '.join(COLUMNS)} FROM ad_requests WHERE id = {p(1)}"
        self.insert = (
            f"INSERT INTO ad_requests ({', '.join(ISSUE_COLUMNS)}) "
            f"VALUES ({', '.join(p(i + 1) for i in range(len(ISSUE_COLUMNS)))})"
        )
        self.first_fire = (
            "INSERT INTO pop_fires (ad_request_id, event, layer, at) "
            f"VALUES ({p(1)}, {p(2)}, {p(3)}, {p(4)}) ON CONFLICT DO NOTHING"
        )
        self.duplicate = f"UPDATE ad_requests SET duplicate_count = duplicate_count + 1 WHERE id = {p(1)}"
        self.late = f"UPDATE ad_requests SET late_count = late_count + 1 WHERE id = {p(1)}"
        self._count = {
            event: f"UPDATE ad_requests SET {column} = {p(1)} WHERE id = {p(2)} AND {column} IS NULL"
            for event, column in EVENT_COLUMNS.items()
        }

    def count(self, fire: Fire) -> str:
        """Set the event's time unless the other VAST layer already did (then the fire is an echo)."""
        return self._count[fire.event]


def issue_values(record: AdRequest) -> tuple[object, ...]:
    return tuple(getattr(record, c) for c in ISSUE_COLUMNS)
