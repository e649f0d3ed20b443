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
batch never fails another's (writer_rules.py). On SQLite, which writes one transaction at a time, both kinds
of writer run a blocking loop (writer_loop.py); on PostgreSQL the asyncio Applier below overlaps batches in
concurrent lanes.

It ignores SIGINT and SIGTERM: its workers decide when it stops. A per-worker writer exits when its worker
closes the socket (after the last batch, or by dying). A listening writer stops accepting when its standard
input closes (the `adslot serve` that started it is done or dead) and exits once every worker has gone.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
import socket
import sys
from pathlib import Path

import msgspec

try:
    import uvloop
except ImportError:  # pragma: no cover - uvloop is not built for Windows
    uvloop = None  # type: ignore[assignment]

from adslot.collector import settle_heap
from adslot.ledger.sqlite_store import SqliteLedgerStore
from adslot.ledger.store import DatabaseLedgerStore
from adslot.ledger.stores import store_for
from adslot.ledger.wire import (
    READY,
    WireError,
    encode_error,
    framed,
    read_frame,
    read_frame_from,
    write_frame,
)
from adslot.ledger.writer_loop import WriterLoop
from adslot.ledger.writer_rules import Item, answer_async, one_per_client

__all__ = ["READY", "Applier", "encode_database", "main"]
log = logging.getLogger("adslot.ledger.writer_process")
Database = tuple[str, str | None]
_database: msgspec.msgpack.Decoder[Database] = msgspec.msgpack.Decoder(Database)
Client = asyncio.StreamWriter


def decode_database(frame: bytes) -> Database:
    return _database.decode(frame)


def encode_database(url: str, schema: str | None) -> bytes:
    return msgspec.msgpack.encode((url, schema))


POSTGRES_LANES = 4
"""Batches a writer applies at once on PostgreSQL, each in its own transaction on its own connection.

A PostgreSQL batch spends most of its time waiting for round trips and the commit, not on CPU (measured with
`python -m bench.profile --postgres`), so one lane left the machine idle. Row locks, taken in one fixed
order, keep concurrent transactions correct, as they do for several adslot nodes on one database."""


class Applier:
    """Queues every client's batch frames in arrival order and writes what has gathered as one batch, in
    POSTGRES_LANES concurrent lanes; answers leave in the order the batches were taken. PostgreSQL only:
    SQLite writes one transaction at a time, and its writers run the blocking WriterLoop instead."""

    def __init__(self, store: DatabaseLedgerStore, database: bytes) -> None:
        self._store = store
        self._database = database
        self._loop = asyncio.get_running_loop()
        self._lanes = asyncio.Semaphore(POSTGRES_LANES)
        self._answered: asyncio.Future[None] = self._loop.create_future()
        """Set once the latest batch's answers are written (each batch's answers wait for the one before)."""
        self._answered.set_result(None)
        self._answering: set[asyncio.Task[None]] = set()
        self._queue: asyncio.Queue[Item[Client]] = asyncio.Queue()
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
        backlog: list[Item[Client]] = []
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
                self._begin(frames)
            else:
                self._lanes.release()
            for client, frame in items:
                if client is not None and frame is None:
                    await self._answered  # its last batch's answer goes out before its socket closes
                    client.close()
                    self._clients -= 1
        await self._answered

    def _begin(self, frames: list[tuple[Client, bytes]]) -> None:
        """Apply `frames` in a lane of their own; their answers leave after the previous batch's."""
        previous, self._answered = self._answered, self._loop.create_future()
        task = self._loop.create_task(self._answer(frames, previous, self._answered))
        self._answering.add(task)
        task.add_done_callback(self._answering.discard)

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
        return await answer_async(frames, self._store.answer, self._store.apply_frames)


async def _opened(database: bytes) -> DatabaseLedgerStore:
    store = store_for(*decode_database(database))
    await store.start()
    settle_heap()  # its long-lived start-up objects frozen, its batches in flight not taken for garbage
    return store


async def serve(sock: socket.socket) -> None:
    """The writer of the one worker at the other end of `sock`."""
    sock.setblocking(True)
    with sock.makefile("rb") as stream:
        database = read_frame_from(stream)
    # The worker sends nothing more before "ready": nothing past the database frame was read.
    if database is None:
        return  # the worker went away before it named a database
    store = await _opened(database)
    try:
        if isinstance(store, SqliteLedgerStore):
            sock.sendall(framed(READY))
            writer_loop = WriterLoop(store, database)
            writer_loop.attach(sock)
            writer_loop.run()
            return
        # PostgreSQL: the Applier's lanes overlap this worker's batches.
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
    with os.fdopen(control, "rb") as pipe:
        database = read_frame_from(pipe)  # nothing else is sent on it: nothing past the frame is read
        if database is None:
            return
        store = await _opened(database)
        try:
            path.unlink(missing_ok=True)  # a socket left by a writer that was killed
            if isinstance(store, SqliteLedgerStore):
                listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
                listener.bind(str(path))
                listener.listen(128)
                writer_loop = WriterLoop(store, database)
                writer_loop.listen(listener, pipe.fileno())
                os.write(announce, READY + b"\n")
                writer_loop.run()
            else:
                await _serve_listening_lanes(store, database, path, pipe.fileno(), announce)
        finally:
            path.unlink(missing_ok=True)
            with contextlib.suppress(OSError):
                path.parent.rmdir()  # the last writer out, if `adslot serve` died before it could
            await store.close()


async def _serve_listening_lanes(
    store: DatabaseLedgerStore, database: bytes, path: Path, control: int, announce: int
) -> None:
    loop = asyncio.get_running_loop()
    control_reader = asyncio.StreamReader()
    await loop.connect_read_pipe(
        lambda: asyncio.StreamReaderProtocol(control_reader), os.fdopen(os.dup(control), "rb", buffering=0)
    )
    applier = Applier(store, database)
    running = loop.create_task(applier.run())
    server = await asyncio.start_unix_server(applier.accept, path=str(path))
    os.write(announce, READY + b"\n")
    await control_reader.read()  # until end of file: the server is done, or gone
    server.close()
    applier.stop()
    await running


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
