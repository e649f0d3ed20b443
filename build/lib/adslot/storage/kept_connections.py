"""asyncpg's pool, with the connections it lends kept by their borrower between uses.

Acquiring a connection from an asyncpg pool and releasing it costs its caller ~38 µs of CPU (measured with
asyncpg 0.32 on uvloop: a held connection's `SELECT 1` 49 µs, the same through `pool.acquire()` 87 µs):
release() shields a new task, resets the connection and re-arms an inactivity timer. A ledger batch on
PostgreSQL is one statement of ~80 µs for ~20 pixels, so the pool alone was ~2 µs of every pixel's CPU.
KeptConnections lends a connection from its own idle list instead, and goes to the pool only when the list is
empty (the pool's max_size still bounds how many exist), to give back a connection while a lease waits
for the pool, and to give back one that failed, was cancelled or closed, which the pool then terminates and
replaces as it always does.

Everything a kept connection carries between uses is what the pool's reset would not have cleared for
this store either: it holds no advisory locks, LISTENs, cursors or session settings beyond search_path,
and a lease that ends inside a transaction goes back to the pool.
"""

from __future__ import annotations

from types import TracebackType

import asyncpg

__all__ = ["KeptConnections"]


class KeptConnections:
    def __init__(self, pool: asyncpg.Pool) -> None:
        self._pool = pool
        self._idle: list[asyncpg.Connection] = []
        self._waiting = 0
        """Leases waiting in pool.acquire(): while any waits, a connection given back goes to the pool, or a
        lease would wait for a connection kept idle here, for ever once all max_size are."""

    def lease(self) -> _Lease:
        """`async with kept.lease() as conn:` a connection for one use."""
        return _Lease(self)

    @property
    def pool(self) -> asyncpg.Pool:
        """The pool itself, for a caller that holds a connection for long (a test holding a row lock)."""
        return self._pool

    @property
    def idle(self) -> int:
        return len(self._idle)

    async def _take(self) -> asyncpg.Connection:
        idle = self._idle
        while idle:
            conn = idle.pop()
            if _alive(conn):
                return conn
            await self._pool.release(conn)  # a no-op if the pool took it back already
        self._waiting += 1
        try:
            return await self._pool.acquire()
        finally:
            self._waiting -= 1

    async def _give_back(self, conn: asyncpg.Connection, failed: bool) -> None:
        if failed or self._waiting or not _alive(conn) or conn.is_in_transaction():
            await self._pool.release(conn)
        else:
            self._idle.append(conn)

    async def close(self) -> None:
        """Give every kept connection back, then close the pool."""
        idle, self._idle = self._idle, []
        for conn in idle:
            await self._pool.release(conn)
        await self._pool.close()


def _alive(conn: asyncpg.Connection) -> bool:
    try:
        return not conn.is_closed()
    except asyncpg.InterfaceError:  # the pool took it back itself when its connection closed
        return False


class _Lease:
    """A plain class, not @asynccontextmanager: its generator and wrapper cost more than the rest of it."""

    __slots__ = ("_conn", "_kept")

    def __init__(self, kept: KeptConnections) -> None:
        self._kept = kept
        self._conn: asyncpg.Connection | None = None

    async def __aenter__(self) -> asyncpg.Connection:
        self._conn = await self._kept._take()
        return self._conn

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            await self._kept._give_back(conn, failed=exc_type is not None)
