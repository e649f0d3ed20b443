"""The pure Proof-of-Play rules applied to a batch of fires."""

from __future__ import annotations

import uuid

from adslot.ledger.records import Fire
from adslot.ledger.resolve import Current, candidates, first_fire_times, resolve

A = uuid.UUID(int=1)
B = uuid.UUID(int=2)
EMPTY = {
    c: None
    for c in (
        "impression_at",
        "start_at",
        "first_quartile_at",
        "midpoint_at",
        "third_quartile_at",
        "complete_at",
    )
}


def current(expires_at: int = 1000, **times: int) -> Current:
    return Current(expires_at, EMPTY | times)


def outcomes(
    fires: list[Fire], state: dict[uuid.UUID, Current], fresh: set[tuple[uuid.UUID, str, str]]
) -> list[str]:
    return [v.outcome for v in resolve(fires, state, fresh)[0]]


def test_first_fire_counts_and_its_repeat_in_the_same_batch_is_a_duplicate() -> None:
    fires = [Fire(A, "impression", "wrapper", 10), Fire(A, "impression", "wrapper", 11)]
    verdicts, changes = resolve(fires, {A: current()}, {(A, "impression", "wrapper")})
    assert [v.outcome for v in verdicts] == ["counted", "duplicate"]
    assert changes[A].set_times == {"impression_at": 10} and changes[A].duplicates == 1


def test_a_fire_already_stored_is_a_duplicate() -> None:
    assert outcomes([Fire(A, "start", "wrapper", 10)], {A: current(start_at=5)}, set()) == ["duplicate"]


def test_the_other_layers_first_fire_is_an_echo_not_a_count() -> None:
    fires = [Fire(A, "complete", "wrapper", 10), Fire(A, "complete", "inline", 10)]
    fresh = {(A, "complete", "wrapper"), (A, "complete", "inline")}
    assert outcomes(fires, {A: current()}, fresh) == ["counted", "echo"]
    assert outcomes(
        [Fire(A, "complete", "inline", 12)], {A: current(complete_at=10)}, {(A, "complete", "inline")}
    ) == ["echo"]


def test_fires_after_expiry_are_late_and_never_counted_and_unknown_ids_are_unknown() -> None:
    fires = [Fire(A, "impression", "wrapper", 1001), Fire(B, "impression", "wrapper", 5)]
    verdicts, changes = resolve(fires, {A: current(expires_at=1000)}, set())
    assert [(v.outcome, v.expires_at) for v in verdicts] == [("late", 1000), ("unknown", None)]
    assert changes[A].late == 1 and changes[A].set_times == {} and B not in changes


def test_a_fire_at_the_expiry_second_still_counts() -> None:
    fire = Fire(A, "midpoint", "wrapper", 1000)
    assert outcomes([fire], {A: current(expires_at=1000)}, {(A, "midpoint", "wrapper")}) == ["counted"]


def test_candidates_are_known_timely_and_unique_with_their_first_time() -> None:
    fires = [
        Fire(A, "start", "wrapper", 7),
        Fire(A, "start", "wrapper", 9),
        Fire(B, "start", "wrapper", 7),
        Fire(A, "complete", "wrapper", 2000),
    ]
    keys = candidates(fires, {A: current(expires_at=1000)})
    assert keys == [(A, "start", "wrapper")]
    assert first_fire_times(fires, keys) == [7]
