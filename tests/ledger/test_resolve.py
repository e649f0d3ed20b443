"""The pure Proof-of-Play rules applied to a batch of fires."""

from __future__ import annotations

import uuid

from adslot.ledger.records import FIRE_BITS, Fire, Release
from adslot.ledger.resolve import (
    Current,
    RowChange,
    counter_moves,
    resolve,
    resolve_releases,
    resolve_settles,
)
from adslot.ledger.store import Batch
from tests.ledger.stores import times_of

A = uuid.UUID(int=1)
B = uuid.UUID(int=2)


def current(expires_at: int = 1000, fired: int = 0, **times: int) -> Current:
    return Current(expires_at, times_of(times), fired=fired)


def bit(event: str, layer: str = "wrapper") -> int:
    return FIRE_BITS[event, layer]


def outcomes(fires: list[Fire], state: dict[uuid.UUID, Current]) -> list[str]:
    return [v.outcome for v in resolve(fires, state)[0]]


def test_every_event_and_layer_has_its_own_bit() -> None:
    assert len(FIRE_BITS) == 12 and sorted(FIRE_BITS.values()) == [1 << n for n in range(12)]
    assert bit("impression") == 1 and bit("impression", "inline") == 2 and bit("complete", "inline") == 2048


def test_first_fire_counts_sets_its_bit_and_its_repeat_in_the_same_batch_is_a_duplicate() -> None:
    fires = [Fire(A, "impression", "wrapper", 10), Fire(A, "impression", "wrapper", 11)]
    verdicts, changes = resolve(fires, {A: current()})
    assert [v.outcome for v in verdicts] == ["counted", "duplicate"]
    assert changes[A].set_times == {"impression_at": 10} and changes[A].duplicates == 1
    assert changes[A].fired == bit("impression")


def test_a_fire_whose_bit_is_stored_is_a_duplicate() -> None:
    assert outcomes([Fire(A, "start", "wrapper", 10)], {A: current(start_at=5, fired=bit("start"))}) == [
        "duplicate"
    ]


def test_the_other_layers_first_fire_is_an_echo_not_a_count() -> None:
    fires = [Fire(A, "complete", "wrapper", 10), Fire(A, "complete", "inline", 10)]
    assert outcomes(fires, {A: current()}) == ["counted", "echo"]
    stored = current(complete_at=10, fired=bit("complete"))
    assert outcomes([Fire(A, "complete", "inline", 12)], {A: stored}) == ["echo"]


def test_an_echo_writes_only_its_bit_and_a_repeat_only_its_counter() -> None:
    fires = [
        Fire(A, "complete", "inline", 12),  # echo: the wrapper's fire already set complete_at
        Fire(B, "start", "wrapper", 12),  # duplicate
    ]
    state = {A: current(complete_at=10, fired=bit("complete")), B: current(start_at=5, fired=bit("start"))}
    verdicts, changes = resolve(fires, state)
    assert [v.outcome for v in verdicts] == ["echo", "duplicate"]
    assert changes[A].fired == bit("complete", "inline") and changes[A].set_times == {}
    assert changes[B].fired == 0 and changes[B].duplicates == 1
    batch = Batch.of(fires)
    batch.current = state
    batch.resolve([])
    assert [ident for ident, _ in batch.row_changes()] == [A, B]
    assert not RowChange().writes
    assert RowChange(set_times={"start_at": 1}).writes and RowChange(late=1).writes
    assert RowChange(fired=4).writes
    settled = RowChange()
    settled.settle(5, "expired")
    assert settled.writes


def test_fires_after_expiry_are_late_never_counted_nor_stored_and_unknown_ids_are_unknown() -> None:
    fires = [Fire(A, "impression", "wrapper", 1001), Fire(B, "impression", "wrapper", 5)]
    verdicts, changes = resolve(fires, {A: current(expires_at=1000)})
    assert [(v.outcome, v.expires_at) for v in verdicts] == [("late", 1000), ("unknown", None)]
    assert changes[A].late == 1 and changes[A].set_times == {} and B not in changes
    assert changes[A].fired == 0


def test_a_fire_at_the_expiry_second_still_counts() -> None:
    fire = Fire(A, "midpoint", "wrapper", 1000)
    assert outcomes([fire], {A: current(expires_at=1000)}) == ["counted"]


# --- released ad requests, early releases and the expiry settle ------------------------------------------

CLAIMS = '[["c1:life:plays",1]]'


def owned(
    account_id: int = 5,
    claims: str | None = CLAIMS,
    settle_reason: str | None = None,
    fired: int = 0,
    **times: int,
) -> Current:
    return Current(1000, times_of(times), account_id, claims, settle_reason, fired)


def test_a_fire_in_time_on_a_released_ad_request_is_released_kept_as_late_and_not_counted() -> None:
    fires = [Fire(A, "impression", "wrapper", 10), Fire(A, "complete", "inline", 11)]
    state = {A: owned(settle_reason="released")}
    verdicts, changes = resolve(fires, state)
    assert [(v.outcome, v.expires_at) for v in verdicts] == [("released", 1000), ("released", 1000)]
    assert changes[A].late == 2 and changes[A].set_times == {}
    assert changes[A].fired == 0  # never stored as fires


def test_a_fire_after_expiry_on_a_released_ad_request_is_late_as_any_other() -> None:
    assert outcomes([Fire(A, "impression", "wrapper", 1001)], {A: owned(settle_reason="released")}) == [
        "late"
    ]


def test_fires_on_ad_requests_settled_as_expired_or_played_follow_the_usual_rules() -> None:
    fire = Fire(A, "impression", "wrapper", 999)
    assert outcomes([fire], {A: owned(settle_reason="expired")}) == ["counted"]
    played = owned(settle_reason="played", impression_at=5, fired=bit("impression"))
    assert outcomes([fire], {A: played}) == ["duplicate"]


def release_outcomes(
    releases: list[Release],
    state: dict[uuid.UUID, Current],
    changes: dict[uuid.UUID, RowChange] | None = None,
) -> tuple[list[str], dict[uuid.UUID, RowChange]]:
    changes = {} if changes is None else changes
    return [v.outcome for v in resolve_releases(releases, state, changes)], changes


def test_an_unplayed_ad_request_released_in_time_is_settled_as_released() -> None:
    result, changes = release_outcomes([Release(A, 5, 500)], {A: owned()})
    assert result == ["released"]
    assert (changes[A].settled_at, changes[A].settle_reason) == (500, "released")


def test_releasing_twice_in_one_batch_or_across_batches_is_already_released() -> None:
    assert release_outcomes([Release(A, 5, 500), Release(A, 5, 501)], {A: owned()})[0] == [
        "released",
        "already_released",
    ]
    assert release_outcomes([Release(A, 5, 500)], {A: owned(settle_reason="released")})[0] == [
        "already_released"
    ]


def test_a_played_ad_request_cannot_be_released() -> None:
    result, changes = release_outcomes([Release(A, 5, 500)], {A: owned(impression_at=400)})
    assert result == ["played"] and A not in changes


def test_a_release_behind_an_impression_counted_in_the_same_batch_is_played() -> None:
    state = {A: owned()}
    _, changes = resolve([Fire(A, "impression", "wrapper", 10)], state)
    result, changes = release_outcomes([Release(A, 5, 11)], state, changes)
    assert result == ["played"] and changes[A].settle_reason is None


def test_a_release_after_expiry_is_late_and_settles_the_ad_request_as_expired() -> None:
    result, changes = release_outcomes([Release(A, 5, 1001)], {A: owned()})
    assert result == ["late"]
    assert (changes[A].settled_at, changes[A].settle_reason) == (1001, "expired")
    already, changes = release_outcomes([Release(A, 5, 1001)], {A: owned(settle_reason="expired")})
    assert already == ["late"] and A not in changes


def test_another_accounts_or_a_missing_ad_request_is_unknown_alike() -> None:
    result, changes = release_outcomes([Release(A, 6, 500), Release(B, 5, 500)], {A: owned(account_id=5)})
    assert result == ["unknown", "unknown"] and changes == {}


def test_the_sweep_settles_played_as_played_unplayed_as_expired_and_skips_the_settled() -> None:
    C = uuid.UUID(int=3)
    D = uuid.UUID(int=4)
    state = {A: owned(impression_at=7), B: owned(), C: owned(settle_reason="released"), D: owned()}
    changes: dict[uuid.UUID, RowChange] = {}
    resolve_releases([Release(D, 5, 900)], state, changes)
    assert resolve_settles([A, B, C, D], state, changes, 2000) == 2
    assert (changes[A].settle_reason, changes[B].settle_reason) == ("played", "expired")
    assert changes[A].settled_at == changes[B].settled_at == 2000
    assert C not in changes and changes[D].settle_reason == "released"


def test_reservations_move_only_when_an_ad_request_is_settled_played_released_or_expired() -> None:
    C = uuid.UUID(int=3)
    D = uuid.UUID(int=4)
    E = uuid.UUID(int=5)
    F = uuid.UUID(int=6)
    state = {
        A: owned(claims='[["a",1]]'),
        B: owned(claims='[["b",1]]'),
        C: owned(claims='[["c",1]]', impression_at=3),
        D: owned(claims='[["d",1]]', settle_reason="expired"),
        E: owned(claims=None),
        F: owned(claims='[["f",1]]'),
    }
    changes = {
        A: RowChange(set_times={"impression_at": 10}),  # counted: it delivers when it is settled
        B: RowChange(settled_at=20, settle_reason="released"),
        C: RowChange(settled_at=20, settle_reason="played"),
        D: RowChange(set_times={"impression_at": 999}),  # settled before: it holds nothing any more
        E: RowChange(settled_at=20, settle_reason="expired"),
        F: RowChange(settled_at=20, settle_reason="expired"),
    }
    assert counter_moves(state, changes) == (['[["c",1]]'], ['[["b",1]]', '[["f",1]]'])
