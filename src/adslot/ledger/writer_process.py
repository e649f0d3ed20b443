"""The ledger writer process: applies the batches its server workers send, and answers their verdicts.

Two ways to start it, one protocol. `python -m adslot.ledger.writer_process FD` serves the one worker that
started it over a socketpair (ProcessLedgerStore's own writer). `python -m adslot.ledger.writer_process
--listen PATH` is the writer that `adslot serve --workers N` starts once per environment for all its workers:
it reads its database from standard input, listens on a Unix socket, and answers "ready" on standard output.

Each client's first frame names its database (msgpack: url, schema), answered "ready". The batch frames
that arrive while one transaction is being written, one per client (a worker's next batch waits for the next
transaction, so it always has one in flight), are applied together in the next, and each is answered (its
own verdicts, in its own order) only after that commit: several workers pay one commit for all their batches
instead of taking turns. If the merged batch fails, each frame is applied on its own, so one worker's bad
batch never fails another's. A per-worker SQLite writer has nothing to overlap (one client, one transaction
at a time), so it answers in a plain blocking loop instead (answer_until_closed).

It ignores SIGINT and SIGTERM: its workers decide when it stops. A per-worker writer exits when its worker
closes the socket (after the last batch, or by dying). A listening writer stops accepting when its standard
input closes (the `adslot serve` that started it is done or dead) and exits once every worker has gone.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import logging
import os
import signal
import socket
import sys
from collections.abc import Coroutine, Sequence
from pathlib import Path
from typing import BinaryIO

import msgspec

try:
    import uvloop
except ImportError:  # pragma: no cover - uvloop is not built for Windows
    uvloop = None  # type: ignore[assignment]

from adslot.ledger.records import Operation, Receipt
from adslot.ledger.sqlite_store import SqliteLedgerStore
from adslot.ledger.store import DatabaseLedgerStore
from adslot.ledger.stores import store_for
from adslot.ledger.wire import (
    Stamp,
    WireError,
    decode_batch,
    encode_error,
    framed,
    read_frame,
    read_frame_from,
    write_frame,
)
from adslot.storage.failures import unavailable

log = logging.getLogger("adslot.ledger.writer_process")
READY = b"ready"
Database = tuple[str, str | None]
_database: msgspec.msgpack.Decoder[Database] = msgspec.msgpack.Decoder(Database)
Client = asyncio.StreamWriter


def decode_database(frame: bytes) -> Database:
    return _database.decode(frame)


def encode_database(url: str, schema: str | None) -> bytes:
    return msgspec.msgpack.encode((url, schema))


Item = tuple[Client | None, bytes | None]
"""(client, batch frame); frame None: the client has gone, close it once its batches are answered; client
None: only a wake-up."""


def one_per_client(items: list[Item]) -> tuple[list[Item], list[Item]]:
    """(what the next transaction takes, what waits for the one after), each in arrival order.

    One batch per client a transaction: a worker keeps batches in flight so that its next one waits at the
    writer while this one commits; taking them all into one commit would leave it nothing in flight.
    """
    now: list[Item] = []
    later: list[Item] = []
    taken: set[Client] = set()
    waiting: set[Client] = set()
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


def _failure(exc: Exception) -> bytes:
    """The answer to a batch that failed: the worker's group committer then retries it op by op, and
    answers what still fails with a 503 when the database cannot serve now, else a 500."""
    return encode_error(f"{type(exc).__name__}: {exc}", unavailable=unavailable(exc))


def receipt(stamp: Stamp, start: int, stop: int) -> Receipt:
    return Receipt(stamp.client, stamp.seq, stamp.at, start, stop)


POSTGRES_LANES = 4
"""Batches a writer applies at once on PostgreSQL, each in its own transaction on its own connection.

A PostgreSQL batch spends most of its time waiting for round trips and the commit, not on CPU (measured with
`python -m bench.profile --postgres`), so one lane left the machine idle. Row locks, taken in one fixed
order, keep concurrent transactions correct, as they do for several adslot nodes on one database."""


def lanes_for(store: DatabaseLedgerStore) -> int:
    """SQLite takes one writer at a time; PostgreSQL takes concurrent transactions."""
    return 1 if isinstance(store, SqliteLedgerStore) else POSTGRES_LANES


class Applier:
    """Queues every client's batch frames in arrival order and writes what has gathered as one batch,
    in as many concurrent lanes as the store takes; answers leave in the order the batches were taken."""

    def __init__(self, store: DatabaseLedgerStore, database: bytes) -> None:
        self._store = store
        self._database = database
        self._loop = asyncio.get_running_loop()
        lanes = lanes_for(store)
        self._one_lane = lanes == 1
        self._lanes = asyncio.Semaphore(lanes)
        self._answered: asyncio.Future[None] = self._loop.create_future()
        """Set once the latest batch's answers are written (each batch's answers wait for the one before)."""
        self._answered.set_result(None)
        self._answering: set[asyncio.Task[None]] = set()
        self._queue: asyncio.Queue[Item] = asyncio.Queue()
        self._clients = 0
        self._stopping = False
        self._readers: set[asyncio.Task[None]] = set()

    async def accept(self, reader: asyncio.StreamReader, writer: Client) -> None:
        """A new client: check that it names this writer's database, then read its batches."""
        try:
            hello = await read_frame(reader)
        except (asyncio.IncompleteReadError, ConnectionError, WireError):
            writer.close()
            return
        if hello != self._database:
            write_frame(writer, encode_error("this ledger writer serves another database"))
            with contextlib.suppress(ConnectionError):
                await writer.drain()
            writer.close()
            return
        self.attach(reader, writer)
        write_frame(writer, READY)
        with contextlib.suppress(ConnectionError):
            await writer.drain()

    def attach(self, reader: asyncio.StreamReader, writer: Client) -> None:
        self._clients += 1
        task = self._loop.create_task(self._read(reader, writer))
        self._readers.add(task)
        task.add_done_callback(self._readers.discard)

    async def _read(self, reader: asyncio.StreamReader, writer: Client) -> None:
        try:
            while True:
                self._queue.put_nowait((writer, await read_frame(reader)))
        except (asyncio.IncompleteReadError, ConnectionError, WireError):
            pass  # the client closed its end (drained) or died: nothing more will come
        finally:
            self._queue.put_nowait((writer, None))  # after its last batch: answered, then closed

    def stop(self) -> None:
        """Finish with the clients there are, then return from run()."""
        self._stopping = True
        self._queue.put_nowait((None, None))

    async def run(self) -> None:
        backlog: list[Item] = []
        while not (self._stopping and self._clients == 0):
            if not backlog:
                backlog.append(await self._queue.get())
            await self._lanes.acquire()  # a free lane: what arrived while waiting for it joins this batch
            if self._clients > 1:
                await asyncio.sleep(0)  # let every other client's reader queue what has already arrived
            while not self._queue.empty():
                backlog.append(self._queue.get_nowait())
            items, backlog = one_per_client(backlog)
            frames = [(client, frame) for client, frame in items if client is not None and frame is not None]
            if frames:
                inline = self._begin(frames)
                if inline is not None:
                    await inline
            else:
                self._lanes.release()
            for client, frame in items:
                if client is not None and frame is None:
                    await self._answered  # its last batch's answer goes out before its socket closes
                    client.close()
                    self._clients -= 1
        await self._answered

    def _begin(self, frames: list[tuple[Client, bytes]]) -> Coroutine[None, None, None] | None:
        """Apply `frames` in a lane of their own; their answers leave after the previous batch's.

        With one lane (SQLite) it returns the work for run() to await in place: no task per batch."""
        previous, self._answered = self._answered, self._loop.create_future()
        answer = self._answer(frames, previous, self._answered)
        if self._one_lane:
            return answer
        task = self._loop.create_task(answer)
        self._answering.add(task)
        task.add_done_callback(self._answering.discard)
        return None

    async def _answer(
        self, frames: list[tuple[Client, bytes]], previous: asyncio.Future[None], done: asyncio.Future[None]
    ) -> None:
        try:
            replies = await self._replies(frames)
            # A client matches answers to batches by order, and lanes may commit out of order.
            await previous
            for client, reply in replies:
                write_frame(client, reply)
            for client in {client for client, _ in frames}:
                with contextlib.suppress(ConnectionError):
                    await client.drain()
        except BaseException:
            # No answer will come for these batches: end their clients' streams, so that their workers fail
            # the batches in flight (never a false success) and dial or start a writer again.
            log.exception("ledger batch could not be answered; closing its clients")
            for client, _ in frames:
                client.close()
            raise
        finally:
            self._lanes.release()
            done.set_result(None)

    async def _replies(self, frames: list[tuple[Client, bytes]]) -> list[tuple[Client, bytes]]:
        """Each frame's answer: its verdicts once the batch is committed, the answer stored for a resent
        frame that was committed before, or the error that failed it."""
        replies: list[tuple[Client, bytes]] = []
        batches: list[tuple[Client, Stamp, list[Operation]]] = []
        for client, frame in frames:
            try:
                stamp, ops = decode_batch(frame)
            except Exception as exc:  # a frame this writer cannot read fails alone
                log.exception("unreadable ledger batch")
                replies.append((client, _failure(exc)))
                continue
            try:
                stored = await self._stored(stamp) if stamp.resent else None
            except Exception as exc:
                replies.append((client, await self._failed(stamp, exc)))
                continue
            if stored is not None:
                replies.append((client, stored))
            else:
                batches.append((client, stamp, ops))
        if not batches:
            return replies
        receipts: list[Receipt] = []
        start = 0
        for _, stamp, ops in batches:
            receipts.append(receipt(stamp, start, start + len(ops)))
            start += len(ops)
        try:
            answers = await self._apply([op for _, _, ops in batches for op in ops], receipts)
        except Exception as exc:
            if len(batches) == 1:
                # The worker's group committer retries the batch op by op.
                client, stamp, _ = batches[0]
                replies.append((client, await self._failed(stamp, exc)))
            else:
                for client, stamp, ops in batches:
                    replies.append((client, await self._alone(stamp, ops)))
        else:
            replies.extend((client, answer) for (client, _, _), answer in zip(batches, answers, strict=True))
        return replies

    async def _alone(self, stamp: Stamp, ops: list[Operation]) -> bytes:
        try:
            (answer,) = await self._apply(ops, [receipt(stamp, 0, len(ops))])
            return answer
        except Exception as exc:
            return await self._failed(stamp, exc)

    async def _failed(self, stamp: Stamp, exc: Exception) -> bytes:
        """A resent frame whose first copy was committed meanwhile (its writer not quite gone, or another
        lane of this one) failed on what that commit wrote (AlreadyAnswered, or the primary key of the ad
        request it issues): it gets that commit's answer."""
        if stamp.resent:
            try:
                stored = await self._stored(stamp)
            except Exception:
                stored = None  # the database that failed the frame cannot be asked either: its failure stands
            if stored is not None:
                return stored
        log.error("ledger batch failed", exc_info=exc)
        return _failure(exc)

    async def _apply(self, operations: Sequence[Operation], receipts: Sequence[Receipt]) -> list[bytes]:
        """Each receipt's answer frame, once committed."""
        store = self._store
        # Nothing else runs in this process: SQLite's batch needs no hop to its writer thread.
        if isinstance(store, SqliteLedgerStore):
            return store.apply_frames_blocking(operations, receipts)
        return await store.apply_frames(operations, receipts)

    async def _stored(self, stamp: Stamp) -> bytes | None:
        store = self._store
        if isinstance(store, SqliteLedgerStore):
            return store.answer_blocking(stamp.client, stamp.seq)
        return await store.answer(stamp.client, stamp.seq)


async def _opened(database: bytes) -> DatabaseLedgerStore:
    store = store_for(*decode_database(database))
    await store.start()
    gc.freeze()  # the process's long-lived start-up objects: full collections need not walk them again
    return store


def answer_until_closed(stream: BinaryIO, sock: socket.socket, store: SqliteLedgerStore) -> None:
    """Apply and answer each batch of the one worker at the other end, until it closes its end.

    SQLite writes one transaction at a time and a per-worker writer has one client, so nothing here can
    overlap: a blocking loop does the Applier's work for one frame without an event loop pass, task or future
    per batch (its Python overhead was ~1/5 of this process's CPU per pixel, sampled)."""
    try:
        while (frame := read_frame_from(stream)) is not None:
            sock.sendall(framed(_reply_blocking(store, frame)))
    except (WireError, ConnectionError) as exc:
        # The worker died mid-frame or before its answer: its batch in flight fails there (never a false
        # success), and its next batch starts a new writer.
        log.warning("the worker's end of the ledger stream broke (%s); this writer stops", exc)


def _reply_blocking(store: SqliteLedgerStore, frame: bytes) -> bytes:
    """Applier._replies for one frame, on SQLite, without an event loop."""
    try:
        stamp, ops = decode_batch(frame)
    except Exception as exc:
        log.exception("unreadable ledger batch")
        return _failure(exc)
    try:
        if stamp.resent and (stored := store.answer_blocking(stamp.client, stamp.seq)) is not None:
            return stored
        (answer,) = store.apply_frames_blocking(ops, [receipt(stamp, 0, len(ops))])
        return answer
    except Exception as exc:
        # As Applier._failed: a resent frame its first writer, not quite gone, committed meanwhile.
        if stamp.resent:
            try:
                stored = store.answer_blocking(stamp.client, stamp.seq)
            except Exception:
                stored = None  # the database that failed the frame cannot be asked either: its failure stands
            if stored is not None:
                return stored
        log.error("ledger batch failed", exc_info=exc)  # the worker's group committer retries it op by op
        return _failure(exc)


async def serve(sock: socket.socket) -> None:
    """The writer of the one worker at the other end of `sock`."""
    sock.setblocking(True)
    with sock.makefile("rb") as stream:
        database = read_frame_from(stream)
        if database is None:
            return  # the worker went away before it named a database
        store = await _opened(database)
        try:
            if isinstance(store, SqliteLedgerStore):
                sock.sendall(framed(READY))
                answer_until_closed(stream, sock, store)
                return
            # PostgreSQL: the Applier's lanes overlap this worker's batches (the worker sends nothing more
            # before "ready", so the stream has read no further than the database frame).
            sock.setblocking(False)
            reader, writer = await asyncio.open_connection(sock=sock)
            applier = Applier(store, database)
            applier.attach(reader, writer)
            write_frame(writer, READY)
            await writer.drain()
            applier.stop()  # no other client will come: done when this one leaves
            await applier.run()
        finally:
            await store.close()


async def serve_listening(path: Path, control: int, announce: int) -> None:
    """The writer of every worker of one `adslot serve`: database from `control`, which closes at the end."""
    loop = asyncio.get_running_loop()
    control_reader = asyncio.StreamReader()
    await loop.connect_read_pipe(
        lambda: asyncio.StreamReaderProtocol(control_reader), os.fdopen(control, "rb", buffering=0)
    )
    database = await read_frame(control_reader)
    store = await _opened(database)
    try:
        applier = Applier(store, database)
        running = loop.create_task(applier.run())
        path.unlink(missing_ok=True)  # a socket left by a writer that was killed
        server = await asyncio.start_unix_server(applier.accept, path=str(path))
        os.write(announce, READY + b"\n")
        await control_reader.read()  # until end of file: the server is done, or gone
        server.close()
        applier.stop()
        await running
    finally:
        path.unlink(missing_ok=True)
        with contextlib.suppress(OSError):
            path.parent.rmdir()  # the last writer out, if `adslot serve` died before it could
        await store.close()


def main(argv: list[str]) -> int:
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    logging.basicConfig(level=logging.INFO, format="%(levelname)s adslot ledger writer: %(message)s")
    if argv[1:2] == ["--listen"]:
        job = serve_listening(Path(argv[2]), sys.stdin.fileno(), sys.stdout.fileno())
    else:
        job = serve(socket.socket(fileno=int(argv[1])))
    # uvloop where installed (every platform but Windows, as for `adslot serve`), else asyncio's own loop.
    with asyncio.Runner(loop_factory=uvloop.new_event_loop if uvloop else None) as runner:
        runner.run(job)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
