"""The growth benchmark's bulk loader fills a migrated ledger with rows the server itself can read.

Each backend gets a freshly migrated production database; the loader writes a few thousand week-old ad
requests, every one already settled (played or expired, as the expiry sweep would have left them), with the
Proof-of-Play fires of the played ones. The ledger store then reads a loaded row back.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
import sqlalchemy as sa

from adslot.environment import prepare_database
from adslot.ledger.backends import database_store
from adslot.ledger.records import COLUMNS, FIRE_BITS, SETTLE_GRACE_SECONDS, AdRequest
from adslot.settings import EnvironmentSettings
from adslot.storage.database import make_engine
from adslot.storage.tables import ad_requests, delivery_counters, request_stats
from bench import growth
from tests.conftest import BACKENDS, drop_schemas, free_port, make_settings

COUNT = 3000
IDS = {"account_id": 1, "campaign_id": 2, "creative_id": 3}


@pytest.fixture(params=BACKENDS)
def env(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[EnvironmentSettings]:
    """A freshly migrated production database on the backend (PostgreSQL: fresh schemas, dropped after)."""
    settings, schemas = make_settings(tmp_path, str(request.param), free_port())
    production = settings.environment("production")
    try:
        prepare_database(production)
        yield production
    finally:
        if schemas:
            drop_schemas(schemas)


async def read_back(env: EnvironmentSettings, ad_request_id: uuid.UUID) -> AdRequest | None:
    store = database_store(env.database_url, env.database_schema)
    await store.start()
    try:
        return await store.get(ad_request_id)
    finally:
        await store.close()


def test_generated_rows_have_every_column() -> None:
    for row in growth.generate(200, **IDS):
        assert len(row) == len(growth.LOAD_COLUMNS)
        values = dict(zip(growth.LOAD_COLUMNS, row, strict=True))
        assert values["impressions"] == 1.0 and values["claims"] is None
        assert values["settled_at"] == values["expires_at"] + SETTLE_GRACE_SECONDS  # type: ignore[operator]
        played = values["impression_at"] is not None
        assert values["settle_reason"] == ("played" if played else "expired")
        wrapper_bits = [FIRE_BITS[event, "wrapper"] for event in growth.EVENTS]
        assert values["fired"] == (sum(wrapper_bits) if played else 0)
        assert bin(sum(wrapper_bits)).count("1") == 6  # one bit per event, none shared


def test_load_fills_a_settled_ledger_the_store_reads(env: EnvironmentSettings) -> None:
    took = growth.load(env, COUNT, **IDS)
    assert took >= 0

    engine = make_engine(env)
    try:
        with engine.connect() as conn:
            t = ad_requests.c
            assert conn.scalar(sa.select(sa.func.count()).select_from(ad_requests)) == COUNT
            assert conn.scalar(sa.select(sa.func.count()).where(t.settled_at.is_(None))) == 0
            wrong_reason = sa.or_(
                sa.and_(t.impression_at.is_not(None), t.settle_reason != "played"),
                sa.and_(t.impression_at.is_(None), t.settle_reason != "expired"),
                t.settle_reason.is_(None),
            )
            assert conn.scalar(sa.select(sa.func.count()).where(wrong_reason)) == 0
            late_settled = t.settled_at != t.expires_at + SETTLE_GRACE_SECONDS
            assert conn.scalar(sa.select(sa.func.count()).where(late_settled)) == 0
            by_reason = sa.select(t.settle_reason, sa.func.count()).group_by(t.settle_reason)
            reasons: dict[str, int] = {reason: n for reason, n in conn.execute(by_reason)}
            assert set(reasons) == {"played", "expired"} and reasons["played"] > reasons["expired"] > 0

            played_with_every_fire = sa.and_(t.settle_reason == "played", t.fired == growth.ALL_WRAPPER_FIRES)
            assert conn.scalar(sa.select(sa.func.count()).where(played_with_every_fire)) == reasons["played"]
            expired_with_fires = sa.and_(t.settle_reason == "expired", t.fired != 0)
            assert conn.scalar(sa.select(sa.func.count()).where(expired_with_fires)) == 0
            # They hold no reservations and feed no fill-rate counts: the loader writes neither table.
            assert conn.scalar(sa.select(sa.func.count()).select_from(delivery_counters)) == 0
            assert conn.scalar(sa.select(sa.func.count()).select_from(request_stats)) == 0

            played_id = conn.scalar(
                sa.select(t.id).where(t.settle_reason == "played").order_by(t.id).limit(1)
            )
            expired_id = conn.scalar(
                sa.select(t.id).where(t.settle_reason == "expired").order_by(t.id).limit(1)
            )
            expected = conn.execute(sa.select(*[t[c] for c in COLUMNS]).where(t.id == played_id)).one()
    finally:
        engine.dispose()

    assert isinstance(played_id, uuid.UUID) and isinstance(expired_id, uuid.UUID)
    record = asyncio.run(read_back(env, played_id))
    assert record is not None
    assert record.id == played_id
    assert (record.account_id, record.campaign_id, record.creative_id) == (1, 2, 3)
    assert record.venue_id.startswith("venue-") and record.screen_id is not None
    assert record.created_at < record.play_time < record.expires_at
    assert record.impression_at == record.play_time and record.complete_at == record.play_time + 20
    assert record.impressions == 1.0 and record.claims is None
    assert record.settled_at == record.expires_at + SETTLE_GRACE_SECONDS
    assert record.settle_reason == "played"
    assert record.state(record.settled_at) == "played"
    assert tuple(getattr(record, c) for c in COLUMNS) == tuple(expected)

    unplayed = asyncio.run(read_back(env, expired_id))
    assert unplayed is not None and unplayed.impression_at is None and unplayed.complete_at is None
    assert unplayed.settle_reason == "expired"
    assert unplayed.state(unplayed.settled_at or 0) == "expired"
