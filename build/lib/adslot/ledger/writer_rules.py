"""The ledger writer's rules, free of I/O: which batch frames go into its next transaction, and what each is
answered.

The writer loop (writer_loop.py) answers frames by these rules: a frame that cannot be decoded fails alone;
a resent frame committed before gets its stored answer; the rest are applied together, and if that fails,
each alone, so one worker's bad batch never fails another's; a resent frame that fails on what its first
copy committed meanwhile gets that copy's answer. A transaction whose connection went away while it may have
been committing (OutcomeUnknown) is settled here, where its frames' stored answers tell: each frame
committed gets its answer, the others are applied again alone, and only a frame the database cannot be asked
about goes back to its worker as unknown (a 503 its group committer never retries: it could count the frame
twice). `plan` states those rules once, as a generator that yields what it needs from the store (`Stored`,
`Apply`) and is sent the result (or thrown the store's exception); `answer_blocking` drives it.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Generator, Sequence
from typing import Any, Generic, NamedTuple, TypeVar

from adslot.ledger.records import Operation, Receipt
from adslot.ledger.wire import Stamp, decode_batch, encode_error
from adslot.storage.failures import OutageLog, OutcomeUnknown, unavailable

log = logging.getLogger("adslot.ledger.writer_process")
outages = OutageLog(log)
C = TypeVar("C")


class Stored(NamedTuple):
    """Ask the store for the answer committed for this stamp's frame (bytes, or None if none was)."""

    stamp: Stamp


class Apply(NamedTuple):
    """Ask the store to apply these operations in one transaction, storing each receipt's answer frame, and
    to return those frames."""

    operations: Sequence[Operation]
    receipts: Sequence[Receipt]


Ask = Stored | Apply
Plan = Generator[Ask, Any, list[tuple[C, bytes]]]


Item = tuple[C | None, bytes | None]
"""(client, batch frame); frame None: the client has gone, close it once its batches are answered; client
None: only a wake-up."""


def one_per_client(items: list[Item[C]]) -> tuple[list[Item[C]], list[Item[C]]]:
    """(what the next transaction takes, what waits for the one after), each in arrival order.

    One batch per client a transaction: a worker keeps batches in flight so that its next one waits at the
    writer while this one commits; taking them all into one commit would leave it nothing in flight.
    """
    now: list[Item[C]] = []
    later: list[Item[C]] = []
    taken: set[C] = set()
    waiting: set[C] = set()
    for client, frame in items:
        if client is None:
            continue
        if client in waiting or (frame is not None and client in taken):
            waiting.add(client)
            later.append((client, frame))
        else:
            if frame is not None:
                taken.add(client)
            now.append((client, frame))
    return now, later


def failure(exc: Exception) -> bytes:
    """The answer to a batch that failed: the worker's group committer then retries it op by op, and
    answers what still fails with a 503 when the database cannot serve now, else a 500; a batch that may
    have been committed is not retried (a 503)."""
    return encode_error(
        f"{type(exc).__name__}: {exc}", unavailable=unavailable(exc), unknown=isinstance(exc, OutcomeUnknown)
    )


def receipt(stamp: Stamp, start: int, stop: int) -> Receipt:
    return Receipt(stamp.client, stamp.seq, stamp.at, start, stop)


class _Batch(NamedTuple):
    place: int
    """Where the frame was in the transaction: its answer goes back in that place."""
    stamp: Stamp
    operations: list[Operation]


def plan(frames: Sequence[tuple[C, bytes]]) -> Plan[C]:
    """(client, answer) for each of `frames`, in their order, whatever became of each frame: a worker matches
    answers to its batches by order."""
    replies: list[bytes] = [b""] * len(frames)
    batches: list[_Batch] = []
    for index, (_, frame) in enumerate(frames):
        try:
            stamp, operations = decode_batch(frame)
        except Exception as exc:  # a frame this writer cannot read fails alone
            log.exception("unreadable ledger batch")
            replies[index] = failure(exc)
            continue
        try:
            stored = (yield Stored(stamp)) if stamp.resent else None
        except Exception as exc:
            replies[index] = yield from _failed(stamp, exc)
            continue
        if stored is not None:
            replies[index] = stored
        else:
            batches.append(_Batch(index, stamp, operations))
    if batches:
        receipts: list[Receipt] = []
        start = 0
        for batch in batches:
            receipts.append(receipt(batch.stamp, start, start + len(batch.operations)))
            start += len(batch.operations)
        try:
            answers = yield Apply([op for batch in batches for op in batch.operations], receipts)
        except Exception as exc:
            unknown = isinstance(exc, OutcomeUnknown)
            if len(batches) == 1 and not unknown:  # the worker's group committer retries it op by op
                replies[batches[0].place] = yield from _failed(batches[0].stamp, exc)
            else:
                for batch in batches:
                    replies[batch.place] = yield from _alone(batch, unknown)
        else:
            for batch, answer in zip(batches, answers, strict=True):
                replies[batch.place] = answer
    return [(client, reply) for (client, _), reply in zip(frames, replies, strict=True)]


def _alone(batch: _Batch, maybe_committed: bool = False) -> Generator[Ask, Any, bytes]:
    """`maybe_committed`: the transaction that held it may have been committed (OutcomeUnknown), which is
    what a resent frame's stamp says: it is answered as one, its stored answer looked for first."""
    stamp = batch.stamp
    if maybe_committed:
        stamp = stamp._replace(resent=True)
        try:
            stored = yield Stored(stamp)
        except Exception as exc:
            log.error("ledger batch's outcome unknown", exc_info=exc)
            return failure(OutcomeUnknown(f"a ledger batch's commit was lost and cannot be checked: {exc}"))
        if stored is not None:
            return bytes(stored)
    try:
        (answer,) = yield Apply(batch.operations, [receipt(stamp, 0, len(batch.operations))])
        return bytes(answer)
    except Exception as exc:
        return (yield from _failed(stamp, exc))


def _failed(stamp: Stamp, exc: Exception) -> Generator[Ask, Any, bytes]:
    """A resent frame whose first copy was committed meanwhile (its writer not quite gone, or another lane
    of this one) failed on what that commit wrote (AlreadyAnswered, or the primary key of the ad request it
    issues): it gets that commit's answer."""
    if stamp.resent:
        try:
            stored = yield Stored(stamp)
        except Exception:
            stored = None  # the database that failed the frame cannot be asked either: its failure stands
        if stored is not None:
            return bytes(stored)
    outages.failed("a ledger batch", exc)
    return failure(exc)


class _Steps(Generic[C]):
    """A plan being run: `ask` is what it waits for (None once done, with `replies` set)."""

    def __init__(self, frames: Sequence[tuple[C, bytes]]) -> None:
        self._steps = plan(frames)
        self.ask: Ask | None = None
        self.replies: list[tuple[C, bytes]] = []
        self._advance(lambda: next(self._steps))

    def send(self, result: object) -> None:
        self._advance(lambda: self._steps.send(result))

    def throw(self, exc: Exception) -> None:
        self._advance(lambda: self._steps.throw(exc))

    def _advance(self, step: Callable[[], Ask]) -> None:
        try:
            self.ask = step()
        except StopIteration as done:
            self.ask = None
            self.replies = done.value


def answer_blocking(
    frames: Sequence[tuple[C, bytes]],
    stored: Callable[[bytes, int], bytes | None],
    apply: Callable[[Sequence[Operation], Sequence[Receipt]], list[bytes]],
) -> list[tuple[C, bytes]]:
    """Run plan(frames) against a store's blocking calls: stored(client, seq), apply(operations, receipts)."""
    steps = _Steps(frames)
    while (ask := steps.ask) is not None:
        try:
            if isinstance(ask, Stored):
                result: object = stored(ask.stamp.client, ask.stamp.seq)
            else:
                result = apply(ask.operations, ask.receipts)
        except Exception as exc:
            steps.throw(exc)
        else:
            steps.send(result)
    return steps.replies
