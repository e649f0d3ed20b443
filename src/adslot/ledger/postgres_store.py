"""The ledger on PostgreSQL through asyncpg: a small pool, one transaction and four statements per batch.

Whatever the batch size, fires cost one locking read of their ad requests (in id order, so concurrent
workers cannot deadlock), one INSERT of the candidate first fires, and one UPDATE from arrays.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence

import asyncpg

from adslot.ledger.records import COLUMNS, ISSUE_COLUMNS, AdRequest, Fire, Issue, Operation, Verdict
from adslot.ledger.resolve import candidates, first_fire_times, resolve
from adslot.ledger.store import (
    COALESCE_SET,
    COUNTER_SET,
    INSERT_COLUMNS,
    SELECT_ONE,
    STATE_COLUMNS,
    TIME_COLUMNS,
    change_values,
    current_of,
    issue_values,
)

SELECT = SELECT_ONE + "$1"
INSERT = (
    f"INSERT INTO ad_requests ({INSERT_COLUMNS}) "
    f"VALUES ({', '.join(f'${i + 1}' for i in range(len(ISSUE_COLUMNS)))})"
)
LOCK_STATE = (
    f"SELECT {', '.join(STATE_COLUMNS)} FROM ad_requests WHERE id = ANY($1::uuid[]) ORDER BY id FOR UPDATE"
)
FIRST_FIRES = (
    "INSERT INTO pop_fires (ad_request_id, event, layer, at) "
    "SELECT * FROM unnest($1::uuid[], $2::text[], $3::text[], $4::bigint[]) "
    "ON CONFLICT DO NOTHING RETURNING ad_request_id, event, layer"
)
_N = len(TIME_COLUMNS)
UPDATE = (
    "UPDATE ad_requests SET "
    + COALESCE_SET.format(**{c: f"c.{c}" for c in TIME_COLUMNS})
    + ", "
    + COUNTER_SET.format(dups="c.dups", late="c.late")
    + " FROM unnest("
    + ", ".join(f"${i + 1}::bigint[]" for i in range(_N))
    + f", ${_N + 1}::int[], ${_N + 2}::int[], ${_N + 3}::uuid[]) "
    + f"AS c({', '.join(TIME_COLUMNS)}, dups, late, id) "
    "WHERE ad_requests.id = c.id"
)


async def _apply_fires(conn: asyncpg.Connection, fires: list[Fire]) -> list[Verdict]:
    ids = sorted({f.ad_request_id for f in fires})
    current = {row[0]: current_of(tuple(row)[1:]) for row in await conn.fetch(LOCK_STATE, ids)}
    keys = candidates(fires, current)
    fresh = set()
    if keys:
        rows = await conn.fetch(
            FIRST_FIRES,
            [k[0] for k in keys],
            [k[1] for k in keys],
            [k[2] for k in keys],
            first_fire_times(fires, keys),
        )
        fresh = {(r[0], r[1], r[2]) for r in rows}
    verdicts, changes = resolve(fires, current, fresh)
    if changes:
        columns = list(zip(*(change_values(c) for c in changes.values()), strict=True))
        await conn.execute(UPDATE, *[list(col) for col in columns], list(changes))
    return verdicts


class _Connection(asyncpg.Connection):  # type: ignore[misc]
    """Skips asyncpg's reset query on every release back to the pool.

    The ledger holds no advisory locks, LISTENs, cursors or session settings beyond search_path, and every
    transaction ends before release, so the reset would only add a round trip to each point read.
    """

    def get_reset_query(self) -> str:
        return ""


class PostgresLedgerStore:
    def __init__(self, dsn: str, schema: str | None, pool_size: int = 8) -> None:
        self._dsn = dsn
        self._schema = schema
        self._pool_size = pool_size
        self._pool: asyncpg.Pool | None = None

    async def start(self) -> None:
        settings = {"search_path": self._schema} if self._schema else {}
        self._pool = await asyncpg.create_pool(
            self._dsn,
            min_size=2,
            max_size=self._pool_size,
            server_settings=settings,
            connection_class=_Connection,
        )

    async def close(self) -> None:
        if self._pool is not None:
            await self._pool.close()
            self._pool = None

    async def get(self, ad_request_id: uuid.UUID) -> AdRequest | None:
        assert self._pool is not None, "store not started"
        row = await self._pool.fetchrow(SELECT, ad_request_id)
        return AdRequest(**dict(zip(COLUMNS, row, strict=True))) if row else None

    async def apply(self, operations: Sequence[Operation]) -> list[Verdict]:
        assert self._pool is not None, "store not started"
        issues = [issue_values(op.record) for op in operations if isinstance(op, Issue)]
        fires = [op for op in operations if isinstance(op, Fire)]
        async with self._pool.acquire() as conn, conn.transaction():
            if issues:
                await conn.executemany(INSERT, issues)
            fire_verdicts = iter(await _apply_fires(conn, fires) if fires else [])
        return [
            Verdict("issued", op.record.expires_at) if isinstance(op, Issue) else next(fire_verdicts)
            for op in operations
        ]
