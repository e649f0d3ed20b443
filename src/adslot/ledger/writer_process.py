"""The ledger writer process: applies the batches one server worker sends it, and answers their verdicts.

Started by ProcessLedgerStore as `python -m adslot.ledger.writer_process FD` with one end of a socketpair.
The first frame is its database (msgpack: url, schema); it answers "ready" once its store is open, then
applies each batch frame in one transaction and answers only after the commit. It ignores SIGINT and
SIGTERM: its server worker decides when it stops, by closing the socket after its last batch (a drain), and
if the worker dies the socket closes too; either way the process finishes the batch in hand and exits.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import logging
import signal
import socket
import sys

import msgspec
import uvloop

from adslot.ledger.sqlite_store import SqliteLedgerStore
from adslot.ledger.store import LedgerStore
from adslot.ledger.stores import store_for
from adslot.ledger.wire import (
    decode_operations,
    encode_error,
    encode_verdicts,
    read_frame,
    write_frame,
)

log = logging.getLogger("adslot.ledger.writer_process")
READY = b"ready"


async def _applied(store: LedgerStore, frame: bytes) -> bytes:
    """A batch frame's answer frame: its verdicts after the commit, or the error that failed it."""
    try:
        operations = decode_operations(frame)
        # Nothing else runs in this process: SQLite's batch needs no hop to its writer thread.
        if isinstance(store, SqliteLedgerStore):
            return encode_verdicts(store.apply_blocking(operations))
        return encode_verdicts(await store.apply(operations))
    except Exception as exc:  # the worker's group committer retries the batch op by op
        log.exception("ledger batch failed")
        return encode_error(f"{type(exc).__name__}: {exc}")


async def serve(sock: socket.socket) -> None:
    """Answer every batch in the order received. On PostgreSQL the batches in flight run concurrently, each
    in its own pooled transaction (their row locks are taken in one order, so they wait, never deadlock); on
    SQLite, whose one write lock would serialize them anyway, one after the other."""
    reader, writer = await asyncio.open_connection(sock=sock)
    database_url, schema = msgspec.msgpack.decode(await read_frame(reader), type=tuple[str, str | None])
    store = store_for(database_url, schema)
    await store.start()
    gc.freeze()  # the process's long-lived start-up objects: full collections need not walk them again
    answers: asyncio.Queue[asyncio.Future[bytes] | None] = asyncio.Queue()

    async def send_in_order() -> None:
        while (answer := await answers.get()) is not None:
            write_frame(writer, await answer)
            await writer.drain()

    sender = asyncio.get_running_loop().create_task(send_in_order())
    running: set[asyncio.Future[bytes]] = set()
    try:
        write_frame(writer, READY)
        await writer.drain()
        while True:
            try:
                frame = await read_frame(reader)
            except (asyncio.IncompleteReadError, ConnectionError):
                break  # the worker closed its end (drained) or died: nothing more will come
            batch = asyncio.ensure_future(_applied(store, frame))
            running.add(batch)
            batch.add_done_callback(running.discard)
            answers.put_nowait(batch)
    finally:
        answers.put_nowait(None)
        with contextlib.suppress(ConnectionError):
            await sender
        # Every batch received is committed (or failed) before the store closes, even if the worker is gone.
        await asyncio.gather(*running, return_exceptions=True)
        await store.close()
        writer.close()


def main(argv: list[str]) -> int:
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    logging.basicConfig(level=logging.INFO, format="%(levelname)s adslot ledger writer: %(message)s")
    sock = socket.socket(fileno=int(argv[1]))
    with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
        runner.run(serve(sock))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
