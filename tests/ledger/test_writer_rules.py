"""The writer's rules without a database: which frames go into a transaction, and what each is answered."""

from __future__ import annotations

import uuid
from collections.abc import Sequence

import pytest

from adslot.ledger.records import AlreadyAnswered, Fire, Operation, Receipt, Verdict
from adslot.ledger.wire import Stamp, WireError, decode_verdicts, encode_batch, encode_verdicts, resent
from adslot.ledger.writer_rules import Item, answer_blocking, one_per_client
from adslot.storage.failures import LedgerUnavailable, OutcomeUnknown

A, B, C = "a", "b", "c"


def test_each_client_gets_one_batch_into_the_next_transaction_and_the_rest_wait_in_order() -> None:
    items: list[Item[str]] = [(A, b"a1"), (B, b"b1"), (A, b"a2"), (C, b"c1"), (B, b"b2"), (A, b"a3")]
    now, later = one_per_client(items)
    assert now == [(A, b"a1"), (B, b"b1"), (C, b"c1")]
    assert later == [(A, b"a2"), (B, b"b2"), (A, b"a3")]
    now, later = one_per_client(later)
    assert now == [(A, b"a2"), (B, b"b2")]
    assert later == [(A, b"a3")]


def test_a_client_that_left_is_closed_only_after_its_last_batch() -> None:
    now, later = one_per_client([(A, b"a1"), (A, b"a2"), (A, None), (B, b"b1"), (B, None)])
    assert now == [(A, b"a1"), (B, b"b1"), (B, None)]
    assert later == [(A, b"a2"), (A, None)]
    now, later = one_per_client(later)
    assert now == [(A, b"a2"), (A, None)] and later == []


def test_wake_ups_are_dropped() -> None:
    assert one_per_client([(None, None), (A, b"a1"), (None, None)]) == ([(A, b"a1")], [])


def _frame(seq: int, *events: str, again: bool = False) -> bytes:
    frame = encode_batch(
        Stamp(b"w" * 16, seq, 0, False), [Fire(uuid.uuid4(), e, "wrapper", 0) for e in events]
    )
    return resent(frame) if again else frame


class _Ledger:
    """Answers as a store would, from plain dicts: what it has stored per seq, what it refuses to apply."""

    def __init__(self, stored: dict[int, bytes] | None = None, refuse: set[str] | None = None) -> None:
        self.stored = stored or {}
        self.refuse = refuse or set()
        self.applied: list[list[int]] = []
        """The seqs of each apply() call, a transaction each."""
        self.lookups_fail = False
        self.lose_next: str | None = None
        """"after commit" or "before commit": the next apply()'s connection goes away then."""

    def answer(self, client: bytes, seq: int) -> bytes | None:
        if self.lookups_fail:
            raise LedgerUnavailable("the database is gone")
        return self.stored.get(seq)

    def apply(self, operations: Sequence[Operation], receipts: Sequence[Receipt]) -> list[bytes]:
        self.applied.append([r.seq for r in receipts])
        events = {op.event for op in operations if isinstance(op, Fire)}
        if events & self.refuse:
            raise AlreadyAnswered(f"refused: {sorted(events & self.refuse)}")
        if any(r.seq in self.stored for r in receipts):
            raise AlreadyAnswered("a frame was committed before")
        answers = [encode_verdicts([Verdict("counted", r.seq)] * (r.stop - r.start)) for r in receipts]
        lost, self.lose_next = self.lose_next, None
        if lost != "before commit":
            self.stored |= {r.seq: answer for r, answer in zip(receipts, answers, strict=True)}
        if lost is not None:
            raise OutcomeUnknown(f"the connection went away {lost}")
        return answers


def _outcomes(reply: bytes) -> list[tuple[str, int | None]]:
    return [(v.outcome, v.expires_at) for v in decode_verdicts(reply)]


def test_frames_are_applied_together_and_each_client_gets_its_own_verdicts() -> None:
    ledger = _Ledger()
    replies = answer_blocking(
        [(A, _frame(1, "start")), (B, _frame(2, "impression", "complete"))], ledger.answer, ledger.apply
    )
    assert ledger.applied == [[1, 2]]
    assert [(c, _outcomes(r)) for c, r in replies] == [
        (A, [("counted", 1)]),
        (B, [("counted", 2), ("counted", 2)]),
    ]


def test_answers_come_back_in_frame_order_whatever_became_of_each_frame() -> None:
    """A worker matches answers to batches by order, and one transaction may carry several of its batches:
    an unreadable or resent frame between applied ones keeps its place."""
    stored = encode_verdicts([Verdict("counted", 7)])
    ledger = _Ledger(stored={2: stored})
    frames = [
        (A, _frame(1, "start")),
        (A, b"garbage"),
        (A, _frame(2, "start", again=True)),
        (A, _frame(3, "x")),
    ]
    replies = [reply for _, reply in answer_blocking(frames, ledger.answer, ledger.apply)]
    assert ledger.applied == [[1, 3]]
    assert _outcomes(replies[0]) == [("counted", 1)]
    with pytest.raises(WireError):
        decode_verdicts(replies[1])
    assert replies[2] == stored
    assert _outcomes(replies[3]) == [("counted", 3)]


def test_a_batch_that_fails_the_merged_transaction_fails_alone_and_the_others_commit() -> None:
    ledger = _Ledger(refuse={"midpoint"})
    replies = dict(
        answer_blocking(
            [(A, _frame(1, "start")), (B, _frame(2, "midpoint")), (C, _frame(3, "complete"))],
            ledger.answer,
            ledger.apply,
        )
    )
    assert ledger.applied == [[1, 2, 3], [1], [2], [3]]
    assert _outcomes(replies[A]) == [("counted", 1)] and _outcomes(replies[C]) == [("counted", 3)]
    with pytest.raises(WireError, match="refused"):
        decode_verdicts(replies[B])


def test_an_unreadable_frame_fails_alone() -> None:
    ledger = _Ledger()
    replies = dict(answer_blocking([(A, b"garbage"), (B, _frame(2, "start"))], ledger.answer, ledger.apply))
    assert ledger.applied == [[2]]
    with pytest.raises(WireError):
        decode_verdicts(replies[A])
    assert _outcomes(replies[B]) == [("counted", 2)]


def test_a_resent_frame_committed_before_gets_its_stored_answer_and_is_not_applied_again() -> None:
    first = encode_verdicts([Verdict("counted", 7)])
    ledger = _Ledger(stored={1: first})
    replies = answer_blocking(
        [(A, _frame(1, "start", again=True)), (B, _frame(2, "start", again=True))],
        ledger.answer,
        ledger.apply,
    )
    assert replies[0] == (A, first)
    assert ledger.applied == [[2]], "only the resend no commit answered is applied"


def test_a_resent_frame_failing_on_what_its_first_copy_committed_meanwhile_gets_that_answer() -> None:
    first = encode_verdicts([Verdict("counted", 7)])
    ledger = _Ledger(refuse={"start"})
    lookups = iter([None, first])  # not committed when first asked; committed by the time it failed

    def answer(client: bytes, seq: int) -> bytes | None:
        return next(lookups)

    assert answer_blocking([(A, _frame(1, "start", again=True))], answer, ledger.apply) == [(A, first)]


def test_a_resent_frame_whose_lookup_fails_gets_the_failure_and_nothing_is_applied() -> None:
    ledger = _Ledger()
    ledger.lookups_fail = True
    ((client, reply),) = answer_blocking([(A, _frame(1, "start", again=True))], ledger.answer, ledger.apply)
    assert client == A and ledger.applied == []
    with pytest.raises(LedgerUnavailable, match="the database is gone"):
        decode_verdicts(reply)


def test_an_error_that_is_not_the_stores_is_raised_not_answered() -> None:
    def apply(operations: Sequence[Operation], receipts: Sequence[Receipt]) -> list[bytes]:
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        answer_blocking([(A, _frame(1, "start"))], _Ledger().answer, apply)


def test_frames_of_a_transaction_whose_commit_was_lost_get_their_stored_answers_not_applied_again() -> None:
    ledger = _Ledger()
    ledger.lose_next = "after commit"
    replies = dict(
        answer_blocking([(A, _frame(1, "start")), (B, _frame(2, "midpoint"))], ledger.answer, ledger.apply)
    )
    assert ledger.applied == [[1, 2]]
    assert replies == {A: ledger.stored[1], B: ledger.stored[2]}
    assert _outcomes(replies[A]) == [("counted", 1)] and _outcomes(replies[B]) == [("counted", 2)]


def test_frames_of_a_transaction_lost_before_its_commit_are_each_applied_again_alone() -> None:
    ledger = _Ledger()
    ledger.lose_next = "before commit"
    replies = dict(answer_blocking([(A, _frame(1, "start"))], ledger.answer, ledger.apply))
    assert ledger.applied == [[1], [1]], "a lone frame too: the worker must not retry it op by op"
    assert _outcomes(replies[A]) == [("counted", 1)]


def test_a_lost_commit_committed_while_its_frame_was_applied_again_gets_that_commits_answer() -> None:
    ledger = _Ledger()
    ledger.lose_next = "after commit"
    lookups = 0

    def answer(client: bytes, seq: int) -> bytes | None:
        nonlocal lookups
        lookups += 1
        return None if lookups == 1 else ledger.stored.get(seq)  # at first, the lost one had not finished

    ((_, reply),) = answer_blocking([(A, _frame(1, "start"))], answer, ledger.apply)
    assert ledger.applied == [[1], [1]] and reply == ledger.stored[1]


def test_a_lost_commit_the_database_cannot_be_asked_about_is_answered_unknown_and_not_applied_again() -> None:
    ledger = _Ledger()
    ledger.lose_next = "after commit"
    ledger.lookups_fail = True
    ((_, reply),) = answer_blocking([(A, _frame(1, "start"))], ledger.answer, ledger.apply)
    assert ledger.applied == [[1]]
    with pytest.raises(OutcomeUnknown, match="cannot be checked"):
        decode_verdicts(reply)
