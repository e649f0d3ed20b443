"""Bulk loader for the growth benchmark: fills a ledger with N played ad requests and their events.

It writes straight to the database (not through the server) so that 10 million rows take minutes, not hours:
SQLite through one connection with large transactions and synchronous=OFF (a loader, not the server's
durable path), PostgreSQL through COPY. Rows look like real traffic: time-ordered UUIDv7 ids spread over the
last days, most played with all five quartiles, some unplayed, a few duplicates and late fires.

Every row is already settled, as a running server's expiry sweep would have settled a week-old ad request
(SETTLE_GRACE_SECONDS after its expiry): reason "played" when it has an impression, else "expired". So the
preloaded rows stay out of the unsettled-expiry index and the sweep has nothing to catch up on while the
benchmark runs. They hold no reservations (claims null), so delivery_counters need no rows; request_stats
(the fill-rate denominator, read only by reports) gets none either.
"""

from __future__ import annotations

import asyncio
import os
import random
import sqlite3
import time
import uuid
from collections.abc import Iterator

import asyncpg

from adslot.ledger.records import COLUMNS, EVENT_COLUMNS, FIRE_BITS, SETTLE_GRACE_SECONDS
from adslot.settings import EnvironmentSettings
from adslot.storage.database import asyncpg_dsn, is_sqlite, sqlite_path

EVENTS = tuple(EVENT_COLUMNS)
ALL_WRAPPER_FIRES = sum(FIRE_BITS[event, "wrapper"] for event in EVENTS)
"""The fired bits of an ad request whose player fired every event once, on the wrapper's URLs."""
LOAD_COLUMNS = (*COLUMNS, "fired")


def _uuid7_at(ms: int, rng: random.Random) -> uuid.UUID:
    rand = rng.getrandbits(74)
    value = (ms & 0xFFFF_FFFF_FFFF) << 80 | 0x7 << 76 | ((rand >> 62) & 0xFFF) << 64 | 0b10 << 62
    return uuid.UUID(int=value | (rand & 0x3FFF_FFFF_FFFF_FFFF))


def generate(
    count: int, *, account_id: int, campaign_id: int, creative_id: int, seed: int = 7
) -> Iterator[tuple[object, ...]]:
    """Ad request rows in LOAD_COLUMNS order (fired bits last) for `count` ad requests in the past week."""
    rng = random.Random(seed)
    now = int(time.time())
    start = now - 7 * 86400
    step_ms = max(1, (7 * 86400 * 1000) // max(count, 1))
    for i in range(count):
        created = start + (i * step_ms) // 1000
        ident = _uuid7_at(start * 1000 + i * step_ms, rng)
        play = created + 60
        expires = play + 900
        played = rng.random() < 0.92
        times = [play + k * 4 for k in range(6)] if played else [None] * 6
        row = (
            ident,
            account_id,
            f"venue-{rng.randrange(5000)}",
            f"screen-{rng.randrange(4)}",
            play,
            created,
            expires,
            campaign_id,
            creative_id,
            *times,
            int(rng.random() < 0.05 and played),  # duplicate_count: a repeat of a counted event
            int(rng.random() < 0.01),  # late_count
            1.0,  # impressions
            None,  # claims: holds no reservations
            expires + SETTLE_GRACE_SECONDS,  # settled_at
            "played" if played else "expired",  # settle_reason
            None,  # key_id: preloaded rows belong to no key
            None,  # source_network: unknown, as for rows stored before the invalid-traffic rules
            15,  # duration_seconds: the creative's
            ALL_WRAPPER_FIRES if played else 0,  # fired
        )
        assert len(row) == len(LOAD_COLUMNS)
        yield row


def load_sqlite(path: str, count: int, batch: int = 100_000, **ids: int) -> None:
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA synchronous=OFF")
    marks = ", ".join("?" * len(LOAD_COLUMNS))
    insert = f"INSERT INTO ad_requests ({', '.join(LOAD_COLUMNS)}) VALUES ({marks})"
    rows: list[tuple[object, ...]] = []

    def flush() -> None:
        conn.execute("BEGIN")
        conn.executemany(insert, rows)
        conn.execute("COMMIT")
        rows.clear()

    for row in generate(count, **ids):
        rows.append((row[0].hex, *row[1:]))  # type: ignore[attr-defined]
        if len(rows) >= batch:
            flush()
    if rows:
        flush()
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    conn.close()


async def load_postgres(dsn: str, schema: str | None, count: int, batch: int = 200_000, **ids: int) -> None:
    conn = await asyncpg.connect(dsn, server_settings={"search_path": schema} if schema else {})
    try:
        rows: list[tuple[object, ...]] = []
        for row in generate(count, **ids):
            rows.append(row)
            if len(rows) >= batch:
                await conn.copy_records_to_table("ad_requests", records=rows, columns=list(LOAD_COLUMNS))
                rows = []
        if rows:
            await conn.copy_records_to_table("ad_requests", records=rows, columns=list(LOAD_COLUMNS))
        await conn.execute("ANALYZE ad_requests")
    finally:
        await conn.close()


def load(
    env: EnvironmentSettings, count: int, *, account_id: int, campaign_id: int, creative_id: int
) -> float:
    """Load `count` ad requests into a migrated environment database; return the seconds it took."""
    began = time.monotonic()
    ids = {"account_id": account_id, "campaign_id": campaign_id, "creative_id": creative_id}
    if count > 0:
        if is_sqlite(env.database_url):
            load_sqlite(os.fspath(sqlite_path(env.database_url)), count, **ids)
        else:
            asyncio.run(load_postgres(asyncpg_dsn(env.database_url), env.database_schema, count, **ids))
    return time.monotonic() - began
