"""The pixel guard in front of a real ledger (SQLite and PostgreSQL): a flood of fires on one ad request is
written twice at most (the first fire, then every repeat together), counted exactly, and what is over the
limit never reaches the ledger."""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Iterator, Sequence

import pytest

from adslot.ledger.group_commit import GroupCommitter
from adslot.ledger.records import Fire, Issue, Operation, Verdict
from adslot.ledger.store import LedgerStore
from adslot.limits.pixels import PixelGuard
from tests.conftest import BACKENDS
from tests.ledger.conftest import migrated
from tests.ledger.stores import LedgerDatabase, record


@pytest.fixture(scope="module", params=BACKENDS)
def ledger_database(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[LedgerDatabase]:
    yield from migrated(str(request.param), tmp_path_factory)


@pytest.fixture
def db(ledger_database: LedgerDatabase) -> LedgerDatabase:
    ledger_database.clear()
    return ledger_database


class Ledger:
    """A real store behind a real group committer, with the batches it was handed kept to count them."""

    def __init__(self, store: LedgerStore) -> None:
        self.store = store
        self.batches: list[list[Operation]] = []
        self.writer: GroupCommitter[Operation, Verdict] = GroupCommitter(self._apply, 512, 2)

    async def _apply(self, ops: Sequence[Operation]) -> list[Verdict]:
        self.batches.append(list(ops))
        return await self.store.apply(ops)

    def fires_of(self, ident: uuid.UUID) -> list[int]:
        """How many fires on `ident` each batch that carried any held."""
        counts = [
            sum(1 for op in batch if isinstance(op, Fire) and op.ad_request_id == ident)
            for batch in self.batches
        ]
        return [count for count in counts if count]


async def outcomes(futures: list[asyncio.Future[Verdict] | None]) -> list[str]:
    """Each fire's outcome, `limited` for one the guard refused."""
    return ["limited" if future is None else (await future).outcome for future in futures]


def test_a_flood_while_the_first_fire_is_in_flight_is_written_twice_more_and_counted_exactly(
    db: LedgerDatabase,
) -> None:
    issued = record()

    async def scenario(store: LedgerStore) -> tuple[list[str], list[int]]:
        ledger = Ledger(store)
        ledger.writer.start()
        await ledger.writer.submit(Issue(issued))
        ledger.batches.clear()
        guard = PixelGuard(ledger.writer, limit=0)
        now = int(time.time())
        futures: list[asyncio.Future[Verdict] | None] = []
        with db.write_lock():  # the first fire stays in flight while the flood arrives
            futures.append(guard.enqueue(Fire(issued.id, "impression", "wrapper", now)))
            for _ in range(20):  # 199 repeats over many passes of the loop, as connections deliver them
                await asyncio.sleep(0.005)
                for _ in range(10 if len(futures) < 190 else 199 - len(futures) + 1):
                    futures.append(guard.enqueue(Fire(issued.id, "impression", "wrapper", now)))
        answers = await outcomes(futures)
        await ledger.writer.close()
        return answers, ledger.fires_of(issued.id)

    answers, batches = db.run(scenario)
    assert len(answers) == 200
    assert answers == ["counted"] + ["duplicate"] * 199
    assert batches == [1, 1, 198], "written for the first fire, its first repeat, then once for the rest"
    row = db.rows()[issued.id]
    assert row["impression_at"] is not None
    assert row["duplicate_count"] == 199, "every repeat answered duplicate is in duplicate_count"


def test_fires_over_the_limit_never_reach_the_ledger(db: LedgerDatabase) -> None:
    issued = record()

    async def scenario(store: LedgerStore) -> tuple[list[str], list[int]]:
        ledger = Ledger(store)
        ledger.writer.start()
        await ledger.writer.submit(Issue(issued))
        ledger.batches.clear()
        guard = PixelGuard(ledger.writer, limit=20)
        now = int(time.time())
        futures = [guard.enqueue(Fire(issued.id, "impression", "wrapper", now)) for _ in range(200)]
        answers = await outcomes(futures)
        await ledger.writer.close()
        return answers, ledger.fires_of(issued.id)

    answers, batches = db.run(scenario)
    assert answers.count("limited") == 180
    assert sorted(set(answers)) == ["counted", "duplicate", "limited"]
    assert answers.count("counted") == 1
    assert sum(batches) == 20, "only the fires within the limit reached the ledger"
    assert len(batches) <= 2
    row = db.rows()[issued.id]
    assert row["impression_at"] is not None
    assert row["duplicate_count"] == 19


def test_each_event_and_layer_is_guarded_on_its_own_and_a_new_second_takes_fires_again(
    db: LedgerDatabase,
) -> None:
    issued = record()

    async def scenario(store: LedgerStore) -> list[list[str]]:
        ledger = Ledger(store)
        ledger.writer.start()
        await ledger.writer.submit(Issue(issued))
        guard = PixelGuard(ledger.writer, limit=3)
        now = int(time.time())
        rounds = [
            [guard.enqueue(Fire(issued.id, "impression", "wrapper", now)) for _ in range(2)]
            + [guard.enqueue(Fire(issued.id, "impression", "inline", now))]
            + [guard.enqueue(Fire(issued.id, "start", "wrapper", now))],
            [guard.enqueue(Fire(issued.id, "start", "wrapper", now + 1)) for _ in range(4)],
        ]
        answers = [await outcomes(futures) for futures in rounds]
        await ledger.writer.close()
        return answers

    first, second = db.run(scenario)
    assert first == ["counted", "duplicate", "echo", "limited"]
    assert second == ["counted", "duplicate", "duplicate", "limited"], "the limited start was never stored"
    row = db.rows()[issued.id]
    assert row["duplicate_count"] == 3


def test_repeats_of_a_late_fire_are_late_and_kept_in_late_count(db: LedgerDatabase) -> None:
    issued = record(play_time=int(time.time()) - 2000)  # expired 1,100 s ago

    async def scenario(store: LedgerStore) -> list[str]:
        ledger = Ledger(store)
        ledger.writer.start()
        await ledger.writer.submit(Issue(issued))
        guard = PixelGuard(ledger.writer, limit=0)
        now = int(time.time())
        answers = await outcomes(
            [guard.enqueue(Fire(issued.id, "complete", "wrapper", now)) for _ in range(30)]
        )
        unknown = await outcomes(
            [guard.enqueue(Fire(uuid.uuid4(), "complete", "wrapper", now)) for _ in range(5)]
        )
        await ledger.writer.close()
        return answers + unknown

    answers = db.run(scenario)
    assert answers == ["late"] * 30 + ["unknown"] * 5
    row = db.rows()[issued.id]
    assert (row["late_count"], row["duplicate_count"], row["complete_at"]) == (30, 0, None)


def test_the_guard_remembers_only_the_fires_of_the_current_second(db: LedgerDatabase) -> None:
    issued = record()

    async def scenario(store: LedgerStore) -> list[int]:
        ledger = Ledger(store)
        ledger.writer.start()
        await ledger.writer.submit(Issue(issued))
        guard = PixelGuard(ledger.writer, limit=50)
        now = int(time.time())
        sizes = []
        for second in range(5):
            futures = [
                guard.enqueue(Fire(uuid.uuid4(), "impression", "wrapper", now + second)) for _ in range(100)
            ]
            await outcomes(futures)
            sizes.append(guard.tracked)
        await ledger.writer.close()
        return sizes

    assert db.run(scenario) == [100] * 5
