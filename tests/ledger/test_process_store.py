"""The ledger writer process: the same batches and verdicts as the in-worker store, crash and drain."""

from __future__ import annotations

import asyncio
import os
import signal
from collections.abc import Iterator

import pytest

from adslot.ledger.backends import ledger_for
from adslot.ledger.group_commit import GroupCommitter
from adslot.ledger.process_store import RESENDS, ProcessLedgerStore
from adslot.ledger.records import Fire, Issue, NoFill, Operation, Release, Settle, Verdict
from adslot.storage.failures import LedgerUnavailable, OutcomeUnknown
from tests.ledger.conftest import migrated
from tests.ledger.stores import PLAY, WINDOW, LedgerDatabase, check_accounting, claims_for, record, workload

pytestmark = pytest.mark.slow("subprocess")  # each store starts a ledger writer process

Answer = tuple[object, object, dict[str, object], int]


@pytest.fixture(scope="module")
def ledger_database(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LedgerDatabase]:
    """SQLite's: a writer process serves SQLite's ledger only (PostgreSQL's is written from the workers)."""
    yield from migrated("sqlite", tmp_path_factory)


def test_a_batch_through_the_writer_process_answers_and_stores_what_the_store_itself_does(
    db: LedgerDatabase,
) -> None:
    def batches() -> list[list[object]]:
        capped = record(campaign_id=1, claims=claims_for(1, "s1", PLAY, 1.0))
        plain = record(campaign_id=3)
        return [
            [Issue(capped, claims_for(1, "s1", PLAY, 1.0)), Issue(plain), NoFill("lobby", "s2", PLAY)],
            [
                Fire(capped.id, "impression", "wrapper", PLAY + 1),
                Fire(capped.id, "impression", "wrapper", PLAY + 2),
                Fire(capped.id, "impression", "inline", PLAY + 3),
                Fire(record().id, "start", "wrapper", PLAY + 4),
                Release(plain.id, plain.account_id, PLAY + 5),
            ],
            [
                Fire(plain.id, "impression", "wrapper", PLAY + WINDOW + 10),
                Settle(PLAY + 10 * WINDOW, grace=0),
            ],
        ]

    def run(writer_process: bool) -> tuple[list[list[Answer]], object]:
        async def scenario() -> list[list[Answer]]:
            store = ledger_for(db.env) if writer_process else db.store()
            await store.start()
            try:
                answers: list[list[Answer]] = []
                for batch in batches():
                    verdicts = await store.apply(batch)  # type: ignore[arg-type]
                    answers.append([(v.outcome, v.reason, dict(v.counters), v.settled) for v in verdicts])
                return answers
            finally:
                await store.close()

        db.clear()
        answers = asyncio.run(scenario())
        rows = sorted(
            (r["campaign_id"], r["impression_at"], r["duplicate_count"], r["settle_reason"], r["claims"])
            for r in db.rows().values()
        )
        return answers, (rows, db.counters(), db.stats())

    in_worker = run(writer_process=False)
    in_process = run(writer_process=True)
    assert in_process == in_worker
    assert in_process[0][1][:3] == [
        ("counted", None, {}, 0),
        ("duplicate", None, {}, 0),
        ("echo", None, {}, 0),
    ]


def test_concurrent_workers_with_writer_processes_never_pass_a_cap(db: LedgerDatabase) -> None:
    seen = asyncio.run(workload(db.env, seed=11, workers=2, tasks=3, operations=60, writer_process=True))
    assert seen["issued"] > 0 and seen["impression counted"] > 0
    assert check_accounting(db) > 0


def test_a_writer_process_that_dies_with_batches_in_flight_is_replaced_and_they_are_applied_once(
    db: LedgerDatabase,
) -> None:
    first, second, also, third = record(), record(), record(), record()

    async def scenario() -> None:
        store = ledger_for(db.env)
        assert isinstance(store, ProcessLedgerStore)
        await store.start()
        try:
            assert [v.outcome for v in await store.apply([Issue(first)])] == ["issued"]
            pid = store.writer_pid()
            assert pid is not None
            os.kill(pid, signal.SIGSTOP)  # hold it mid-life, so the next batches are surely in flight
            in_flight = [asyncio.ensure_future(store.apply([Issue(r)])) for r in (second, also)]
            await asyncio.sleep(0.2)
            assert not any(f.done() for f in in_flight)
            os.kill(pid, signal.SIGKILL)
            # The killed process never committed them: the new writer, asked first, applies them.
            for batch in in_flight:
                assert [v.outcome for v in await asyncio.wait_for(batch, 30)] == ["issued"]
            assert store.writer_pid() not in (None, pid)
            assert [v.outcome for v in await store.apply([Issue(third)])] == ["issued"]
        finally:
            await store.close()

    asyncio.run(scenario())
    assert set(db.rows()) == {first.id, second.id, also.id, third.id}
    assert sum(fills for _, fills in db.stats().values()) == 4, "each issue counted once"


def test_batches_whose_writers_keep_going_away_fail_as_outcome_unknown_and_are_not_retried_one_by_one(
    db: LedgerDatabase,
) -> None:
    """Writers that keep going away with the same batches (here: each is killed once it has them, while the
    database is held so it cannot commit) end in OutcomeUnknown, a 503, after RESENDS new writers: never a
    restart loop, never a blind retry that could count twice."""

    async def scenario() -> list[int]:
        store = ledger_for(db.env)
        assert isinstance(store, ProcessLedgerStore)
        await store.start()
        writer: GroupCommitter[Operation, Verdict] = GroupCommitter(store.apply, 8)
        writer.start()
        killed: list[int] = []
        try:
            with db.write_lock():
                pending = [asyncio.ensure_future(writer.submit(Issue(record()))) for _ in range(3)]
                deadline = asyncio.get_running_loop().time() + 60
                while not all(p.done() for p in pending):
                    assert asyncio.get_running_loop().time() < deadline, "timed out"
                    pid = store.writer_pid()
                    if store.connected() and pid is not None and pid not in killed and store.in_flight():
                        os.kill(pid, signal.SIGKILL)
                        killed.append(pid)
                    await asyncio.sleep(0.01)
            assert {type(p.exception()) for p in pending} == {OutcomeUnknown}
            # Let go, the store takes the next batch with a new writer.
            assert (await writer.submit(Issue(record()))).outcome == "issued"
            return killed
        finally:
            await writer.close()
            await store.close()

    killed = asyncio.run(scenario())
    assert len(killed) == RESENDS + 1
    assert len(db.rows()) == 1 and sum(fills for _, fills in db.stats().values()) == 1


def test_a_recovery_that_gets_its_turn_after_close_starts_no_writer(db: LedgerDatabase) -> None:
    """A writer that went away schedules a recovery; if close() takes the store's lock first, the recovery
    must find the store closed and start nothing: a writer started then would outlive its server."""

    async def scenario() -> None:
        store = ledger_for(db.env)
        assert isinstance(store, ProcessLedgerStore)
        await store.start()
        old = store.process()
        assert old is not None
        await store.close()
        await store._recover()  # as the recovery task runs once close() has let go of the lock
        assert store.process() is None and not store.connected()
        with pytest.raises(LedgerUnavailable, match="closed"):
            await store._reconnect()
        assert store.process() is None, "no writer process was started after close()"
        assert old.returncode == 0

    asyncio.run(scenario())


def test_a_drain_commits_every_submitted_batch_then_the_writer_process_exits_cleanly(
    db: LedgerDatabase,
) -> None:
    async def scenario() -> int | None:
        store = ledger_for(db.env)
        assert isinstance(store, ProcessLedgerStore)
        await store.start()
        process = store.process()
        assert process is not None
        writer: GroupCommitter[Operation, Verdict] = GroupCommitter(store.apply, 2)
        writer.start()
        pending = [asyncio.ensure_future(writer.submit(Issue(record()))) for _ in range(7)]
        await asyncio.sleep(0)
        await writer.close()  # the environment's stop order: drain the committer, then close the store
        await store.close()
        assert [p.result().outcome for p in pending] == ["issued"] * 7
        with pytest.raises(RuntimeError, match="closed"):
            await store.apply([Issue(record())])
        return process.returncode

    assert asyncio.run(scenario()) == 0
    assert len(db.rows()) == 7


def test_batches_sent_back_to_back_each_get_their_own_verdicts(db: LedgerDatabase) -> None:
    async def scenario() -> None:
        store = ledger_for(db.env)
        await store.start()
        try:
            records = [record(venue_id=f"v{i}") for i in range(30)]
            issued = await asyncio.gather(*(store.apply([Issue(r)]) for r in records))
            assert [v.outcome for (v,) in issued] == ["issued"] * 30
            fires = await asyncio.gather(
                *(
                    store.apply([Fire(r.id, "impression", "wrapper", PLAY)] * (1 + i % 3))
                    for i, r in enumerate(records)
                )
            )
            assert [[v.outcome for v in batch] for batch in fires] == [
                ["counted", "duplicate", "duplicate"][: 1 + i % 3] for i in range(30)
            ]
        finally:
            await store.close()

    asyncio.run(scenario())
