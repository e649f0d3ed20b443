"""The SQLite writer's blocking loop on a real SQLite ledger: transactions, answers, greetings, departures."""

from __future__ import annotations

import asyncio
import os
import socket
import threading
import uuid
from collections.abc import Iterator, Sequence
from pathlib import Path

import pytest

from adslot.environment import prepare_database
from adslot.ledger.records import Fire, Issue, Operation, Receipt, Release
from adslot.ledger.sqlite_store import SqliteLedgerStore
from adslot.ledger.wire import READY, Stamp, WireError, decode_verdicts, encode_batch, framed, read_frame_from
from adslot.ledger.writer_loop import WriterLoop
from adslot.storage.database import sqlite_path
from tests.conftest import free_port, make_settings
from tests.ledger.stores import PLAY, record

DATABASE = b"the ledger's database"


class CountingStore(SqliteLedgerStore):
    """The real SQLite store, noting the frames (seqs) each transaction carried."""

    transactions: list[list[int]]

    def apply_frames_blocking(
        self, operations: Sequence[Operation], receipts: Sequence[Receipt]
    ) -> list[bytes]:
        self.transactions.append([r.seq for r in receipts])
        return super().apply_frames_blocking(operations, receipts)


@pytest.fixture
def store(tmp_path: Path) -> Iterator[CountingStore]:
    settings, _ = make_settings(tmp_path, "sqlite", free_port())
    env = settings.environment("production")
    prepare_database(env)
    ledger = CountingStore(sqlite_path(env.database_url))
    ledger.transactions = []
    asyncio.run(ledger.start())
    yield ledger
    asyncio.run(ledger.close())


def batch(seq: int, operations: Sequence[Operation], client: bytes = b"w" * 16) -> bytes:
    return framed(encode_batch(Stamp(client, seq, PLAY, False), operations))


def answers(sock: socket.socket) -> list[list[str]]:
    """Every answer until the writer closes the connection, as outcomes."""
    with sock, sock.makefile("rb") as stream:
        return [[v.outcome for v in decode_verdicts(f)] for f in iter(lambda: read_frame_from(stream), None)]


def worker(loop: WriterLoop, *frames: bytes) -> socket.socket:
    """A worker's end, attached and greeted, that has sent `frames` and then closed its sending side."""
    ours, theirs = socket.socketpair()
    loop.attach(theirs)
    ours.sendall(b"".join(frames))
    ours.shutdown(socket.SHUT_WR)
    return ours


def test_batches_of_two_workers_share_one_transaction_and_each_worker_gets_its_own_verdicts(
    store: CountingStore,
) -> None:
    loop = WriterLoop(store, DATABASE)
    first = worker(loop, batch(1, [Issue(record())], b"a" * 16))
    second = worker(loop, batch(2, [Issue(record()), Release(uuid.uuid4(), 1, PLAY)], b"b" * 16))
    loop.run()
    assert store.transactions == [[1, 2]]
    assert answers(first) == [["issued"]]
    assert answers(second) == [["issued", "unknown"]]


def test_a_worker_gets_one_batch_a_transaction_in_the_order_it_sent_them(store: CountingStore) -> None:
    a = record()
    fire = Fire(a.id, "impression", "wrapper", PLAY)
    loop = WriterLoop(store, DATABASE)
    busy = worker(loop, batch(1, [Issue(a)]), batch(2, [fire]), batch(3, [fire]))
    other = worker(loop, batch(9, [Issue(record())], b"o" * 16))
    loop.run()
    assert store.transactions == [[1, 9], [2], [3]]
    assert answers(busy) == [["issued"], ["counted"], ["duplicate"]]
    assert answers(other) == [["issued"]]


def test_a_worker_that_dies_mid_frame_is_let_go_and_the_others_are_served(
    store: CountingStore, caplog: pytest.LogCaptureFixture
) -> None:
    loop = WriterLoop(store, DATABASE)
    dying = worker(loop, batch(1, [Issue(record())]), batch(2, [Issue(record())])[:10])
    alive = worker(loop, batch(5, [Issue(record())], b"o" * 16))
    loop.run()
    assert answers(dying) == [["issued"]], "its whole frame answered, the cut one never applied"
    assert answers(alive) == [["issued"]]
    assert sorted(seq for t in store.transactions for seq in t) == [1, 5]
    assert "stream broke inside a frame" in caplog.text


def test_a_corrupt_stream_is_closed_without_applying_it(store: CountingStore) -> None:
    loop = WriterLoop(store, DATABASE)
    corrupt = worker(loop, b"\xff\xff\xff\xff and more")
    loop.run()
    assert answers(corrupt) == [] and store.transactions == []


def test_an_unreadable_batch_fails_alone_and_its_worker_is_served_on(store: CountingStore) -> None:
    loop = WriterLoop(store, DATABASE)
    sock = worker(loop, framed(b"not a batch"), batch(2, [Issue(record())]))
    loop.run()
    with sock, sock.makefile("rb") as stream:
        with pytest.raises(WireError, match="failed the batch"):
            decode_verdicts(read_frame_from(stream) or b"")
        assert [v.outcome for v in decode_verdicts(read_frame_from(stream) or b"")] == ["issued"]


def _dial(path: Path, database: bytes) -> tuple[socket.socket, bytes | None]:
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.settimeout(10)
    sock.connect(str(path))
    sock.sendall(framed(database))
    with sock.makefile("rb") as stream:
        return sock, read_frame_from(stream)


def test_a_listening_writer_greets_its_database_refuses_another_and_ends_after_its_control_and_workers(
    store: CountingStore, tmp_path: Path
) -> None:
    path = tmp_path / "writer.sock"
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(str(path))
    listener.listen(8)
    control_read, control_write = os.pipe()
    loop = WriterLoop(store, DATABASE)
    loop.listen(listener, control_read)
    running = threading.Thread(target=loop.run)
    running.start()
    try:
        stranger, refusal = _dial(path, b"another database")
        with stranger:
            assert refusal is not None
            with pytest.raises(WireError, match="serves another database"):
                decode_verdicts(refusal)
            assert stranger.recv(1) == b"", "then closed"
        member, greeting = _dial(path, DATABASE)
        assert greeting == READY
        member.sendall(batch(1, [Issue(record())]))
        os.close(control_write)  # `adslot serve` is done: no more workers, but this one is served to the end
        control_write = -1
        member.sendall(batch(2, [Issue(record())]))
        member.shutdown(socket.SHUT_WR)
        assert answers(member) == [["issued"], ["issued"]]
        running.join(10)
        assert not running.is_alive(), "ended once its control closed and its last worker left"
        with pytest.raises(OSError):
            _dial(path, DATABASE)
    finally:
        if control_write >= 0:
            os.close(control_write)
        running.join(10)
        os.close(control_read)
