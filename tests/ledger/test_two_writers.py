"""Two writers of one ledger (two servers' writers on one SQLite file, two nodes on PostgreSQL): what one
remembers of its own rows never hides what the other wrote."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

from adslot.ledger.backends import database_store
from adslot.ledger.records import Fire, Issue, Operation, Release
from adslot.ledger.store import LedgerStore
from tests.ledger.stores import PLAY, LedgerDatabase, record


def with_two_writers(
    db: LedgerDatabase, scenario: Callable[[LedgerStore, LedgerStore], Awaitable[None]]
) -> None:
    async def main() -> None:
        first = database_store(db.env.database_url, db.env.database_schema)
        second = database_store(db.env.database_url, db.env.database_schema)
        await first.start()
        await second.start()
        try:
            await scenario(first, second)
        finally:
            await first.close()
            await second.close()

    asyncio.run(main())


async def outcomes(store: LedgerStore, *ops: Operation) -> list[str]:
    return [v.outcome for v in await store.apply(list(ops))]


def test_a_fire_on_an_ad_request_the_other_writer_released_is_not_counted(db: LedgerDatabase) -> None:
    made = record()

    async def scenario(first: LedgerStore, second: LedgerStore) -> None:
        assert await outcomes(first, Issue(made)) == ["issued"]  # remembered unplayed, unreleased
        assert await outcomes(second, Release(made.id, made.account_id, PLAY - 10)) == ["released"]
        assert await outcomes(first, Fire(made.id, "impression", "wrapper", PLAY)) == ["released"]

    with_two_writers(db, scenario)
    row = db.rows()[made.id]
    assert row["impression_at"] is None and row["settle_reason"] == "released" and row["late_count"] == 1


def test_a_fire_the_other_writer_counted_is_a_duplicate_here_and_counts_once(db: LedgerDatabase) -> None:
    made = record()
    fire = Fire(made.id, "impression", "wrapper", PLAY)

    async def scenario(first: LedgerStore, second: LedgerStore) -> None:
        assert await outcomes(first, Issue(made)) == ["issued"]
        assert await outcomes(second, fire) == ["counted"]
        assert await outcomes(first, fire) == ["duplicate"]
        assert await outcomes(second, fire, fire) == ["duplicate", "duplicate"]
        assert await outcomes(first, Fire(made.id, "impression", "inline", PLAY)) == ["echo"]

    with_two_writers(db, scenario)
    row = db.rows()[made.id]
    assert row["impression_at"] == PLAY and row["duplicate_count"] == 3
