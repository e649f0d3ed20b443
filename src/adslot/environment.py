"""One complete environment (production or sandbox): its database, ledger writer and catalog snapshot.

Both environments live in one process by default but share nothing: a key, a campaign or an ad request of
one is invisible to the other.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
import uuid
from collections.abc import Awaitable, Callable
from typing import TypeVar

import anyio.to_thread
import sqlalchemy as sa

from adslot.catalog import Catalog, bump_version, current_version, load_catalog
from adslot.ledger.backends import ledger_for
from adslot.ledger.budget import DeliveryCache
from adslot.ledger.group_commit import GroupCommitter
from adslot.ledger.records import AdRequest, Operation, Verdict, reserves
from adslot.ledger.sweeper import ExpirySweeper
from adslot.sandbox.seed import seed_sandbox, testing_key
from adslot.settings import EnvironmentSettings, Settings
from adslot.storage.database import is_sqlite, make_engine, read_transaction, write_transaction
from adslot.storage.failures import OutageLog
from adslot.storage.migrate import upgrade

T = TypeVar("T")
log = logging.getLogger(__name__)


def prepare_database(env: EnvironmentSettings) -> str | None:
    """Migrate the environment's database and seed the sandbox; return the sandbox testing key."""
    engine = make_engine(env)
    try:
        upgrade(engine, env.database_schema)
        if env.name != "sandbox":
            return None
        with write_transaction(engine) as conn:
            return seed_sandbox(conn)
    finally:
        engine.dispose()


def transact(engine: sa.Engine, fn: Callable[[sa.Connection], T], *, write: bool = False) -> T:
    """Run fn in one transaction, the management API's and the CLI's alike: a write goes in
    write_transaction and bumps the catalog version, so every worker reloads what it changed."""
    if not write:
        with read_transaction(engine) as conn:
            return fn(conn)
    with write_transaction(engine) as conn:
        result = fn(conn)
        bump_version(conn)
        return result


class Environment:
    def __init__(self, settings: Settings, env: EnvironmentSettings, *, seed: int | None = None) -> None:
        self.settings = settings
        self.config = env
        self.name = env.name
        self.base_url = env.public_url
        self.engine = make_engine(env)
        self.store = ledger_for(env, settings.ledger_socket_dir)
        # On PostgreSQL, concurrent batches that reserve queue on the same counter rows' locks: one at a
        # time (a capped ad request serves about a fifth more a second so). SQLite's writer takes one
        # batch at a time anyway, and the next one waiting in its pipe keeps it busy.
        self.writer: GroupCommitter[Operation, Verdict] = GroupCommitter(
            self.store.apply,
            settings.batch_max,
            settings.batches_in_flight,
            contended=None if is_sqlite(env.database_url) else reserves,
        )
        # Point reads of ad requests (the inline VAST, the record) are batched as writes are: concurrent
        # readers share one statement (id IN / id = ANY). On PostgreSQL that is one round trip instead of a
        # pooled connection each; on SQLite one read transaction. The read costs the same either way, but the
        # worker and the kernel spend less per request when a loop pass answers many readers at once (the
        # inline VAST serves about a third more a second batched than with a read each).
        self._reads: GroupCommitter[uuid.UUID, AdRequest | None] = GroupCommitter(
            self.store.get_many, settings.batch_max
        )
        self.lookup: Callable[[uuid.UUID], Awaitable[AdRequest | None]] = self._reads.submit
        # This worker's view of caps, pacing, frequency and separation, refreshed by every verdict.
        self.delivery_cache = DeliveryCache()
        self.sweeper = ExpirySweeper(
            self.writer.submit,
            settings.settle_interval_seconds,
            cache=self.delivery_cache,
            name=f"expiry-sweep-{env.name}",
            retention=settings.counter_retention_seconds,
        )
        self.rng = random.Random(seed)
        self.catalog: Catalog | None = None
        self.testing_key: str | None = None
        self._poller: asyncio.Task[None] | None = None
        self._outages = OutageLog(log)

    async def start(self) -> None:
        self.testing_key = await anyio.to_thread.run_sync(prepare_database, self.config)
        await self.store.start()
        self.writer.start()
        self._reads.start()
        await self.refresh_catalog()
        self._poller = asyncio.get_running_loop().create_task(
            self._poll_catalog(), name=f"catalog-{self.name}"
        )
        self.sweeper.start()

    async def stop(self) -> None:
        await self.sweeper.stop()
        if self._poller is not None:
            self._poller.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._poller
        await self.writer.close()
        await self._reads.close()
        await self.store.close()
        self.engine.dispose()

    async def run_sync(self, fn: Callable[[sa.Connection], T], *, write: bool = False) -> T:
        """Run management-rate database work in a thread; writes bump the catalog and reload it."""
        result = await anyio.to_thread.run_sync(lambda: transact(self.engine, fn, write=write))
        if write:
            await self.refresh_catalog()
        return result

    async def refresh_catalog(self) -> None:
        def load() -> Catalog:
            with read_transaction(self.engine) as conn:
                return load_catalog(conn)

        self.catalog = await anyio.to_thread.run_sync(load)

    async def _poll_catalog(self) -> None:
        def version() -> int:
            with self.engine.connect() as conn:
                return current_version(conn)

        while True:
            await asyncio.sleep(self.settings.catalog_poll_seconds)
            try:
                if self.catalog is None or await anyio.to_thread.run_sync(version) != self.catalog.version:
                    await self.refresh_catalog()
            except Exception as exc:  # a database hiccup must not kill the poller
                self._outages.failed(f"the catalog refresh of {self.name}", exc)

    def sandbox_key(self) -> str | None:
        with self.engine.connect() as conn:
            return testing_key(conn)
