"""KeptConnections on a real PostgreSQL server: connections are reused between leases, and one that failed,
was left in a transaction or was killed goes back to the pool, which replaces it."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

import asyncpg
import pytest

from adslot.storage.kept_connections import KeptConnections
from tests.conftest import require_postgres


def run(scenario: Callable[[KeptConnections], Awaitable[None]], max_size: int = 3) -> None:
    url = require_postgres()

    async def main() -> None:
        kept = KeptConnections(await asyncpg.create_pool(url, min_size=1, max_size=max_size))
        try:
            await scenario(kept)
        finally:
            await kept.close()

    asyncio.run(main())


async def backend_pid(kept: KeptConnections) -> int:
    async with kept.lease() as conn:
        pid: int = await conn.fetchval("SELECT pg_backend_pid()")
    return pid


async def held_pid(kept: KeptConnections) -> int:
    """Hold a lease for 50 ms, so that leases taken together overlap."""
    async with kept.lease() as conn:
        pid: int = await conn.fetchval("SELECT pg_backend_pid() FROM pg_sleep(0.05)")
    return pid


def test_a_connection_given_back_is_lent_again_without_the_pool() -> None:
    async def scenario(kept: KeptConnections) -> None:
        first = await backend_pid(kept)
        assert kept.idle == 1
        assert await backend_pid(kept) == first
        assert kept.idle == 1

    run(scenario)


def test_concurrent_leases_get_distinct_connections_and_all_are_kept_afterwards() -> None:
    async def scenario(kept: KeptConnections) -> None:
        pids = await asyncio.gather(*(held_pid(kept) for _ in range(3)))
        assert len(set(pids)) == 3
        assert kept.idle == 3
        assert {await backend_pid(kept) for _ in range(6)} <= set(pids)

    run(scenario)


def test_more_leases_than_the_pool_holds_wait_for_one_rather_than_open_another() -> None:
    async def scenario(kept: KeptConnections) -> None:
        pids = await asyncio.gather(*(held_pid(kept) for _ in range(5)))
        assert len(set(pids)) == 2
        # Both are kept for the next lease: here, or in the pool where one given back while a lease still
        # waited went (which of the two depends on when the waiter's task resumed).
        assert kept.idle + kept.pool.get_idle_size() == 2

    run(scenario, max_size=2)


def test_a_lease_that_raised_gives_its_connection_back_to_the_pool_not_the_idle_list() -> None:
    async def scenario(kept: KeptConnections) -> None:
        with pytest.raises(asyncpg.UndefinedTableError):
            async with kept.lease() as conn:
                await conn.fetchval("SELECT * FROM no_such_table_here")
        assert kept.idle == 0
        assert await backend_pid(kept) > 0

    run(scenario)


def test_a_lease_left_inside_a_transaction_is_not_kept() -> None:
    async def scenario(kept: KeptConnections) -> None:
        async with kept.lease() as conn:
            await conn.execute("BEGIN")
            await conn.execute("CREATE TEMP TABLE left_open (x int)")
        assert kept.idle == 0
        async with kept.lease() as conn:
            assert not conn.is_in_transaction()
            assert await conn.fetchval("SELECT to_regclass('left_open')") is None

    run(scenario)


def test_a_kept_connection_killed_while_idle_is_replaced_on_the_next_lease() -> None:
    async def scenario(kept: KeptConnections) -> None:
        killed = await backend_pid(kept)
        async with kept.lease() as conn:
            other = await conn.fetchval("SELECT pg_backend_pid()")
            assert other == killed
        url = require_postgres()
        admin = await asyncpg.connect(url)
        try:
            assert await admin.fetchval("SELECT pg_terminate_backend($1)", killed)
        finally:
            await admin.close()
        for _ in range(50):  # the client sees the server's close once its socket is read
            await asyncio.sleep(0.02)
            async with kept.lease() as conn:
                if await conn.fetchval("SELECT pg_backend_pid()") != killed:
                    return
        raise AssertionError("the killed connection was lent again")

    run(scenario)
