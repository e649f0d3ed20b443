"""An environment's catalog poll: the keys are swapped in first; a slow or late reload never undoes them."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TypeVar

import anyio.to_thread
import pytest
import sqlalchemy as sa

import adslot.environment
from adslot.auth.keys import LIVE_PREFIX, hash_key
from adslot.auth.repository import create_key, revoke_key
from adslot.catalog import Catalog, current_version, load_catalog
from adslot.environment import Environment, prepare_database, transact
from adslot.settings import Settings
from adslot.storage.database import make_engine
from tests.conftest import BACKENDS, drop_schemas, free_port, make_settings

T = TypeVar("T")
POLL_MS = 50
SLOW_RELOAD_SECONDS = 1.0


@pytest.fixture(params=BACKENDS)
def settings(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Settings]:
    made, schemas = make_settings(
        tmp_path, str(request.param), free_port(), ADSLOT_CATALOG_POLL_MS=str(POLL_MS)
    )
    prepare_database(made.environment("production"))
    yield made
    if schemas:
        drop_schemas(schemas)


async def until(check: Callable[[], bool], timeout: float = 5.0) -> float:
    """Seconds until `check` holds, polled on the loop every millisecond; fails after `timeout`."""
    began = time.monotonic()
    while not check():
        assert time.monotonic() - began < timeout, "timed out"
        await asyncio.sleep(0.001)
    return time.monotonic() - began


def test_a_revoked_key_leaves_the_key_table_before_a_slow_reload_ends_and_a_stale_reload_never_brings_it_back(
    settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    production = settings.environment("production")
    engine = make_engine(production)

    def write(fn: Callable[[sa.Connection], T]) -> T:
        return transact(engine, fn, write=True)

    key, info = write(lambda c: create_key(c, account="acct", prefix=LIVE_PREFIX, scopes="ad_request"))
    known = hash_key(key)
    loaded = threading.Event()

    def slow_load(conn: sa.Connection) -> Catalog:
        """Reads its snapshot at once, then takes its time: a large catalog's reload."""
        catalog = load_catalog(conn)
        loaded.set()
        time.sleep(SLOW_RELOAD_SECONDS)
        return catalog

    async def scenario() -> None:
        env = Environment(settings, production)
        await env.start()
        try:
            assert env.catalog is not None and known in env.catalog.keys
            monkeypatch.setattr(adslot.environment, "load_catalog", slow_load)
            await anyio.to_thread.run_sync(write, lambda c: None)  # a catalog change: a slow reload begins
            assert await anyio.to_thread.run_sync(loaded.wait, 5.0)
            await anyio.to_thread.run_sync(write, lambda c: revoke_key(c, info.id))
            latency = await until(lambda: env.catalog is not None and known not in env.catalog.keys)
            assert latency < SLOW_RELOAD_SECONDS / 2, "the keys were not swapped in ahead of the reload"
            assert env.catalog is not None
            stale = env.catalog.version
            with engine.connect() as conn:
                newest = current_version(conn)
            seen: set[int] = set()

            def reloaded() -> bool:
                assert env.catalog is not None
                assert known not in env.catalog.keys, f"the key is back with catalog {env.catalog.version}"
                seen.add(env.catalog.version)
                return env.catalog.version == newest

            await until(reloaded, timeout=4 * SLOW_RELOAD_SECONDS + 2)
            assert len(seen - {stale, newest}) == 1, f"the reload read before the revocation landed: {seen}"
        finally:
            await env.stop()
            engine.dispose()

    asyncio.run(scenario())
