"""The ledger writer process of an SQLite environment: applies the batches its workers send, and answers
their verdicts (ledger/backends.py says why SQLite's batches go through one).

Two ways to start it, one protocol. `python -m adslot.ledger.writer_process --listen PATH` is the writer
that `adslot serve` starts once per environment for all its workers: it reads its database from standard
input, listens on a Unix socket, and answers "ready" on standard output. `python -m
adslot.ledger.writer_process FD` serves the one app that started it over a socketpair (ProcessLedgerStore's
own writer, where no `adslot serve` runs one).

Each client's first frame names its database (msgpack: url, schema, and the invalid-traffic rules its
fires are judged by, ivt.IvtConfig or nil), answered "ready". The batch frames
that arrive while one transaction is being written, one per client (a worker's next batch waits for the next
transaction, so it always has one in flight), are applied together in the next, and each is answered (its
own verdicts, in its own order) only after that commit: several workers pay one commit for all their batches
instead of taking turns. If the merged batch fails, each frame is applied on its own, so one worker's bad
batch never fails another's (writer_rules.py). SQLite writes one transaction at a time, so the writer runs
a blocking loop (writer_loop.py).

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
from adslot.ledger.ivt import IvtConfig, Judge
from adslot.ledger.sqlite_store import SqliteLedgerStore
from adslot.ledger.wire import READY, framed, read_frame_from
from adslot.ledger.writer_loop import WriterLoop
from adslot.storage.database import is_sqlite, sqlite_path
from adslot.storage.in_use import hold
from adslot.telemetry.logs import configure_from_environment

__all__ = ["READY", "encode_database", "main"]
log = logging.getLogger("adslot.ledger.writer_process")
Database = tuple[str, str | None, IvtConfig | None]
_database: msgspec.msgpack.Decoder[Database] = msgspec.msgpack.Decoder(Database)


def decode_database(frame: bytes) -> Database:
    return _database.decode(frame)


def encode_database(url: str, schema: str | None, ivt: IvtConfig | None = None) -> bytes:
    return msgspec.msgpack.encode((url, schema, ivt))


async def _opened(database: bytes) -> SqliteLedgerStore:
    url, _, ivt = decode_database(database)
    if not is_sqlite(url):
        raise ValueError("a ledger writer process serves SQLite only: PostgreSQL is written from the workers")
    hold(sqlite_path(url))  # `adslot db restore` refuses while this process lives (storage/in_use.py)
    store = SqliteLedgerStore(sqlite_path(url), judge=None if ivt is None else Judge(ivt))
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
        sock.sendall(framed(READY))
        writer_loop = WriterLoop(store, database)
        writer_loop.attach(sock)
        writer_loop.run()
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
            listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            listener.bind(str(path))
            listener.listen(128)
            writer_loop = WriterLoop(store, database)
            writer_loop.listen(listener, pipe.fileno())
            os.write(announce, READY + b"\n")
            writer_loop.run()
        finally:
            path.unlink(missing_ok=True)
            with contextlib.suppress(OSError):
                path.parent.rmdir()  # the last writer out, if `adslot serve` died before it could
            await store.close()


def main(argv: list[str]) -> int:
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    configure_from_environment()  # its lines in the shape of the workers' (telemetry/logs.py)
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
