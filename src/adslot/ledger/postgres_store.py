"""The ledger on PostgreSQL through asyncpg: a small pool, one transaction per batch."""

from __future__ import annotations

import uuid
from collections.abc import Sequence

import asyncpg

from adslot.ledger.records import COLUMNS, AdRequest, Fire, Issue, Operation, Outcome
from adslot.ledger.store import LedgerSql, issue_values

SQL = LedgerSql(lambda n: f"${n}")


class PostgresLedgerStore:
    def __init__(self, dsn: str, schema: str | None, pool_size: int = 4) -> None:
        self._dsn = dsn
        self._schema = schema
        self._pool_size = pool_size
        self._pool: asyncpg.Pool | None = None

    async def start(self) -> None:
        settings = {"search_path": self._schema} if self._schema else {}
        self._pool = await asyncpg.create_pool(
            self._dsn, min_size=1, max_size=self._pool_size, server_settings=settings
        )

    async def close(self) -> None:
        if self._pool is not None:
            await self._pool.close()
            self._pool = None

    async def get(self, ad_request_id: uuid.UUID) -> AdRequest | None:
        assert self._pool is not None, "store not started"
        row = await self._pool.fetchrow(SQL.select, ad_request_id)
        return AdRequest(**dict(zip(COLUMNS, row, strict=True))) if row else None

    async def apply(self, operations: Sequence[Operation]) -> list[Outcome]:
        assert self._pool is not None, "store not started"
        outcomes: list[Outcome] = []
        async with self._pool.acquire() as conn, conn.transaction():
            issues = [issue_values(op.record) for op in operations if isinstance(op, Issue)]
            if issues:
                await conn.executemany(SQL.insert, issues)
            for op in operations:
                if isinstance(op, Issue):
                    outcomes.append("issued")
                    continue
                assert isinstance(op, Fire)
                outcome: Outcome
                if op.late:
                    await conn.execute(SQL.late, op.ad_request_id)
                    outcome = "late"
                elif (
                    await conn.execute(SQL.first_fire, op.ad_request_id, op.event, op.layer, op.at)
                    == "INSERT 0 0"
                ):
                    await conn.execute(SQL.duplicate, op.ad_request_id)
                    outcome = "duplicate"
                else:
                    status = await conn.execute(SQL.count(op), op.at, op.ad_request_id)
                    outcome = "counted" if status == "UPDATE 1" else "echo"
                outcomes.append(outcome)
        return outcomes
