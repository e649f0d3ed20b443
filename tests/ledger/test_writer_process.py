"""The writer process: what it answers frame by frame, resent frames, a worker that dies mid-frame."""

from __future__ import annotations

import asyncio
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

import pytest

from adslot.environment import prepare_database
from adslot.ledger.backends import database_store
from adslot.ledger.records import Fire, Issue, NoFill, Operation
from adslot.ledger.sqlite_store import SqliteLedgerStore
from adslot.ledger.wire import (
    Stamp,
    WireError,
    decode_verdicts,
    encode_batch,
    framed,
    read_frame_from,
    resent,
)
from adslot.ledger.writer_loop import WriterLoop
from adslot.ledger.writer_process import READY, encode_database
from adslot.storage.tables import ledger_answers
from tests.conftest import free_port, make_settings
from tests.ledger.conftest import migrated
from tests.ledger.stores import PLAY, LedgerDatabase, record

pytestmark = pytest.mark.slow("subprocess")  # a real writer process per test


async def _until(condition: Callable[[], bool], seconds: float = 5.0) -> None:
    deadline = asyncio.get_running_loop().time() + seconds
    while not condition():
        assert asyncio.get_running_loop().time() < deadline, "timed out"
        await asyncio.sleep(0.01)


def batch(operations: Sequence[Operation], seq: int = 1, client: bytes = b"w" * 16) -> bytes:
    """A batch frame as a worker's ProcessLedgerStore sends it."""
    return encode_batch(Stamp(client, seq, PLAY, False), operations)


def _fires(*events: str) -> bytes:
    return batch([Fire(uuid.uuid4(), event, "wrapper", 0) for event in events])


def answers_of_the_sqlite_writer(tmp_path: Path, sent: bytes) -> list[bytes]:
    """What a per-worker SQLite writer answers to `sent`, the whole stream of a worker that then closes its
    end; returns once the writer's loop has ended."""
    settings, _ = make_settings(tmp_path, "sqlite", free_port())
    env = settings.environment("production")
    prepare_database(env)

    async def scenario() -> list[bytes]:
        store = database_store(env.database_url, env.database_schema)
        await store.start()
        assert isinstance(store, SqliteLedgerStore)
        ours, theirs = socket.socketpair()
        ours.sendall(sent)
        ours.shutdown(socket.SHUT_WR)  # the worker closes its end after its last batch
        writer_loop = WriterLoop(store, b"db")
        writer_loop.attach(theirs)
        writer_loop.run()
        assert theirs.fileno() < 0, "closed once its last batch was answered"
        await store.close()
        with ours, ours.makefile("rb") as answers:
            return list(iter(lambda: read_frame_from(answers), None))

    return asyncio.run(scenario())


def test_the_sqlite_writer_of_one_worker_answers_batch_by_batch_and_an_unreadable_one_alone(
    tmp_path: Path,
) -> None:
    issued = record()
    fire = Fire(issued.id, "impression", "wrapper", PLAY)
    batches = (batch([Issue(issued)], 1), b"not a batch", batch([fire, fire], 3))
    issue_answer, unreadable, fires = answers_of_the_sqlite_writer(tmp_path, b"".join(map(framed, batches)))
    assert [v.outcome for v in decode_verdicts(issue_answer)] == ["issued"]
    with pytest.raises(WireError, match="the ledger writer process failed the batch"):
        decode_verdicts(unreadable)
    assert [v.outcome for v in decode_verdicts(fires)] == ["counted", "duplicate"]


def test_the_sqlite_writer_of_one_worker_stops_quietly_when_its_worker_dies_mid_frame(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    sent = framed(batch([Issue(record())])) + framed(b"cut short")[:6]
    (answer,) = answers_of_the_sqlite_writer(tmp_path, sent)
    assert [v.outcome for v in decode_verdicts(answer)] == ["issued"]
    assert "stream broke" in caplog.text


@pytest.fixture(scope="module")
def ledger_database(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LedgerDatabase]:
    """SQLite's: a writer process serves SQLite's ledger only (PostgreSQL's is written from the workers)."""
    yield from migrated("sqlite", tmp_path_factory)


class RawWriter:
    """A real writer process, started as ProcessLedgerStore starts one, spoken to frame by frame."""

    def __init__(self, db: LedgerDatabase) -> None:
        ours, theirs = socket.socketpair()
        self.process = subprocess.Popen(
            [sys.executable, "-m", "adslot.ledger.writer_process", str(theirs.fileno())],
            pass_fds=(theirs.fileno(),),
        )
        theirs.close()
        self.sock = ours
        self.stream = ours.makefile("rb")
        ours.sendall(framed(encode_database(db.env.database_url, db.env.database_schema)))
        assert read_frame_from(self.stream) == READY

    def send(self, frame: bytes) -> None:
        self.sock.sendall(framed(frame))

    def receive(self) -> bytes:
        answer = read_frame_from(self.stream)
        assert answer is not None
        return answer

    def ask(self, frame: bytes) -> bytes:
        self.send(frame)
        return self.receive()

    def kill(self) -> None:
        self.process.kill()
        self.process.wait(30)
        self.stream.close()
        self.sock.close()


def test_a_resent_frame_is_answered_as_first_committed_by_a_new_writer_and_never_applied_twice(
    db: LedgerDatabase,
) -> None:
    """What a worker does when its writer dies before answering: it sends the frame again, marked as resent,
    to a new writer, which answers from ledger_answers if the first committed it and applies it if not."""
    issued = record()
    issue = batch([Issue(issued), NoFill("lobby", "s2", PLAY)], seq=1)
    fire = batch([Fire(issued.id, "impression", "wrapper", PLAY + 1)], seq=2)
    start = batch([Fire(issued.id, "start", "wrapper", PLAY + 2)], seq=3)

    first = RawWriter(db)
    try:
        issue_answer, fire_answer = first.ask(issue), first.ask(fire)
    finally:
        first.kill()
    assert [v.outcome for v in decode_verdicts(fire_answer)] == ["counted"]

    second = RawWriter(db)
    try:
        assert second.ask(resent(fire)) == fire_answer  # byte for byte: "counted", not "duplicate"
        assert second.ask(resent(issue)) == issue_answer
        # Never committed by anyone: applied now, and answered from the ledger from then on.
        started = second.ask(resent(start))
        assert [v.outcome for v in decode_verdicts(started)] == ["counted"]
        assert second.ask(resent(start)) == started
    finally:
        second.kill()

    row = db.rows()[issued.id]
    assert (row["impression_at"], row["start_at"], row["duplicate_count"]) == (PLAY + 1, PLAY + 2, 0)
    assert sorted(db.stats().values()) == [(1, 0), (1, 1)], "the issue and the no-fill counted once each"


def test_a_resent_frame_racing_its_first_copy_gets_the_answer_of_the_one_that_committed_and_counts_once(
    db: LedgerDatabase,
) -> None:
    """The writer that had the frame is not gone yet (the worker's connection to it broke): it commits the
    frame while a new writer, asked with the resent copy, has found no answer yet and applies it too. The
    second commit fails on what the first wrote (the ad request's primary key), and answers with the first's
    answer instead of an error."""
    issued = record()
    frame = batch([Issue(issued), NoFill("lobby", "s2", PLAY)], seq=1)
    first, second = RawWriter(db), RawWriter(db)
    try:
        with db.write_lock():
            first.send(frame)
            time.sleep(0.3)  # the first waits for the database
            second.send(resent(frame))
            time.sleep(0.5)  # the second has looked for an answer, found none, and waits too
        first_answer, second_answer = first.receive(), second.receive()
    finally:
        first.kill()
        second.kill()
    assert [v.outcome for v in decode_verdicts(second_answer)] == ["issued", "recorded"]
    assert second_answer == first_answer  # the first holds SQLite's write turn, so it commits first
    assert list(db.rows()) == [issued.id]
    assert sorted(db.stats().values()) == [(1, 0), (1, 1)], "the issue and the no-fill counted once each"


def test_a_resent_frame_the_database_cannot_look_up_is_answered_with_the_failure_and_the_writer_serves_on(
    db: LedgerDatabase,
) -> None:
    """The lookup of a resent frame's stored answer fails as its batch does (here the table is gone): the
    worker gets an error answer (its group committer's concern), never a writer that dies on it."""
    issued = record()
    writer = RawWriter(db)
    try:
        ledger_answers.drop(db.engine)
        try:
            failed = writer.ask(resent(batch([Issue(issued)], seq=1)))
        finally:
            ledger_answers.create(db.engine)
        with pytest.raises(WireError, match="ledger_answers"):
            decode_verdicts(failed)
        assert [v.outcome for v in decode_verdicts(writer.ask(batch([Issue(issued)], seq=2)))] == ["issued"]
        assert writer.process.poll() is None
    finally:
        writer.kill()
    assert list(db.rows()) == [issued.id]
