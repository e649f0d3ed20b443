"""One complete environment (production or sandbox): its database, ledger writer and catalog snapshot.

Both environments live in one process by default but share nothing: a key, a campaign or an ad request of
one is invisible to the other.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import random
import uuid
from collections.abc import Awaitable, Callable, Sequence
from typing import TypeVar

import anyio.to_thread
import sqlalchemy as sa

from adslot.auth.keys import KeyRecord
from adslot.auth.lookup import KeyLookup
from adslot.auth.repository import active_keys, keys_by_hash
from adslot.catalog import Catalog, bump_version, current_version, load_catalog
from adslot.demand.billing import BillingSender
from adslot.demand.exchange import Exchange
from adslot.demand.stats import DemandStats
from adslot.fleet.watch import FleetWatch
from adslot.ledger.backends import ledger_for
from adslot.ledger.budget import DeliveryCache
from adslot.ledger.group_commit import GroupCommitter
from adslot.ledger.ivt import ivt_config
from adslot.ledger.records import AdRequest, Operation, Verdict, reserves
from adslot.ledger.sweeper import ExpirySweeper
from adslot.limits.keys import key_limiter
from adslot.limits.pixels import PixelGuard
from adslot.retention.task import RetentionTask
from adslot.sandbox.seed import seed_sandbox, testing_key
from adslot.settings import EnvironmentSettings, Settings
from adslot.storage.database import is_sqlite, make_engine, read_transaction, write_transaction
from adslot.storage.failures import OutageLog
from adslot.storage.migrate import one_at_a_time, upgrade
from adslot.tasks import stop_tasks
from adslot.telemetry.metrics import meters_for

T = TypeVar("T")
log = logging.getLogger(__name__)


def prepare_database(env: EnvironmentSettings, *, serving: bool = False) -> str | None:
    """Migrate the environment's database and seed the sandbox; return the sandbox testing key.

    `serving`: `adslot serve` (and its workers) prepares it, with the public URL it serves at, where the
    sandbox's demo partner is pointed; another command (run with other ADSLOT_* values, perhaps) leaves the
    partner where it is."""
    engine = make_engine(env)
    try:
        with one_at_a_time(engine, env.database_schema):  # nodes starting together take turns
            upgrade(engine, env.database_schema)
            if env.name != "sandbox":
                return None
            with write_transaction(engine) as conn:
                return seed_sandbox(conn, env.public_url if serving else None)
    finally:
        engine.dispose()


def transact(
    engine: sa.Engine, fn: Callable[[sa.Connection], T], *, write: bool = False, catalog: bool = True
) -> T:
    """Run fn in one transaction, the management API's, the console's and the CLI's alike: a write goes in
    write_transaction and, unless it leaves the catalog alone (`catalog=False`: a console session, a
    user), bumps the catalog version, so every worker reloads what it changed."""
    if not write:
        with read_transaction(engine) as conn:
            return fn(conn)
    with write_transaction(engine) as conn:
        result = fn(conn)
        if catalog:
            bump_version(conn)
        return result


class Environment:
    def __init__(self, settings: Settings, env: EnvironmentSettings, *, seed: int | None = None) -> None:
        self.settings = settings
        self.config = env
        self.name = env.name
        self.base_url = env.public_url
        self.engine = make_engine(env)
        self.meters = meters_for(env.name)
        """This process's tallies of its metrics (telemetry/metrics.py), counted on the hot paths."""
        self.store = ledger_for(env, settings.ledger_socket_dir, ivt_config(settings))
        # On PostgreSQL, concurrent batches that reserve queue on the same counter rows' locks: one at a
        # time (a capped ad request serves about a fifth more a second so). SQLite's writer takes one
        # batch at a time anyway, and the next one waiting in its pipe keeps it busy.
        self.writer: GroupCommitter[Operation, Verdict] = GroupCommitter(
            self.store.apply,
            settings.batch_max,
            settings.batches_in_flight,
            contended=None if is_sqlite(env.database_url) else reserves,
            observe=self.meters.batch,
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
        # Keys the catalog snapshot does not hold yet (created since it was loaded): looked up before they
        # are refused, in batches, spaced, with the absent ones remembered briefly (auth/lookup.py).
        self.key_lookup = KeyLookup(self._keys_by_hash)
        # This worker's view of caps, pacing, frequency and separation, refreshed by every verdict.
        self.delivery_cache = DeliveryCache()
        self.sweeper = ExpirySweeper(
            self.writer.submit,
            settings.settle_interval_seconds,
            cache=self.delivery_cache,
            name=f"expiry-sweep-{env.name}",
            retention=settings.counter_retention_seconds,
        )
        # Rate limits (limits/): ad requests per key, and the guard in front of the ledger for pixels.
        self.ad_request_limit = key_limiter(settings, env.name)
        self.pixels = PixelGuard(self.writer, settings.rate_limit_pixels)
        # Old ad requests rolled up into report aggregates (ADSLOT_RETENTION_DAYS; does nothing when unset).
        self.retention = RetentionTask.of(settings, self.engine, env.name)
        # Programmatic demand (demand/): asked only for venues an active partner may bid on.
        self.demand_stats = DemandStats(self.engine, name=f"demand-stats-{env.name}")
        self.exchange = Exchange(
            currency=settings.currency,
            stats=self.demand_stats,
            write=lambda fn: self.run_sync(fn, write=True),
            read=self.run_sync,
        )
        self.billing = BillingSender(
            self.engine,
            settings.demand_billing_interval_seconds,
            active=lambda: bool(self.catalog and self.catalog.partners),
            name=f"billing-{env.name}",
            stats=self.demand_stats,
        )
        # Each screen's status and the alerts when screens go silent (fleet/watch.py): one look per interval.
        self.fleet = FleetWatch(self.engine, settings, env.name)
        self.rng = random.Random(seed)
        self.catalog: Catalog | None = None
        self.testing_key: str | None = None
        self._poller: asyncio.Task[None] | None = None
        self._reload: asyncio.Task[None] | None = None
        self._keys_version = 0
        """The catalog version the keys in use were read at: the catalog's own, or newer (_poll_catalog)."""
        self._outages = OutageLog(log)

    async def start(self) -> None:
        self.testing_key = await anyio.to_thread.run_sync(lambda: prepare_database(self.config, serving=True))
        await self.store.start()
        self.writer.start()
        self._reads.start()
        self.key_lookup.start()
        await self.ad_request_limit.start()
        await self.refresh_catalog()
        self._poller = asyncio.get_running_loop().create_task(
            self._poll_catalog(), name=f"catalog-{self.name}"
        )
        self.sweeper.start()
        self.retention.start()
        self.demand_stats.start()
        self.billing.start()
        self.fleet.start()

    async def stop(self) -> None:
        await self.fleet.stop()
        await self.sweeper.stop()
        await self.retention.stop()
        await self.billing.stop()
        await self.exchange.close()
        await self.demand_stats.stop()
        await stop_tasks(self._poller, self._reload)
        await self.writer.close()
        await self._reads.close()
        await self.key_lookup.close()
        await self.store.close()
        await self.ad_request_limit.stop()
        self.engine.dispose()

    async def run_sync(
        self, fn: Callable[[sa.Connection], T], *, write: bool = False, catalog: bool = True
    ) -> T:
        """Run management-rate database work in a thread; writes to the catalog bump it and reload it."""
        result = await anyio.to_thread.run_sync(
            lambda: transact(self.engine, fn, write=write, catalog=catalog)
        )
        if write and catalog:
            await self.refresh_catalog()
        return result

    async def refresh_catalog(self) -> None:
        def load() -> Catalog:
            with read_transaction(self.engine) as conn:
                return load_catalog(conn)

        self._use(await anyio.to_thread.run_sync(load))

    def _use(self, catalog: Catalog) -> None:
        """Put a loaded catalog in use. Loads may end out of order (the poll's, a management write's): one
        older than the catalog in use is dropped, and one older than the keys in use keeps those keys, so a
        revocation already applied is never undone."""
        current = self.catalog
        if current is not None:
            if catalog.version < current.version:
                return
            if catalog.version < self._keys_version:
                catalog = dataclasses.replace(catalog, keys=current.keys)
        self.catalog = catalog
        self._keys_version = max(self._keys_version, catalog.version)
        self.key_lookup.changed()

    async def _poll_catalog(self) -> None:
        """Every ADSLOT_CATALOG_POLL_MS, check the catalog version; when it moved, swap in the active keys
        read in the same snapshot at once, then reload the rest in a task of its own. The keys are one small
        query, so a revoked key is refused one interval and that query after its revocation at most, however
        large the catalog; and a slow reload of a large catalog never holds back the next check."""
        while True:
            await asyncio.sleep(self.settings.catalog_poll_seconds)
            try:
                moved = await anyio.to_thread.run_sync(self._keys_if_moved, self._keys_version)
            except Exception as exc:  # a database hiccup must not kill the poller
                self._outages.failed(f"the catalog check of {self.name}", exc)
                continue
            catalog = self.catalog
            assert catalog is not None, "environment not started"
            if moved is not None and moved[0] > self._keys_version:
                self._keys_version, keys = moved
                catalog = self.catalog = dataclasses.replace(catalog, keys=keys)
                self.key_lookup.changed()
            if catalog.version < self._keys_version and (self._reload is None or self._reload.done()):
                self._reload = asyncio.get_running_loop().create_task(
                    self._reload_catalog(), name=f"catalog-reload-{self.name}"
                )

    def _keys_if_moved(self, known: int) -> tuple[int, dict[str, KeyRecord]] | None:
        """(catalog version, active keys), read in one snapshot, if the version is no longer `known`."""
        with read_transaction(self.engine) as conn:
            version = current_version(conn)
            return None if version == known else (version, active_keys(conn))

    async def _reload_catalog(self) -> None:
        try:
            await self.refresh_catalog()
        except Exception as exc:  # tried again after the next check
            self._outages.failed(f"the catalog refresh of {self.name}", exc)

    async def find_key(self, key_hash: str) -> KeyRecord | None:
        """The active key with this hash, asked of the database because the catalog's key table lacks it."""
        catalog = self.catalog
        assert catalog is not None, "environment not started"
        return await self.key_lookup.find(key_hash, catalog.keys)

    async def _keys_by_hash(self, hashes: Sequence[str]) -> dict[str, KeyRecord]:
        def read() -> dict[str, KeyRecord]:
            with read_transaction(self.engine) as conn:
                return keys_by_hash(conn, hashes)

        return await anyio.to_thread.run_sync(read)

    def sandbox_key(self) -> str | None:
        with self.engine.connect() as conn:
            return testing_key(conn)
