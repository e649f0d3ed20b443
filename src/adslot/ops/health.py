"""Readiness: may this worker be sent traffic? Per environment: its database answers, its schema is at this
adslot's latest migration, and its ledger writer runs.

Each check has its own short timeout, and concurrent probes of one environment share one check in flight,
so a database that hangs costs one waiting thread per environment, never one per probe. The database is
probed on a connection of its own (not the pool's), so a database file that was replaced or a server that
went away is seen at once.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import sqlite3
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cache
from typing import Any

import anyio.to_thread
import psycopg
from alembic.script import ScriptDirectory

from adslot.environment import Environment
from adslot.ledger.process_store import ProcessLedgerStore
from adslot.settings import EnvironmentSettings
from adslot.storage.database import asyncpg_dsn, checked_schema, is_sqlite, sqlite_path
from adslot.storage.migrate import MIGRATIONS

OK = "ok"
CHECK_TIMEOUT_SECONDS = 2.0
"""The most each check of /readyz may take: one that takes longer fails as `timeout`."""


@dataclass(frozen=True)
class Revisions:
    head: str
    known: frozenset[str]


@cache
def revisions() -> Revisions:
    """This adslot's latest migration and every one it knows (read once: the files do not change)."""
    script = ScriptDirectory(str(MIGRATIONS))
    head = script.get_current_head()
    assert head is not None, "no migrations"
    return Revisions(head, frozenset(s.revision for s in script.walk_revisions()))


def migration_state(found: str | None, known: Revisions) -> str:
    """`ok` when the database is at the latest migration, else why not, in one short phrase."""
    if found is None:
        return "none: the database has no migration applied"
    if found == known.head:
        return OK
    if found in known.known:
        return f"behind: {found} < {known.head}"
    return f"ahead: {found} is newer than this adslot's {known.head}"


def _reason(exc: BaseException) -> str:
    text = " ".join(str(exc).split())[:200]
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def probe_database(env: EnvironmentSettings, timeout: float) -> tuple[str, str]:
    """(database, migrations) of one environment, read on a new connection (blocking: run it in a thread)."""
    known = revisions()
    try:
        if is_sqlite(env.database_url):
            found = _sqlite_revision(env, timeout)
        else:
            found = _postgres_revision(env, timeout)
    except Exception as exc:
        return f"unreachable: {_reason(exc)}", "unknown"
    return OK, migration_state(found, known)


def _sqlite_revision(env: EnvironmentSettings, timeout: float) -> str | None:
    path = sqlite_path(env.database_url)
    # Read-only and never created: a missing file is unreachable, not a new empty database.
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=timeout)
    try:
        conn.execute("SELECT count(*) FROM sqlite_master").fetchone()  # reads the file (SELECT 1 does not)
        if not conn.execute("SELECT 1 FROM sqlite_master WHERE name = 'alembic_version'").fetchone():
            return None
        row = conn.execute("SELECT version_num FROM alembic_version").fetchone()
    finally:
        conn.close()
    return str(row[0]) if row else None


def _postgres_revision(env: EnvironmentSettings, timeout: float) -> str | None:
    schema = checked_schema(env.database_schema)
    options = f"-c statement_timeout={round(timeout * 1000)}"
    if schema:
        options += f" -c search_path={schema}"
    with psycopg.connect(
        asyncpg_dsn(env.database_url),
        connect_timeout=max(1, math.ceil(timeout)),
        options=options,
        autocommit=True,
    ) as conn:
        conn.execute("SELECT 1").fetchone()
        if conn.execute("SELECT to_regclass('alembic_version')").fetchone() == (None,):
            return None
        row = conn.execute("SELECT version_num FROM alembic_version").fetchone()
    return str(row[0]) if row else None


class Readiness:
    """The checks of every environment, one in flight per environment however many probes ask."""

    def __init__(
        self, environments: Mapping[str, Environment], timeout: float = CHECK_TIMEOUT_SECONDS
    ) -> None:
        self._environments = environments
        self._timeout = timeout
        self._probes: dict[str, asyncio.Future[tuple[str, str]]] = {}
        self._reconnects: dict[str, asyncio.Task[None]] = {}

    async def check(self) -> tuple[bool, dict[str, dict[str, str]]]:
        """(ready, {environment: {check: "ok" or why not}})."""
        names = list(self._environments)
        results = await asyncio.gather(*(self._check(self._environments[name]) for name in names))
        checks = dict(zip(names, results, strict=True))
        ready = all(state == OK for result in results for state in result.values())
        return ready, checks

    async def _check(self, env: Environment) -> dict[str, str]:
        (database, migrations), ledger = await asyncio.gather(self._database(env), self._ledger(env))
        return {"database": database, "migrations": migrations, "ledger": ledger}

    async def _database(self, env: Environment) -> tuple[str, str]:
        probe = self._probes.get(env.name)
        if probe is None or probe.done():
            probe = self._probes[env.name] = asyncio.ensure_future(
                anyio.to_thread.run_sync(probe_database, env.config, self._timeout, abandon_on_cancel=True)
            )
        try:
            return await asyncio.wait_for(asyncio.shield(probe), self._timeout + 0.5)
        except TimeoutError:
            return f"unreachable: no answer within {self._timeout:g} s", "unknown"

    async def _ledger(self, env: Environment) -> str:
        """The group committer's loop runs and (SQLite) a ledger writer process takes its batches."""
        if not env.writer.running():
            return "stopped: the ledger's group commit is not running"
        store = env.store
        if not isinstance(store, ProcessLedgerStore) or store.connected():
            return OK
        # No writer connected (it was restarted while this worker was idle): connect now, as the next batch
        # would, so that an idle worker does not stay unready until traffic it is not sent.
        reconnect = self._reconnects.get(env.name)
        if reconnect is None or reconnect.done():
            reconnect = self._reconnects[env.name] = asyncio.ensure_future(store.ensure_connected())
        try:
            await asyncio.wait_for(asyncio.shield(reconnect), self._timeout)
        except TimeoutError:
            return f"writer unavailable: no ledger writer answered within {self._timeout:g} s"
        except Exception as exc:
            return f"writer unavailable: {_reason(exc)}"
        return OK if store.connected() else "writer unavailable: not connected"

    async def close(self) -> None:
        """Stop what checks are still running (a hung database's probe is abandoned in its thread)."""
        running: list[asyncio.Future[Any]] = [*self._reconnects.values(), *self._probes.values()]
        for task in running:
            task.cancel()
            with contextlib.suppress(BaseException):
                await task
