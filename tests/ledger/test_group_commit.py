"""Group commit: concurrent submissions share one write, each submitter gets its own result or error."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Coroutine, Sequence
from typing import Any, TypeVar

import pytest

from adslot.ledger.group_commit import GroupCommitter
from adslot.storage.failures import LedgerUnavailable

T = TypeVar("T")
WAIT = 5.0


def run(scenario: Callable[[], Coroutine[Any, Any, T]]) -> T:
    return asyncio.run(asyncio.wait_for(scenario(), WAIT))


class Apply:
    """A stand-in for the store's batch write: records each batch, yields to the loop, may fail or be held."""

    def __init__(self, fail_on: frozenset[int] = frozenset(), hold: asyncio.Event | None = None) -> None:
        self.batches: list[list[int]] = []
        self.fail_on = fail_on
        self.hold = hold
        self.entered = asyncio.Event()

    async def __call__(self, ops: Sequence[int]) -> list[str]:
        self.batches.append(list(ops))
        self.entered.set()
        await asyncio.sleep(0)
        if self.hold is not None:
            await self.hold.wait()
        bad = [op for op in ops if op in self.fail_on]
        if bad:
            raise ValueError(f"cannot write {bad}")
        return [f"done-{op}" for op in ops]

    @property
    def sizes(self) -> list[int]:
        return [len(batch) for batch in self.batches]


async def started(
    apply: Callable[[Sequence[int]], Awaitable[list[str]]], **kwargs: Any
) -> GroupCommitter[int, str]:
    committer: GroupCommitter[int, str] = GroupCommitter(apply, **kwargs)
    committer.start()
    return committer


async def settle() -> None:
    for _ in range(10):
        await asyncio.sleep(0)


# --- batching -------------------------------------------------------------------------------------


def test_concurrent_submissions_are_written_in_one_batch() -> None:
    async def scenario() -> tuple[list[list[int]], list[str]]:
        apply = Apply()
        committer = await started(apply)
        results = await asyncio.gather(*(committer.submit(i) for i in range(20)))
        await committer.close()
        return apply.batches, results

    batches, results = run(scenario)
    assert batches == [list(range(20))]
    assert results == [f"done-{i}" for i in range(20)]


def test_submissions_arriving_during_a_write_go_together_in_the_next_batch() -> None:
    async def scenario() -> list[int]:
        hold = asyncio.Event()
        apply = Apply(hold=hold)
        committer = await started(apply)
        first = asyncio.create_task(committer.submit(0))
        await apply.entered.wait()
        later = [asyncio.create_task(committer.submit(i)) for i in range(1, 11)]
        await settle()
        assert apply.sizes == [1]
        hold.set()
        await asyncio.gather(first, *later)
        await committer.close()
        return apply.sizes

    assert run(scenario) == [1, 10]


def test_batches_never_exceed_max_batch() -> None:
    async def scenario() -> tuple[list[list[int]], list[str]]:
        apply = Apply()
        committer = await started(apply, max_batch=4)
        results = await asyncio.gather(*(committer.submit(i) for i in range(10)))
        await committer.close()
        return apply.batches, results

    batches, results = run(scenario)
    assert batches == [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9]]
    assert results == [f"done-{i}" for i in range(10)]


def test_with_two_in_flight_a_second_batch_is_handed_over_before_the_first_is_answered() -> None:
    async def scenario() -> tuple[list[list[int]], list[str]]:
        hold = asyncio.Event()
        apply = Apply(hold=hold)
        committer = await started(apply, in_flight=2)
        first = asyncio.create_task(committer.submit(0))
        await apply.entered.wait()
        second = [asyncio.create_task(committer.submit(i)) for i in (1, 2)]
        await settle()
        assert apply.batches == [[0], [1, 2]]  # both handed over, in order, while the first is held
        third = [asyncio.create_task(committer.submit(i)) for i in (3, 4)]
        await settle()
        assert apply.batches == [[0], [1, 2]]  # no third while two are in flight
        assert not first.done()
        hold.set()
        results = await asyncio.gather(first, *second, *third)
        await committer.close()
        return apply.batches, results

    batches, results = run(scenario)
    assert batches == [[0], [1, 2], [3, 4]]
    assert results == [f"done-{i}" for i in range(5)]


def reserving(op: int) -> bool:
    """In these tests, ops from 100 up lock the same rows (as ad requests of a capped campaign do)."""
    return op >= 100


async def reserving_in_flight(apply: Apply) -> tuple[GroupCommitter[int, str], asyncio.Task[str]]:
    """A committer with 2 slots whose first batch, [100], reserves and is in flight."""
    committer = await started(apply, in_flight=2, contended=reserving)
    first = asyncio.create_task(committer.submit(100))
    await apply.entered.wait()
    return committer, first


def test_a_batch_that_reserves_waits_for_the_one_in_flight_then_takes_all_that_gathered() -> None:
    async def scenario() -> tuple[list[list[int]], list[str]]:
        hold = asyncio.Event()
        apply = Apply(hold=hold)
        committer, first = await reserving_in_flight(apply)
        later = [asyncio.create_task(committer.submit(op)) for op in (101, 1, 102)]
        await settle()
        assert apply.batches == [[100]]  # a slot is free, but the next batch would queue on the same locks
        hold.set()
        results = await asyncio.gather(first, *later)
        await committer.close()
        return apply.batches, results

    batches, results = run(scenario)
    assert batches == [[100], [101, 1, 102]]
    assert results == ["done-100", "done-101", "done-1", "done-102"]


def test_a_batch_that_reserves_nothing_overlaps_one_that_reserves() -> None:
    async def scenario() -> list[list[int]]:
        hold = asyncio.Event()
        apply = Apply(hold=hold)
        committer, first = await reserving_in_flight(apply)
        second = asyncio.create_task(committer.submit(1))
        await settle()
        assert apply.batches == [[100], [1]]
        hold.set()
        await asyncio.gather(first, second)
        third = asyncio.create_task(committer.submit(103))  # the reserving slot was given back
        assert await third == "done-103"
        await committer.close()
        return apply.batches

    assert run(scenario) == [[100], [1], [103]]


def test_a_failed_batch_that_reserves_gives_its_turn_back() -> None:
    async def scenario() -> list[list[int]]:
        apply = Apply(fail_on=frozenset({100}))
        committer = await started(apply, in_flight=2, contended=reserving)
        with pytest.raises(ValueError, match="cannot write"):
            await committer.submit(100)
        assert await committer.submit(101) == "done-101"
        await committer.close()
        return apply.batches

    assert run(scenario) == [[100], [101]]


def test_close_waits_for_every_batch_in_flight() -> None:
    async def scenario() -> list[str]:
        hold = asyncio.Event()
        committer = await started(Apply(hold=hold), in_flight=3)
        pending = [asyncio.create_task(committer.submit(i)) for i in range(3)]
        await settle()
        closing = asyncio.create_task(committer.close())
        await settle()
        assert not closing.done()
        hold.set()
        await closing
        return [p.result() for p in pending]

    assert run(scenario) == ["done-0", "done-1", "done-2"]


def test_a_lone_submission_is_written_without_waiting_for_company() -> None:
    async def scenario() -> tuple[str, list[int]]:
        apply = Apply()
        committer = await started(apply)
        result = await committer.submit(7)
        sizes = apply.sizes
        await committer.close()
        return result, sizes

    assert run(scenario) == ("done-7", [1])


# --- results --------------------------------------------------------------------------------------


def test_each_submitter_gets_the_result_of_its_own_operation() -> None:
    order = [13, 2, 8, 21, 5, 1, 34, 3]

    async def scenario() -> list[tuple[int, str]]:
        apply = Apply()
        committer = await started(apply, max_batch=3)

        async def submit(op: int) -> tuple[int, str]:
            return op, await committer.submit(op)

        pairs = await asyncio.gather(*(submit(op) for op in order))
        await committer.close()
        return pairs

    assert run(scenario) == [(op, f"done-{op}") for op in order]


# --- failures -------------------------------------------------------------------------------------


def test_a_failing_operation_fails_only_its_own_submitter() -> None:
    async def scenario() -> tuple[list[list[int]], list[object]]:
        apply = Apply(fail_on=frozenset({3}))
        committer = await started(apply)
        results = await asyncio.gather(*(committer.submit(i) for i in range(6)), return_exceptions=True)
        await committer.close()
        return apply.batches, list(results)

    batches, results = run(scenario)
    assert batches == [[0, 1, 2, 3, 4, 5], [0], [1], [2], [3], [4], [5]]
    failed = results[3]
    assert isinstance(failed, ValueError)
    assert str(failed) == "cannot write [3]"
    assert [r for i, r in enumerate(results) if i != 3] == ["done-0", "done-1", "done-2", "done-4", "done-5"]


def test_two_failing_operations_in_one_batch_each_fail_alone() -> None:
    async def scenario() -> list[object]:
        apply = Apply(fail_on=frozenset({1, 4}))
        committer = await started(apply)
        results = await asyncio.gather(*(committer.submit(i) for i in range(5)), return_exceptions=True)
        await committer.close()
        return list(results)

    results = run(scenario)
    assert [type(r).__name__ for r in results] == ["str", "ValueError", "str", "str", "ValueError"]
    assert [str(r) for r in results] == ["done-0", "cannot write [1]", "done-2", "done-3", "cannot write [4]"]


def test_a_failed_batch_is_logged_once_and_its_failing_operation_is_left_to_its_submitter_to_log(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """During an outage every request would otherwise log its traceback twice: here and with its answer."""

    async def scenario() -> None:
        committer = await started(Apply(fail_on=frozenset({1})))
        await asyncio.gather(*(committer.submit(i) for i in range(3)), return_exceptions=True)
        await committer.close()

    with caplog.at_level("DEBUG", logger="adslot.ledger.group_commit"):
        run(scenario)
    assert [(r.levelname, r.getMessage()) for r in caplog.records] == [
        ("WARNING", "a ledger batch of 3 failed (ValueError: cannot write [1]); writing it op by op")
    ]


def test_a_failing_lone_operation_raises_the_apply_error_to_its_submitter() -> None:
    async def scenario() -> None:
        apply = Apply(fail_on=frozenset({1}))
        committer = await started(apply)
        try:
            with pytest.raises(ValueError, match=r"cannot write \[1\]"):
                await committer.submit(1)
        finally:
            await committer.close()

    run(scenario)


def test_the_writer_keeps_serving_after_a_failed_batch() -> None:
    async def scenario() -> tuple[str, list[list[int]]]:
        apply = Apply(fail_on=frozenset({0}))
        committer = await started(apply)
        await asyncio.gather(*(committer.submit(i) for i in range(3)), return_exceptions=True)
        after = await committer.submit(10)
        await committer.close()
        return after, apply.batches

    after, batches = run(scenario)
    assert after == "done-10"
    assert batches[-1] == [10]


# --- lifecycle ------------------------------------------------------------------------------------


def test_close_writes_everything_submitted_before_returning() -> None:
    async def scenario() -> None:
        hold = asyncio.Event()
        apply = Apply(hold=hold)
        committer = await started(apply, max_batch=2)
        first = asyncio.create_task(committer.submit(0))
        await apply.entered.wait()
        queued = [asyncio.create_task(committer.submit(i)) for i in range(1, 6)]
        await settle()
        closing = asyncio.create_task(committer.close())
        await settle()
        assert not closing.done()
        assert not any(task.done() for task in queued)
        hold.set()
        await closing
        assert all(task.done() for task in [first, *queued])
        assert [task.result() for task in [first, *queued]] == [f"done-{i}" for i in range(6)]
        assert apply.batches == [[0], [1, 2], [3, 4], [5]]

    run(scenario)


def test_close_right_after_submissions_still_writes_them() -> None:
    async def scenario() -> None:
        apply = Apply()
        committer = await started(apply)
        tasks = [asyncio.create_task(committer.submit(i)) for i in range(8)]
        await asyncio.sleep(0)  # every submit has enqueued; the writer has not run yet
        await committer.close()
        assert all(task.done() for task in tasks)
        assert [task.result() for task in tasks] == [f"done-{i}" for i in range(8)]

    run(scenario)


def test_close_of_an_idle_writer_returns() -> None:
    async def scenario() -> list[list[int]]:
        apply = Apply()
        committer = await started(apply)
        await committer.close()
        return apply.batches

    assert run(scenario) == []


def test_submit_after_close_raises() -> None:
    async def scenario() -> None:
        apply = Apply()
        committer = await started(apply)
        await committer.close()
        with pytest.raises(RuntimeError, match="not running"):
            await committer.submit(1)
        assert apply.batches == []

    run(scenario)


def test_submit_while_closing_raises() -> None:
    async def scenario() -> None:
        hold = asyncio.Event()
        apply = Apply(hold=hold)
        committer = await started(apply)
        first = asyncio.create_task(committer.submit(0))
        await apply.entered.wait()
        closing = asyncio.create_task(committer.close())
        await settle()
        with pytest.raises(RuntimeError, match="not running"):
            await committer.submit(1)
        hold.set()
        await closing
        assert first.result() == "done-0"
        assert apply.batches == [[0]]

    run(scenario)


def test_submit_before_start_raises() -> None:
    async def scenario() -> None:
        committer: GroupCommitter[int, str] = GroupCommitter(Apply())
        with pytest.raises(RuntimeError, match="not running"):
            await committer.submit(1)

    run(scenario)


def test_enqueued_operations_share_a_batch_and_each_future_carries_its_own_result_or_error() -> None:
    async def scenario() -> None:
        apply = Apply(fail_on=frozenset({3}))
        committer = await started(apply)
        futures = [committer.enqueue(op) for op in (1, 2, 3)]
        await asyncio.wait(futures)
        assert [f.result() for f in futures[:2]] == ["done-1", "done-2"]
        with pytest.raises(ValueError, match=r"cannot write \[3\]"):
            futures[2].result()
        assert apply.batches[0] == [1, 2, 3], "one batch for the three, in the order they came"
        assert await committer.submit(4) == "done-4"
        await committer.close()

    run(scenario)


def test_enqueue_refuses_at_once_when_the_committer_is_closing() -> None:
    async def scenario() -> None:
        committer = await started(Apply())
        await committer.close()
        with pytest.raises(LedgerUnavailable):
            committer.enqueue(1)

    run(scenario)
