"""The SQLite ledger writer's loop: every worker's frames read through one selector, no event loop.

SQLite writes one transaction at a time, so its writer has nothing to overlap, whether it serves the one
app that started it or all the workers of `adslot serve`. A plain loop spares the task, future and loop pass
per batch that an asyncio loop spends, about a fifth of the writer's CPU per pixel when sampled.

Each pass waits until a socket is readable (not at all while frames wait), reads what every ready client
has sent, takes one batch per client into one transaction (writer_rules.one_per_client) and answers each
client its own verdicts, in its own order, once committed. While idle with news of screens kept (the
store's screen fold), it waits no longer than the fold's interval, then writes that news. Sockets stay
blocking: a read follows the selector's word that data is there, and a worker always reads its answers.
"""

from __future__ import annotations

import logging
import os
import selectors
import socket

from adslot.ledger.sqlite_store import SqliteLedgerStore
from adslot.ledger.wire import READY, SIZE, WireError, encode_error, frame_size, framed
from adslot.ledger.writer_rules import Item, answer_blocking, one_per_client

log = logging.getLogger("adslot.ledger.writer_process")
READ_BYTES = 1 << 18
"""At most this much is read from a socket a pass: a few batches of a busy worker."""
_LISTENER = "listener"
_CONTROL = "control"


class Peer:
    """One worker's connection, and the start of a frame it has not finished sending."""

    __slots__ = ("ended", "greeted", "partial", "sock")

    def __init__(self, sock: socket.socket, greeted: bool) -> None:
        self.sock = sock
        self.greeted = greeted
        """Whether it named this writer's database (a listening writer's clients do so first)."""
        self.partial = bytearray()
        self.ended = False
        """No more frames will be read from it; its end is queued after its last batch."""


class WriterLoop:
    def __init__(self, store: SqliteLedgerStore, database: bytes) -> None:
        self._store = store
        self._database = database
        self._selector = selectors.DefaultSelector()
        self._backlog: list[Item[Peer]] = []
        self._peers = 0
        self._listener: socket.socket | None = None
        self._control = -1

    def attach(self, sock: socket.socket, *, greeted: bool = True) -> None:
        """Serve a worker's connection: `greeted` when it has named this writer's database already."""
        sock.setblocking(True)
        self._selector.register(sock, selectors.EVENT_READ, Peer(sock, greeted))
        self._peers += 1

    def listen(self, listener: socket.socket, control: int) -> None:
        """Accept workers on `listener` until `control` reaches its end of file."""
        self._listener = listener
        self._control = control
        self._selector.register(listener, selectors.EVENT_READ, _LISTENER)
        self._selector.register(control, selectors.EVENT_READ, _CONTROL)

    def run(self) -> None:
        """Until no worker is left and none can come."""
        try:
            while self._listener is not None or self._peers:
                ready = self._selector.select(0 if self._backlog else self._store.screens_wait())
                for key, _ in ready:
                    if key.data is _LISTENER:
                        self._accept()
                    elif key.data is _CONTROL:
                        self._control_readable()
                    else:
                        self._read(key.data)
                if self._backlog:
                    self._write_next()
                elif not ready:
                    self._store.write_screens_blocking()  # idle: the screens' news kept since the last
        finally:
            self._selector.close()

    def _accept(self) -> None:
        assert self._listener is not None
        try:
            sock, _ = self._listener.accept()
        except OSError:  # it gave up before we took it
            return
        self.attach(sock, greeted=False)

    def _control_readable(self) -> None:
        if os.read(self._control, 4096):
            return  # nothing is sent on it; only its end means something
        # `adslot serve` is done or gone: accept no more workers, answer the ones there are.
        assert self._listener is not None
        self._selector.unregister(self._control)
        self._selector.unregister(self._listener)
        self._listener.close()
        self._listener = None

    def _read(self, peer: Peer) -> None:
        try:
            data = peer.sock.recv(READ_BYTES)
        except OSError as exc:
            log.warning("a worker's end of the ledger stream broke (%s)", exc)
            data = b""
        if not data:
            if peer.partial:
                # The worker died mid-frame: its batch in flight fails there (never a false success).
                log.warning("a worker's end of the ledger stream broke inside a frame")
            self._end(peer)
            return
        buffer = peer.partial
        buffer += data
        start = 0
        try:
            while len(buffer) - start >= SIZE.size:
                stop = start + SIZE.size + frame_size(buffer[start : start + SIZE.size])
                if len(buffer) < stop:
                    break
                frame = bytes(buffer[start + SIZE.size : stop])
                start = stop
                if peer.greeted:
                    self._backlog.append((peer, frame))
                elif not self._greet(peer, frame):
                    return
        except WireError as exc:
            log.warning("a worker's ledger stream is corrupt (%s); it is closed", exc)
            self._end(peer)
            return
        del buffer[:start]

    def _greet(self, peer: Peer, frame: bytes) -> bool:
        if frame == self._database:
            peer.greeted = True
            self._send(peer, READY)
            return True
        self._send(peer, encode_error("this ledger writer serves another database"))
        self._end(peer)
        return False

    def _end(self, peer: Peer) -> None:
        """Read nothing more from it; close it once every batch it sent before is answered."""
        if not peer.ended:
            peer.ended = True
            peer.partial.clear()
            self._selector.unregister(peer.sock)
            self._backlog.append((peer, None))

    def _send(self, peer: Peer, payload: bytes) -> None:
        if peer.sock.fileno() < 0:
            return
        try:
            peer.sock.sendall(framed(payload))
        except OSError as exc:  # the worker is gone; what it sent and was committed stays committed
            log.warning("a worker left before its ledger answer (%s)", exc)
            self._end(peer)

    def _write_next(self) -> None:
        """One transaction: one batch per client, each answered once it is committed."""
        now, self._backlog = one_per_client(self._backlog)
        frames = [(peer, frame) for peer, frame in now if peer is not None and frame is not None]
        if frames:
            store = self._store
            for peer, reply in answer_blocking(frames, store.answer_blocking, store.apply_frames_blocking):
                self._send(peer, reply)
        for gone, frame in now:
            if gone is not None and frame is None:
                gone.sock.close()
                self._peers -= 1
