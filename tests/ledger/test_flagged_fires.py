"""Fires the invalid-traffic rules flag, through the real stores: kept in invalid_fires with their reason,
never an event time (so never a play), and their repeats and the other layer's fire are duplicates."""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Sequence

import sqlalchemy as sa

from adslot.ledger.backends import database_store
from adslot.ledger.ivt import IvtConfig, network_key
from adslot.ledger.records import Fire, Issue, Operation, Verdict
from adslot.storage.tables import invalid_fires
from tests.ledger.stores import PLAY, LedgerDatabase, record

HOME = network_key("203.0.113.9")
AWAY = network_key("198.51.100.9")


def apply_judged(
    db: LedgerDatabase, batches: Sequence[Sequence[Operation]], config: IvtConfig
) -> list[Verdict]:
    """Each batch through a store judging by `config`, in turn; every verdict, in order."""

    async def main() -> list[Verdict]:
        store = database_store(db.env.database_url, db.env.database_schema, ivt=config)
        await store.start()
        try:
            verdicts: list[Verdict] = []
            for batch in batches:
                verdicts += await store.apply(batch)
            return verdicts
        finally:
            await store.close()

    return asyncio.run(main())


def flagged(db: LedgerDatabase) -> list[tuple[str, str, int, str]]:
    with db.engine.begin() as conn:
        rows = conn.execute(sa.select(invalid_fires).order_by(invalid_fires.c.played_at)).all()
        conn.execute(sa.delete(invalid_fires))
    return [(r.event, r.layer, r.played_at, r.reason) for r in rows]


def test_a_fire_from_a_foreign_network_is_kept_with_its_reason_and_never_counted(db: LedgerDatabase) -> None:
    flagged(db)
    ad = dataclasses.replace(record(), source_network=HOME, duration_seconds=30)
    verdicts = apply_judged(
        db,
        [
            [Issue(ad)],
            [Fire(ad.id, "impression", "wrapper", PLAY, AWAY)],
            [
                Fire(ad.id, "impression", "wrapper", PLAY + 1, AWAY),
                Fire(ad.id, "impression", "inline", PLAY, HOME),
            ],
        ],
        IvtConfig(),
    )
    assert [(v.outcome, v.reason) for v in verdicts[1:]] == [
        ("invalid", "foreign_network"),
        ("duplicate", None),
        ("duplicate", None),
    ]
    row = db.rows()[ad.id]
    assert row["impression_at"] is None and row["duplicate_count"] == 2
    assert row["source_network"] == HOME and row["duration_seconds"] == 30
    assert flagged(db) == [("impression", "wrapper", PLAY, "foreign_network")]


def test_a_complete_too_soon_after_the_start_is_flagged_and_the_play_still_counts(db: LedgerDatabase) -> None:
    flagged(db)
    ad = dataclasses.replace(record(), source_network=HOME, duration_seconds=30)
    fires = [
        Fire(ad.id, "impression", "wrapper", PLAY, HOME),
        Fire(ad.id, "start", "wrapper", PLAY, HOME),
        Fire(ad.id, "complete", "wrapper", PLAY + 3, HOME),
    ]
    verdicts = apply_judged(db, [[Issue(ad)], fires[:2], fires[2:]], IvtConfig())
    assert [v.outcome for v in verdicts[1:]] == ["counted", "counted", "invalid"]
    row = db.rows()[ad.id]
    assert row["impression_at"] == PLAY and row["start_at"] == PLAY and row["complete_at"] is None
    assert flagged(db) == [("complete", "wrapper", PLAY + 3, "too_fast")]


def test_events_in_one_batch_are_judged_against_the_ones_before_them(db: LedgerDatabase) -> None:
    flagged(db)
    ad = dataclasses.replace(record(), duration_seconds=20)
    fires = [
        Fire(ad.id, "start", "wrapper", PLAY),
        Fire(ad.id, "midpoint", "wrapper", PLAY + 10),
        Fire(ad.id, "firstQuartile", "wrapper", PLAY + 15),
    ]
    verdicts = apply_judged(db, [[Issue(ad)], fires], IvtConfig())
    assert [(v.outcome, v.reason) for v in verdicts[1:]] == [
        ("counted", None),
        ("counted", None),
        ("invalid", "out_of_order"),
    ]
    assert flagged(db) == [("firstQuartile", "wrapper", PLAY + 15, "out_of_order")]


def test_with_every_rule_off_nothing_is_flagged(db: LedgerDatabase) -> None:
    flagged(db)
    ad = dataclasses.replace(record(), source_network=HOME, duration_seconds=30)
    fires = [Fire(ad.id, "start", "wrapper", PLAY, AWAY), Fire(ad.id, "complete", "wrapper", PLAY, AWAY)]
    verdicts = apply_judged(db, [[Issue(ad)], fires], IvtConfig(rules=()))
    assert [v.outcome for v in verdicts[1:]] == ["counted", "counted"]
    assert flagged(db) == []
