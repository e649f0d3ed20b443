"""The bare app plus adslot's durable hand-off and nothing else: a pixel that waits for a writer process.

Every pixel goes through adslot's own GroupCommitter, with the ledger's default batch size and batches in
flight, to a writer process over a socketpair, in adslot's frame format, and is answered only when its
batch's answer comes back, exactly as adslot's ledger path does. The writer stores nothing: per batch it
spins for BENCH_HANDOFF_FIRE_US microseconds per pixel (CPU, standing in for SQL and Proof-of-Play rules)
and, with BENCH_HANDOFF_FSYNC=1, appends the batch to a file and fdatasyncs it (standing in for the
commit). With BENCH_HANDOFF_IN_WORKER=1 there is no writer process: the worker's own thread does the same
per batch. Ad requests and the inline VAST are the bare app's, so the benchmark's start-up check passes.

Run by `python -m bench.handoff` as `uvicorn bench.handoff_app:app`; `python -m bench.handoff_app FD` is
the writer process.
"""

from __future__ import annotations

import asyncio
import collections
import os
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor

from adslot.ledger.group_commit import GroupCommitter
from adslot.ledger.wire import read_frame, write_frame
from adslot.settings import Settings
from bench import bare_app
from bench.bare_app import CALLBACK_PATHS, TRACKING_PATHS, Receive, Scope, Send

FIRE_US = float(os.environ.get("BENCH_HANDOFF_FIRE_US", "0"))
FSYNC = os.environ.get("BENCH_HANDOFF_FSYNC") == "1"
IN_WORKER = os.environ.get("BENCH_HANDOFF_IN_WORKER") == "1"
"""No writer process: the worker itself appends each batch to a log and fdatasyncs it on a thread (the
GIL is released while the disk works), as a design that logs in the worker and applies behind it would."""


class Handoff:
    """The worker's side: batches out as frames, answers back in order (as ProcessLedgerStore does)."""

    def __init__(self) -> None:
        self._waiting: collections.deque[asyncio.Future[bytes]] = collections.deque()
        self._writer: asyncio.StreamWriter | None = None
        self._process: subprocess.Popen[bytes] | None = None
        self._log = -1
        self._executor: ThreadPoolExecutor | None = None
        self.committer: GroupCommitter[bytes, bytes] = GroupCommitter(
            self._apply, Settings.batch_max, Settings.batches_in_flight
        )

    async def start(self) -> None:
        self.committer.start()
        if IN_WORKER:
            self._log = _open_log()
            self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="handoff-log")
            return
        ours, theirs = socket.socketpair()
        self._process = subprocess.Popen(
            [sys.executable, "-m", "bench.handoff_app", str(theirs.fileno())], pass_fds=(theirs.fileno(),)
        )
        theirs.close()
        reader, self._writer = await asyncio.open_connection(sock=ours)
        asyncio.get_running_loop().create_task(self._answers(reader))

    async def stop(self) -> None:
        await self.committer.close()
        if self._writer is not None:
            self._writer.close()
        if self._process is not None:
            self._process.wait(timeout=30)

    async def _answers(self, reader: asyncio.StreamReader) -> None:
        while True:
            frame = await read_frame(reader)
            self._waiting.popleft().set_result(frame)

    def _append(self, frame: bytes) -> bytes:
        _commit(self._log, frame)
        return frame

    async def _apply(self, pixels: Sequence[bytes]) -> list[bytes]:
        if IN_WORKER:
            frame = b"\n".join(pixels)
            loop = asyncio.get_running_loop()
            assert self._executor is not None
            return (await loop.run_in_executor(self._executor, self._append, frame)).split(b"\n")
        assert self._writer is not None
        waiter: asyncio.Future[bytes] = asyncio.get_running_loop().create_future()
        self._waiting.append(waiter)
        write_frame(self._writer, b"\n".join(pixels))
        return (await waiter).split(b"\n")


HANDOFF = Handoff()
PIXEL_PATHS = CALLBACK_PATHS | TRACKING_PATHS


async def app(scope: Scope, receive: Receive, send: Send) -> None:
    if scope["type"] == "lifespan":
        message = await receive()
        assert message["type"] == "lifespan.startup"
        await HANDOFF.start()
        await send({"type": "lifespan.startup.complete"})
        await receive()
        await HANDOFF.stop()
        return await send({"type": "lifespan.shutdown.complete"})
    if scope["type"] == "http" and scope["method"] == "GET" and scope["path"] in PIXEL_PATHS:
        await HANDOFF.committer.submit(scope["query_string"])
    return await bare_app.app(scope, receive, send)


def _open_log() -> int:
    fd, path = tempfile.mkstemp(prefix="adslot-handoff-log-")
    os.unlink(path)  # only this process writes it, and nothing reads it back
    return fd


def _commit(log: int, frame: bytes) -> None:
    """The stand-in for a batch's commit: FIRE_US of CPU per pixel, then, with FSYNC, an append and sync."""
    deadline = time.perf_counter() + FIRE_US * (frame.count(b"\n") + 1) / 1e6
    while time.perf_counter() < deadline:
        pass
    if FSYNC:
        os.write(log, frame)
        os.fdatasync(log)


async def _serve(fd: int) -> None:
    reader, writer = await asyncio.open_connection(sock=socket.socket(fileno=fd))
    log = _open_log()
    while True:
        try:
            frame = await read_frame(reader)
        except (asyncio.IncompleteReadError, ConnectionError):
            return
        _commit(log, frame)
        write_frame(writer, frame)
        await writer.drain()


if __name__ == "__main__":
    asyncio.run(_serve(int(sys.argv[1])))
