"""The ledger writer process: applies the batches one server worker sends it, and answers their verdicts.

Started by ProcessLedgerStore as `python -m adslot.ledger.writer_process FD` with one end of a socketpair.
The first frame is its database (msgpack: url, schema); it answers "ready" once its store is open, then
applies each batch frame in one transaction and answers only after the commit. It ignores SIGINT and
SIGTERM: its server worker decides when it stops, by closing the socket after its last batch (a drain), and
if the worker dies the socket closes too; either way the process finishes the batch in hand and exits.
"""

from __future__ import annotations

import asyncio
import gc
import logging
import signal
import socket
import sys

import msgspec

try:
    import uvloop
except ImportError:  # pragma: no cover - uvloop is not built for Windows
    uvloop = None  # type: ignore[assignment]

from adslot.ledger.sqlite_store import SqliteLedgerStore
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


async def serve(sock: socket.socket) -> None:
    reader, writer = await asyncio.open_connection(sock=sock)
    database_url, schema = msgspec.msgpack.decode(await read_frame(reader), type=tuple[str, str | None])
    store = store_for(database_url, schema)
    await store.start()
    gc.freeze()  # the process's long-lived start-up objects: full collections need not walk them again
    try:
        write_frame(writer, READY)
        await writer.drain()
        while True:
            try:
                frame = await read_frame(reader)
            except (asyncio.IncompleteReadError, ConnectionError):
                return  # the worker closed its end (drained) or died: nothing more will come
            try:
                operations = decode_operations(frame)
                # Nothing else runs in this process: SQLite's batch needs no hop to its writer thread.
                verdicts = (
                    store.apply_blocking(operations)
                    if isinstance(store, SqliteLedgerStore)
                    else await store.apply(operations)
                )
                answer = encode_verdicts(verdicts)
            except Exception as exc:  # the worker's group committer retries the batch op by op
                log.exception("ledger batch failed")
                answer = encode_error(f"{type(exc).__name__}: {exc}")
            write_frame(writer, answer)
            await writer.drain()
    finally:
        await store.close()
        writer.close()


def main(argv: list[str]) -> int:
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    logging.basicConfig(level=logging.INFO, format="%(levelname)s adslot ledger writer: %(message)s")
    sock = socket.socket(fileno=int(argv[1]))
    # uvloop where installed (every platform but Windows, as for `adslot serve`), else asyncio's own loop.
    with asyncio.Runner(loop_factory=uvloop.new_event_loop if uvloop else None) as runner:
        runner.run(serve(sock))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
