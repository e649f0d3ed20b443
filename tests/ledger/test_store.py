"""Each worker frame's answer is stored in its batch's transaction, on both databases (store.py, step 6)."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

import pytest

from adslot.ledger.backends import database_store
from adslot.ledger.records import (
    ANSWER_RETENTION_SECONDS,
    ANSWER_SLOTS,
    ISSUE_COLUMNS,
    AlreadyAnswered,
    Fire,
    Issue,
    NoFill,
    Receipt,
    Settle,
)
from adslot.ledger.resolve import NO_TIMES
from adslot.ledger.store import DatabaseLedgerStore, current_of
from adslot.ledger.wire import decode_verdicts
from tests.ledger.stores import PLAY, LedgerDatabase, claims_for, record

ONE, TWO = b"1" * 16, b"2" * 16


def run(db: LedgerDatabase, scenario: Callable[[DatabaseLedgerStore], Awaitable[None]]) -> None:
    async def main() -> None:
        store = database_store(db.env.database_url, db.env.database_schema)
        await store.start()
        try:
            await scenario(store)
        finally:
            await store.close()

    asyncio.run(main())


def test_a_batch_stores_each_frames_answer_and_one_answered_before_fails_it_with_nothing_written(
    db: LedgerDatabase,
) -> None:
    issued = record()

    async def scenario(store: DatabaseLedgerStore) -> None:
        ops = [Issue(issued), NoFill("lobby", "s2", PLAY)]
        answers = await store.apply_frames(ops, [Receipt(ONE, 1, PLAY, 0, 1), Receipt(TWO, 7, PLAY, 1, 2)])
        assert [[v.outcome for v in decode_verdicts(a)] for a in answers] == [["issued"], ["recorded"]]
        assert await store.answer(ONE, 1) == answers[0]
        assert await store.answer(TWO, 7) == answers[1]
        assert await store.answer(ONE, 2) is None  # never sent
        assert await store.answer(ONE, 1 + ANSWER_SLOTS) is None  # same slot, another frame
        assert await store.answer(TWO, 1) is None  # another worker's

        # Frame 1 of worker ONE again, as a writer that did not know it was committed would apply it.
        again = [Fire(issued.id, "impression", "wrapper", PLAY + 1), NoFill("lobby", "s2", PLAY)]
        with pytest.raises(AlreadyAnswered):
            await store.apply_frames(again, [Receipt(ONE, 1, PLAY, 0, 2)])
        assert db.rows()[issued.id]["impression_at"] is None, "the whole batch was rolled back"
        assert sum(requests for requests, _ in db.stats().values()) == 2

        # A later frame in the same slot takes it over.
        (later,) = await store.apply_frames(again[:1], [Receipt(ONE, 1 + ANSWER_SLOTS, PLAY, 0, 1)])
        assert [v.outcome for v in decode_verdicts(later)] == ["counted"]
        assert await store.answer(ONE, 1) is None
        assert await store.answer(ONE, 1 + ANSWER_SLOTS) == later

    run(db, scenario)


def test_the_expiry_sweep_drops_answers_sent_before_their_retention(db: LedgerDatabase) -> None:
    old_at, new_at = PLAY, PLAY + ANSWER_RETENTION_SECONDS + 100

    async def scenario(store: DatabaseLedgerStore) -> None:
        await store.apply_frames([NoFill("lobby", None, PLAY)], [Receipt(ONE, 3, old_at, 0, 1)])
        await store.apply_frames([NoFill("lobby", None, PLAY)], [Receipt(TWO, 3, new_at, 0, 1)])
        await store.apply([Settle(PLAY + ANSWER_RETENTION_SECONDS + 50)])
        assert await store.answer(ONE, 3) is None
        assert await store.answer(TWO, 3) is not None

    run(db, scenario)


@pytest.mark.parametrize("kind", ["fires", "no_fills", "nothing_to_write"])
def test_a_frame_answered_before_fails_whatever_the_batch_writes_and_changes_nothing(
    db: LedgerDatabase, kind: str
) -> None:
    """Whatever the batch writes (ad request rows, request and key stats, or nothing but its answer), a frame
    stored before must fail it and leave no trace."""
    issued = record()
    unknown = record()  # never issued: its fire is `unknown`, and the batch writes no row

    async def scenario(store: DatabaseLedgerStore) -> None:
        await store.apply([Issue(issued)])
        ops = {
            "fires": [Fire(issued.id, "impression", "wrapper", PLAY + 1)],
            "no_fills": [NoFill("lobby", "s9", PLAY, 3)],
            "nothing_to_write": [Fire(unknown.id, "impression", "wrapper", PLAY + 1)],
        }[kind]
        (first,) = await store.apply_frames(ops, [Receipt(ONE, 5, PLAY, 0, 1)])
        rows, stats, by_key = db.rows(), db.stats(), db.key_stats()
        if kind == "no_fills":
            assert by_key == {(3, PLAY - PLAY % 3600): (1, 0)}, "the first copy counted under its key"
        with pytest.raises(AlreadyAnswered):
            await store.apply_frames(ops, [Receipt(ONE, 5, PLAY, 0, 1)])
        assert db.rows() == rows, "the ad requests are as the first copy left them"
        assert db.stats() == stats, "the request stats are as the first copy left them"
        assert db.key_stats() == by_key, "the key stats are as the first copy left them"
        assert await store.answer(ONE, 5) == first

    run(db, scenario)


def test_a_batch_of_issues_stores_every_column_of_each_as_given(db: LedgerDatabase) -> None:
    """One INSERT for all of a batch's admitted ad requests (PostgreSQL: an array per column): each row
    comes back exactly, NULLs, floats and other venues included, and a refused one is not stored."""
    plain = record()
    no_screen = record(screen_id=None, venue_id="atrium", campaign_id=7, impressions=2.75)
    capped = record(campaign_id=1, claims=claims_for(1, "s1", PLAY, 1.0))
    separated = record(campaign_id=1, claims=claims_for(1, "s1", PLAY, 1.0))  # 5 minutes apart: refused
    records = [plain, no_screen, capped, separated]

    async def scenario(store: DatabaseLedgerStore) -> None:
        verdicts = await store.apply(
            [Issue(r, claims_for(r.campaign_id, "s1", PLAY, 1.0)) if r.claims else Issue(r) for r in records]
        )
        assert [v.outcome for v in verdicts] == ["issued", "issued", "issued", "rejected"]

    run(db, scenario)
    rows = db.rows()
    assert set(rows) == {plain.id, no_screen.id, capped.id}
    for r in (plain, no_screen, capped):
        stored = rows[r.id]
        for column in ISSUE_COLUMNS:  # every column an issue writes
            assert stored[column] == getattr(r, column), (column, stored[column], getattr(r, column))
        assert stored["duplicate_count"] == 0 and stored["settled_at"] is None


def test_a_state_row_keeps_its_times_in_event_order_and_unfired_rows_share_one_tuple() -> None:
    fired = current_of((1000, 10, None, 12, None, None, None, 5, None, None, 0b101))
    assert fired.times == (10, None, 12, None, None, None) and fired.played
    assert (fired.expires_at, fired.account_id, fired.fired) == (1000, 5, 0b101)
    unfired = [current_of((1000, *NO_TIMES, 5, None, None, 0)) for _ in range(2)]
    assert unfired[0].times is unfired[1].times is NO_TIMES and not unfired[0].played
