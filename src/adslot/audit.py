"""The audit log: who changed what, when, with the record before and after, in the change's transaction.

Every change to an environment is logged: from the console (the user's email), the management API (the key's
id) and the CLI (the shell user)."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

import msgspec
import sqlalchemy as sa

from adslot.storage.tables import audit_log

PAGE_SIZE = 100
T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class Change:
    field: str
    before: str
    after: str


@dataclass(frozen=True, slots=True)
class Entry:
    id: int
    at: int
    actor: str
    action: str
    target: str
    before: str | None
    after: str | None

    def changes(self) -> list[Change]:
        """The top-level fields that differ between before and after (all of them for a creation), each as
        compact JSON: what a reader of the log wants to see first."""
        old = msgspec.json.decode(self.before) if self.before else {}
        new = msgspec.json.decode(self.after) if self.after else {}
        if not isinstance(old, dict) or not isinstance(new, dict):
            return [Change("", self.before or "", self.after or "")]
        return [
            Change(name, _text(old.get(name)), _text(new.get(name)))
            for name in sorted(set(old) | set(new))
            if old.get(name) != new.get(name) and name not in ("created_at",)
        ]


def _text(value: Any) -> str:
    return "" if value is None else msgspec.json.encode(value).decode()


def _json(value: Any) -> str | None:
    if value is None:
        return None
    return msgspec.json.encode(msgspec.to_builtins(value)).decode()


def record(conn: sa.Connection, actor: str, action: str, target: str, before: Any, after: Any) -> None:
    """Call inside the transaction that made the change: the entry is kept exactly when the change is."""
    conn.execute(
        sa.insert(audit_log).values(
            at=int(time.time()),
            actor=actor,
            action=action,
            target=target[:300],
            before=_json(before),
            after=_json(after),
        )
    )


def audited(
    actor: str,
    action: str,
    target: str,
    fn: Callable[[sa.Connection], T],
    *,
    before: Callable[[sa.Connection], Any] | None = None,
    after: Callable[[T], Any] | None = None,
) -> Callable[[sa.Connection], T]:
    """fn, with its audit entry written in its transaction: both are kept, or neither. `before` reads the
    record as it was; `after` picks what to log of fn's result (never a key's secret)."""

    def apply(conn: sa.Connection) -> T:
        previous = before(conn) if before is not None else None
        result = fn(conn)
        record(conn, actor, action, target, previous, result if after is None else after(result))
        return result

    return apply


def entries(conn: sa.Connection, before_id: int | None = None, limit: int = PAGE_SIZE) -> list[Entry]:
    """Newest first, a page at a time (keyset on id, so a page costs the same however long the log)."""
    statement = sa.select(audit_log).order_by(audit_log.c.id.desc()).limit(limit)
    if before_id is not None:
        statement = statement.where(audit_log.c.id < before_id)
    return [Entry(**row) for row in conn.execute(statement).mappings()]
