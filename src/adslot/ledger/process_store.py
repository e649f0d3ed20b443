"""A ledger store whose writes run in a writer process of their own, beside the server worker.

A server worker's event loop is busy with HTTP; a writer thread beside it would hold the same GIL for every
batch's Python work (decoding rows, resolving fires, admitting claims), and that time would come straight off
the worker's requests. Here the batch crosses a socketpair as one msgpack frame (wire.py), the writer
process applies it in one transaction and answers after the commit, so a verdict still means durable. Reads
(the inline VAST, the record) stay in the worker on its own read connection: they are single primary-key
lookups, cheaper than a hop.

If the writer process dies, the batch in flight fails (never a false success) and the next batch starts a
new writer process; the group committer retries the failed batch's operations on it one by one, and what
still fails is answered 503 (storage/failures.py).

With `socket`, the store starts no process: it dials the writer that `adslot serve --workers N` runs for all
its workers (writer_process.py, `--listen`), and after a failure dials again until that writer is back.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import logging
import os
import socket
import subprocess
import sys
import uuid
from collections.abc import Sequence
from pathlib import Path

from adslot.ledger.records import AdRequest, Operation, Verdict
from adslot.ledger.store import LedgerStore
from adslot.ledger.wire import WireError, decode_verdicts, encode_operations, read_frame, write_frame
from adslot.ledger.writer_process import READY, encode_database
from adslot.storage.failures import LedgerUnavailable

log = logging.getLogger(__name__)
START_TIMEOUT_SECONDS = 60.0
STOP_TIMEOUT_SECONDS = 30.0
DIAL_PAUSE_SECONDS = 0.05


class _Gone(RuntimeError):
    """The writer closed the connection before it answered "ready"."""


async def _handshake(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, database: bytes) -> None:
    """Name the database; the writer answers "ready" once its store is open."""
    write_frame(writer, database)
    try:
        ready = await asyncio.wait_for(read_frame(reader), START_TIMEOUT_SECONDS)
    except (asyncio.IncompleteReadError, ConnectionError) as exc:
        raise _Gone("the ledger writer process did not start (see its log above)") from exc
    except TimeoutError as exc:
        raise RuntimeError("the ledger writer process did not start (see its log above)") from exc
    if ready != READY:
        raise RuntimeError(f"the ledger writer process answered {ready!r} instead of ready")


class ProcessLedgerStore:
    def __init__(
        self, reads: LedgerStore, database_url: str, schema: str | None, socket: Path | None = None
    ) -> None:
        self._reads = reads
        self._database = encode_database(database_url, schema)
        self._socket = socket
        self._process: subprocess.Popen[bytes] | None = None
        self._reader: asyncio.StreamReader | None = None
        self._writer: asyncio.StreamWriter | None = None
        self._lock = asyncio.Lock()
        self._closed = False
        self._waiting: collections.deque[asyncio.Future[bytes]] = collections.deque()
        """One future per batch sent and not yet answered, in the order sent: the writer process answers in
        that order, so several batches can be in flight and the pipe never has to go idle between them."""
        self._answers: asyncio.Task[None] | None = None

    async def start(self) -> None:
        await self._reads.start()
        await self._spawn()

    async def _spawn(self) -> None:
        if self._socket is not None:
            self._reader, self._writer = await self._dial(self._socket, self._database)
        else:
            ours, theirs = socket.socketpair()
            try:
                self._process = subprocess.Popen(
                    [sys.executable, "-m", "adslot.ledger.writer_process", str(theirs.fileno())],
                    pass_fds=(theirs.fileno(),),
                    env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)},
                )
            finally:
                theirs.close()
            self._reader, self._writer = await asyncio.open_connection(sock=ours)
            try:
                await _handshake(self._reader, self._writer, self._database)
            except BaseException:
                await self._drop()
                raise
        self._answers = asyncio.get_running_loop().create_task(
            self._read_answers(self._reader, self._waiting), name="adslot-ledger-answers"
        )

    @staticmethod
    async def _dial(path: Path, database: bytes) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        """Connect to the shared writer, waiting while it starts or is restarted by `adslot serve`.

        A writer that was just killed may still take a connection in the instant before its listening
        socket closes, then reset it: that counts as not there yet, like a refused connection.
        """
        loop = asyncio.get_running_loop()
        deadline = loop.time() + START_TIMEOUT_SECONDS
        while True:
            try:
                reader, writer = await asyncio.open_unix_connection(str(path))
            except (FileNotFoundError, ConnectionError):
                pass
            else:
                try:
                    await _handshake(reader, writer, database)
                    return reader, writer
                except _Gone:
                    writer.close()
            if loop.time() > deadline:
                raise RuntimeError(f"no ledger writer answers at {path}")
            if not path.parent.is_dir():
                # Removed by `adslot serve` on its way out, or by its last writer if it died: none will come.
                raise RuntimeError(f"the shared ledger writers at {path.parent} are gone")
            await asyncio.sleep(DIAL_PAUSE_SECONDS)

    @staticmethod
    async def _read_answers(
        reader: asyncio.StreamReader, waiting: collections.deque[asyncio.Future[bytes]]
    ) -> None:
        """Hand each answer frame to the batch that waits for it; when the stream ends, fail the rest."""
        try:
            while True:
                frame = await read_frame(reader)
                if not waiting:
                    raise WireError("the ledger writer process answered a batch nobody sent")
                waiter = waiting.popleft()
                if not waiter.done():  # a cancelled wait: its answer is read and dropped, in step
                    waiter.set_result(frame)
        except (asyncio.IncompleteReadError, ConnectionError, WireError) as exc:
            error = LedgerUnavailable("the ledger writer process exited during a batch")
            error.__cause__ = exc
            while waiting:
                waiter = waiting.popleft()
                if not waiter.done():
                    waiter.set_exception(error)

    async def close(self) -> None:
        """After the group committer's drain: the writer process gets EOF after the last batch and exits."""
        self._closed = True
        async with self._lock:
            await self._drop()
        await self._reads.close()

    async def _drop(self) -> None:
        """Close our end (the writer process finishes the batch in hand, then exits) and reap it."""
        writer, process, answers = self._writer, self._process, self._answers
        self._reader = self._writer = self._process = self._answers = None
        if answers is not None:
            answers.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await answers
        error = LedgerUnavailable("the ledger writer process was stopped during a batch")
        while self._waiting:
            waiter = self._waiting.popleft()
            if not waiter.done():
                waiter.set_exception(error)
        if writer is not None:
            writer.close()
            with contextlib.suppress(ConnectionError):
                await writer.wait_closed()
        if process is not None:
            loop = asyncio.get_running_loop()
            try:
                await asyncio.wait_for(loop.run_in_executor(None, process.wait), STOP_TIMEOUT_SECONDS)
            except TimeoutError:
                log.error("the ledger writer process did not exit; killing it")
                process.kill()
                await loop.run_in_executor(None, process.wait)

    @property
    def shared_socket(self) -> Path | None:
        """The shared writer's socket this store dials, or None when it starts a writer process of its own."""
        return self._socket

    def process(self) -> subprocess.Popen[bytes] | None:
        """The current writer process (for health checks and tests)."""
        return self._process

    def writer_pid(self) -> int | None:
        return None if self._process is None else self._process.pid

    async def get(self, ad_request_id: uuid.UUID) -> AdRequest | None:
        return await self._reads.get(ad_request_id)

    async def get_many(self, ids: Sequence[uuid.UUID]) -> list[AdRequest | None]:
        return await self._reads.get_many(ids)

    def _alive(self) -> bool:
        return (
            self._writer is not None
            and (self._socket is not None or (self._process is not None and self._process.poll() is None))
            and self._answers is not None
            and not self._answers.done()
        )

    async def apply(self, operations: Sequence[Operation]) -> list[Verdict]:
        if self._closed:
            raise LedgerUnavailable("the ledger store is closed")
        if not self._alive():
            async with self._lock:  # one new writer process, however many batches find the old one gone
                if not self._alive():
                    await self._drop()
                    try:
                        await self._spawn()
                    except Exception as exc:
                        raise LedgerUnavailable(f"no ledger writer to take the batch: {exc}") from exc
        assert self._writer is not None
        waiter: asyncio.Future[bytes] = asyncio.get_running_loop().create_future()
        # Appended and written with no await in between, so the futures stay in the order of the frames.
        self._waiting.append(waiter)
        write_frame(self._writer, encode_operations(operations))
        return decode_verdicts(await waiter)
