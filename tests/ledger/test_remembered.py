"""What a ledger writer remembers of its own committed rows, and when it forgets."""

from __future__ import annotations

import gc
import tracemalloc
import uuid

from adslot.ledger.remembered import Remembered, after, issued
from adslot.ledger.resolve import NO_TIMES, TIME_INDEX, Current, RowChange
from tests.ledger.stores import record, times_of

A = uuid.UUID(int=1)
B = uuid.UUID(int=2)
IMPRESSION, START = TIME_INDEX["impression_at"], TIME_INDEX["start_at"]


def state(fired: int = 0, **times: int) -> Current:
    return Current(1000, times_of(times), 5, None, None, fired)


def test_a_change_sets_each_event_time_once_and_the_settlement_once() -> None:
    before = Current(1000, times_of({"impression_at": 10}), 5, '{"c":1}', None)
    change = RowChange(set_times={"impression_at": 99, "start_at": 12}, settled_at=50, settle_reason="played")
    new = after(before, change)
    assert new.times[IMPRESSION] == 10 and new.times[START] == 12
    assert new.settle_reason == "played" and new.claims == '{"c":1}' and new.account_id == 5
    assert before.times[START] is None, "the state it was given is left as it was"
    settled = Current(1000, NO_TIMES, 5, None, "released")
    assert after(settled, RowChange(settle_reason="expired")).settle_reason == "released"


def test_a_change_adds_its_fired_bits_to_the_stored_ones() -> None:
    before = state(fired=0b01)
    new = after(before, RowChange(fired=0b10))
    assert new.fired == 0b11 and new.times is before.times, "an echo sets a bit and no time"
    assert after(new, RowChange(fired=0b01)).fired == 0b11


def test_a_change_of_counters_only_leaves_the_state_as_it_was() -> None:
    before = state(impression_at=10)
    assert after(before, RowChange(duplicates=3, late=1)) is before
    assert after(before, None) is before


def test_an_issued_ad_request_is_remembered_unfired_and_unsettled() -> None:
    made = record()
    new = issued(made, '{"k":1}')
    assert new == Current(made.expires_at, NO_TIMES, made.account_id, '{"k":1}', None, 0)


def test_committed_states_are_found_and_the_rest_must_be_read() -> None:
    memory = Remembered()
    memory.check(1)
    memory.commit({A: state()}, {A: RowChange(set_times={"impression_at": 7}, fired=1)}, [])
    found, missing = memory.states([A, B])
    assert found == {A: state(impression_at=7, fired=1)} and missing == [B]


def test_a_merged_commit_adds_its_change_to_what_a_batch_committed_meanwhile() -> None:
    """Two batches resolved on the same remembered state, each counting its own event: the one remembered
    second must not take back the first one's fire."""
    memory = Remembered()
    memory.commit({}, {}, [(A, state())])
    (resolved_on,), _ = memory.states([A])
    memory.commit({A: resolved_on}, {A: RowChange(set_times={"impression_at": 7}, fired=1)}, [], merge=True)
    memory.commit({A: resolved_on}, {A: RowChange(set_times={"start_at": 8}, fired=4)}, [], merge=True)
    found, _ = memory.states([A])
    assert found[A] == state(impression_at=7, start_at=8, fired=5)


def test_an_unmerged_commit_remembers_the_state_it_was_given_with_its_change() -> None:
    """A batch that read and locked its rows knows them as committed: that is what it remembers."""
    memory = Remembered()
    memory.commit({}, {}, [(A, state(fired=1, impression_at=7))])
    memory.commit({A: state()}, {A: RowChange(set_times={"start_at": 8}, fired=4)}, [])
    found, _ = memory.states([A])
    assert found[A] == state(start_at=8, fired=4)


def test_a_merged_commit_on_a_forgotten_row_remembers_the_state_it_was_given_with_its_change() -> None:
    memory = Remembered()
    memory.commit(
        {A: state(fired=1, impression_at=7)},
        {A: RowChange(set_times={"start_at": 8}, fired=4)},
        [],
        merge=True,
    )
    found, _ = memory.states([A])
    assert found[A] == state(impression_at=7, start_at=8, fired=5)


def test_another_writers_commit_makes_it_forget_everything() -> None:
    memory = Remembered()
    memory.check(1)
    memory.commit({A: state()}, {A: RowChange(fired=1)}, [(B, state())])
    memory.check(1)
    assert len(memory) == 2
    memory.check(2)
    assert len(memory) == 0
    assert memory.states([A, B]) == ({}, [A, B])


def test_dropping_ad_requests_forgets_only_them() -> None:
    memory = Remembered()
    memory.commit({}, {}, [(A, state()), (B, state(fired=2))])
    memory.drop([A, uuid.uuid4()])
    assert memory.states([A, B]) == ({B: state(fired=2)}, [A])


def test_a_failed_batch_makes_it_forget_everything_even_at_the_same_version() -> None:
    memory = Remembered()
    memory.check(1)
    memory.commit({A: state()}, {}, [])
    memory.forget()
    memory.check(1)
    assert memory.states([A]) == ({}, [A])


def test_beyond_its_limit_the_rows_written_longest_ago_are_forgotten_first() -> None:
    memory = Remembered(limit=2)
    memory.check(1)
    ids = [uuid.UUID(int=n) for n in range(1, 4)]
    memory.commit({}, {}, [(ids[0], state()), (ids[1], state())])
    memory.commit({ids[0]: state()}, {}, [])  # written again: now the newest
    memory.commit({}, {}, [(ids[2], state())])
    found, missing = memory.states(ids)
    assert set(found) == {ids[0], ids[2]} and missing == [ids[1]]


def test_unfired_states_share_one_tuple_of_times() -> None:
    first, second = issued(record(), None), issued(record(), None)
    assert first.times is second.times is NO_TIMES and set(NO_TIMES) == {None}
    fired = after(first, RowChange(set_times={"impression_at": 3}))
    assert fired.times[IMPRESSION] == 3 and first.times[IMPRESSION] is None and NO_TIMES[IMPRESSION] is None


def test_what_it_remembers_leaves_the_garbage_collectors_sight_after_two_collections() -> None:
    """Every waiting request would feel a full collection that walks 100,000 remembered ad requests. (A
    collection untracks a row's tuple of times first and the row itself in the next.)"""
    memory = Remembered()
    memory.check(1)
    made = [record() for _ in range(50)]
    memory.commit({}, {}, [(r.id, issued(r, '{"k":1}')) for r in made])
    fired = {r.id: state() for r in made[:10]}
    memory.commit(fired, {i: RowChange(set_times={"start_at": 4}, fired=4) for i in fired}, [])
    gc.collect()
    gc.collect()
    rows = memory._rows
    assert len(rows) == 50 and not any(gc.is_tracked(row) for row in rows.values())
    assert memory.states([made[0].id])[0][made[0].id].times[START] == 4


def test_a_repeat_keeps_the_remembered_row_and_makes_it_the_newest() -> None:
    memory = Remembered(limit=2)
    memory.check(1)
    memory.commit({}, {}, [(A, state(start_at=4, fired=4)), (B, state())])
    found, _ = memory.states([A])
    row = memory._rows[A.int]
    memory.commit(found, {A: RowChange(duplicates=1)}, [])  # a repeat: only a counter moved
    assert memory._rows[A.int] is row
    memory.commit({}, {}, [(uuid.UUID(int=3), state())])  # B, now the oldest, is forgotten
    found, missing = memory.states([A, B])
    assert found == {A: state(start_at=4, fired=4)} and missing == [B]


def test_equal_states_are_kept_once() -> None:
    memory = Remembered()
    memory.check(1)
    made = [record() for _ in range(3)]
    memory.commit({}, {}, [(r.id, issued(r, None)) for r in made])
    fired = {r.id: issued(r, None) for r in made[:2]}
    memory.commit(fired, {i: RowChange(set_times={"impression_at": 7}, fired=1) for i in fired}, [])
    rows = [memory._rows[r.id.int] for r in made]
    assert rows[0] is rows[1] and rows[0] != rows[2], "the two fired in the same second share one state"
    assert memory.states([made[2].id])[0][made[2].id] == issued(made[2], None)


def test_a_remembered_ad_request_costs_about_a_hundred_bytes_with_its_key() -> None:
    """A million must fit in ~100 MB: the dict entry and its key, a uuid's integer, which the compiled uuid
    type makes anew on each `.int` (tracemalloc counts it here; with uuid.UUID's own int, made before the
    trace, it counted ~56 of the ~96 bytes)."""
    made = [(r.id, issued(r, None)) for r in (record() for _ in range(50_000))]
    memory = Remembered()
    memory.check(1)
    tracemalloc.start()
    try:
        for start in range(0, len(made), 500):
            memory.commit({}, {}, made[start : start + 500])
        used, _ = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert len(memory) == 50_000 and used / 50_000 < 100


def test_beyond_its_limit_the_oldest_eighth_is_forgotten_at_once() -> None:
    memory = Remembered(limit=16)
    memory.check(1)
    ids = [uuid.UUID(int=n) for n in range(1, 18)]
    memory.commit({}, {}, [(i, state()) for i in ids[:16]])
    assert len(memory) == 16
    memory.commit({ids[0]: state()}, {}, [(ids[16], state())])  # the first written again: now the newest
    found, missing = memory.states(ids)
    assert missing == ids[1:4] and len(found) == 14 == len(memory), "down to seven eighths of 16"
