"""A ledger store whose writes run in a writer process of their own, beside the server worker.

A server worker's event loop is busy with HTTP; a writer thread beside it would hold the same GIL for every
batch's Python work (decoding rows, resolving fires, admitting claims), and that time would come straight off
the worker's requests. Here the batch crosses a socketpair as one msgpack frame (wire.py), the writer
process applies it in one transaction and answers after the commit, so a verdict still means durable. Reads
(the inline VAST, the record) stay in the worker on its own read connection: they are single primary-key
lookups, cheaper than a hop.

If the writer process dies with batches in flight, the store cannot tell whether it committed them, so it
starts a new writer process and sends them again, marked as resent, in the order first sent: a batch that
was committed is answered from ledger_answers (stored in its own transaction), one that was not is applied
now, so either way it counts once and its requests get the answer it came to. If no writer can be started,
or the batches keep killing their writers, they fail with OutcomeUnknown (a 503 the player retries, never
retried here). A batch never sent fails with LedgerUnavailable, and its operations are retried one by one.

With `socket`, the store starts no process: it dials the writer that `adslot serve` runs for all
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
import time
import uuid
from collections.abc import Sequence
from pathlib import Path

from adslot.ledger.ivt import IvtConfig
from adslot.ledger.records import AdRequest, Operation, Verdict
from adslot.ledger.store import LedgerStore
from adslot.ledger.wire import (
    Stamp,
    WireError,
    decode_verdicts,
    encode_batch,
    read_frame,
    resent,
    write_frame,
)
from adslot.ledger.writer_process import READY, encode_database
from adslot.settings import MAX_BATCHES_IN_FLIGHT
from adslot.storage.failures import LedgerUnavailable, OutcomeUnknown
from adslot.tasks import stop_tasks

log = logging.getLogger(__name__)
START_TIMEOUT_SECONDS = 60.0
STOP_TIMEOUT_SECONDS = 30.0
DIAL_PAUSE_SECONDS = 0.05
RESENDS = 3
"""Writers in a row that may go away with the same batches unanswered before those fail with OutcomeUnknown:
a batch that kills every writer it reaches must not restart them forever."""


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
        self,
        reads: LedgerStore,
        database_url: str,
        schema: str | None,
        socket: Path | None = None,
        ivt: IvtConfig | None = None,
    ) -> None:
        """`ivt`: the invalid-traffic rules its writer process judges fires by (None: none)."""
        self._reads = reads
        self._database = encode_database(database_url, schema, ivt)
        self._socket = socket
        self._process: subprocess.Popen[bytes] | None = None
        self._reader: asyncio.StreamReader | None = None
        self._writer: asyncio.StreamWriter | None = None
        self._lock = asyncio.Lock()
        self._closed = False
        self._client = os.urandom(16)
        """Names this worker's frames in ledger_answers, with their sequence numbers."""
        self._seq = 0
        self._waiting: collections.deque[tuple[bytes, asyncio.Future[bytes]]] = collections.deque()
        """Each batch frame sent and not yet answered, with its future, in the order sent: the writer process
        answers in that order, so several batches can be in flight and the pipe never has to go idle
        between them; after a writer goes away they are sent again from here."""
        self._answers: asyncio.Task[None] | None = None
        self._lost = 0
        """Writers gone in a row with frames unanswered (reset by each answer)."""
        self._recovery: asyncio.Task[None] | None = None

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
            self._read_answers(self._reader), name="adslot-ledger-answers"
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

    async def _read_answers(self, reader: asyncio.StreamReader) -> None:
        """Hand each answer frame to the batch that waits for it; when the stream ends with batches
        unanswered, send them to a new writer at once."""
        waiting = self._waiting
        try:
            while True:
                frame = await read_frame(reader)
                if not waiting:
                    raise WireError("the ledger writer process answered a batch nobody sent")
                _, waiter = waiting.popleft()
                self._lost = 0
                if not waiter.done():  # a cancelled wait: its answer is read and dropped, in step
                    waiter.set_result(frame)
        except (asyncio.IncompleteReadError, ConnectionError, WireError) as exc:
            if waiting and not self._closed:
                log.warning("the ledger writer went away with %d batches unanswered (%s)", len(waiting), exc)
                self._recovery = asyncio.get_running_loop().create_task(self._recover())

    async def _recover(self) -> None:
        with contextlib.suppress(LedgerUnavailable):  # the batches in flight have failed with it
            await self._reconnect()

    async def _reconnect(self) -> None:
        """A new writer, and every unanswered frame sent to it again, before any new one."""
        async with self._lock:  # one new writer process, however many batches find the old one gone
            if self.connected():
                return
            if self._closed:  # a recovery that waited for close() to finish starts nothing
                raise LedgerUnavailable("the ledger store is closed")
            await self._drop()
            if self._waiting:
                self._lost += 1
            try:
                if self._lost > RESENDS:
                    raise RuntimeError(
                        f"{RESENDS + 1} writers in a row went away with these batches in flight"
                    )
                await self._spawn()
            except Exception as exc:
                error = OutcomeUnknown(f"ledger batches in flight when their writer went away: {exc}")
                error.__cause__ = exc
                self._fail_waiting(error)
                raise LedgerUnavailable(f"no ledger writer to take the batch: {exc}") from exc
            assert self._writer is not None
            for frame, _ in self._waiting:
                write_frame(self._writer, resent(frame))

    def _fail_waiting(self, error: Exception) -> None:
        while self._waiting:
            _, waiter = self._waiting.popleft()
            if not waiter.done():
                waiter.set_exception(error)
        self._lost = 0

    async def close(self) -> None:
        """After the group committer's drain: the writer process gets EOF after the last batch and exits."""
        self._closed = True
        async with self._lock:
            await self._drop()
            self._fail_waiting(OutcomeUnknown("the ledger store was closed with batches in flight"))
        await self._reads.close()

    async def _drop(self) -> None:
        """Close our end (the writer process finishes the batch in hand, then exits) and reap it; the frames
        it has not answered stay in _waiting."""
        writer, process, answers = self._writer, self._process, self._answers
        self._reader = self._writer = self._process = self._answers = None
        await stop_tasks(answers)
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

    def in_flight(self) -> int:
        """Batch frames sent and not yet answered."""
        return len(self._waiting)

    def writer_pid(self) -> int | None:
        return None if self._process is None else self._process.pid

    async def get(self, ad_request_id: uuid.UUID) -> AdRequest | None:
        return await self._reads.get(ad_request_id)

    async def get_many(self, ids: Sequence[uuid.UUID]) -> list[AdRequest | None]:
        return await self._reads.get_many(ids)

    def connected(self) -> bool:
        """Whether a writer is there to take the next batch (any resent ones are already on their way)."""
        return (
            self._writer is not None
            and (self._socket is not None or (self._process is not None and self._process.poll() is None))
            and self._answers is not None
            and not self._answers.done()
        )

    async def ensure_connected(self) -> None:
        """Connect to a writer now if none is, as the next batch would (for /readyz: an idle worker whose
        writer was restarted is ready again without waiting for traffic); LedgerUnavailable if none comes."""
        if self._closed:
            raise LedgerUnavailable("the ledger store is closed")
        if not self.connected():
            await self._reconnect()

    async def apply(self, operations: Sequence[Operation]) -> list[Verdict]:
        if self._closed:
            raise LedgerUnavailable("the ledger store is closed")
        if not self.connected():
            await self._reconnect()
        assert self._writer is not None
        if len(self._waiting) >= MAX_BATCHES_IN_FLIGHT:
            # Past ANSWER_SLOTS, a frame's slot in ledger_answers could still hold an unanswered one's answer.
            raise RuntimeError(f"more than {MAX_BATCHES_IN_FLIGHT} ledger batches in flight")
        self._seq += 1
        frame = encode_batch(Stamp(self._client, self._seq, int(time.time()), False), operations)
        waiter: asyncio.Future[bytes] = asyncio.get_running_loop().create_future()
        # Appended and written with no await in between, so the futures stay in the order of the frames.
        self._waiting.append((frame, waiter))
        write_frame(self._writer, frame)
        return decode_verdicts(await waiter)
