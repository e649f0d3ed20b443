"""`adslot serve --workers N`: N uvicorn worker processes, each accepting on a listening socket of its own.

uvicorn's own supervisor binds one socket and shares it: every worker waits on it, and the one that wakes
first accepts all the connections queued (asyncio accepts up to its backlog per wake-up). Players and load
balancers keep their connections open, so that first split lasts: measured with wrk's 64 keep-alive
connections, one worker held 59 and the other 5-9, and the busy one set the pace. Here each worker binds the
same port with SO_REUSEPORT (as nginx's `reuseport` and gunicorn's `--reuse-port` do), and the kernel spreads
new connections over the workers by a hash of their addresses.

The supervisor binds the port too (never listening, so the kernel hands it no connection) to fail at once
if the port is taken; starts a worker again if one dies, and stops if a worker cannot start at all; on SIGINT
or SIGTERM it sends SIGTERM to each worker, whose uvicorn drains it, and waits for them. A worker whose
supervisor has died (say, SIGKILLed) drains and stops by itself. Where the platform has no SO_REUSEPORT
(Windows), `adslot serve` runs uvicorn's own supervisor instead (REUSE_PORT).

Either way `adslot serve` tells the operator it is serving only once the port accepts connections (one
worker: serve_one listens before it says so; several: every worker has reported its socket listening): a
script that waits for the banner and connects at once is queued until the app answers, never refused.
"""

from __future__ import annotations

import contextlib
import logging
import multiprocessing
import os
import signal
import socket
import sys
import threading
import time
from collections.abc import Callable
from multiprocessing.connection import Connection
from multiprocessing.context import SpawnProcess
from types import FrameType

import uvicorn
from uvicorn.config import STARTUP_FAILURE

from adslot.telemetry.logs import configure_from_environment
from adslot.telemetry.metrics import worker_gone

log = logging.getLogger(__name__)
REUSE_PORT = hasattr(socket, "SO_REUSEPORT")
POLL_SECONDS = 0.5
PARENT_POLL_SECONDS = 1.0
STOP_TIMEOUT_SECONDS = 60.0


def bound_socket(host: str, port: int, *, reuse_port: bool = True) -> socket.socket:
    """A TCP socket bound to host:port (with SO_REUSEPORT unless told not to), not yet listening."""
    family, kind, proto, _, address = socket.getaddrinfo(
        host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
    )[0]
    sock = socket.socket(family, kind, proto)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        if reuse_port:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
        sock.bind(address)
    except BaseException:
        sock.close()
        raise
    return sock


def _stop_with(parent: int) -> None:
    """SIGTERM this worker (uvicorn drains it) once its supervisor is gone, say SIGKILLed: an orphan would
    go on serving the port beside the next `adslot serve`, and keep its ledger writer alive."""
    while os.getppid() == parent:
        time.sleep(PARENT_POLL_SECONDS)
    log.error("the adslot serve supervisor %s is gone; stopping worker %s", parent, os.getpid())
    os.kill(os.getpid(), signal.SIGTERM)


def _serve(config: uvicorn.Config, sock: socket.socket) -> None:
    """uvicorn on a socket that already listens, until it is told to stop; STARTUP_FAILURE if the app
    could not start."""
    server = uvicorn.Server(config)
    # uvicorn raises the SIGINT it handled again once drained, for its caller (uvicorn.run) to swallow.
    with contextlib.suppress(KeyboardInterrupt):
        server.run(sockets=[sock])
    if not server.started:
        sys.exit(STARTUP_FAILURE)


def serve_one(config: uvicorn.Config, sock: socket.socket, ready: Callable[[], None]) -> None:
    """Serve `config` in this process on `sock` (bound_socket(reuse_port=False)); `ready` runs once it
    accepts connections, before the app has started (connections wait in the listen queue meanwhile)."""
    sock.listen(config.backlog)
    ready()
    _serve(config, sock)


def _worker(config: uvicorn.Config, parent: int, listening: Connection) -> None:
    """One worker process: its own listening socket on the shared port, then uvicorn until it is told."""
    threading.Thread(target=_stop_with, args=(parent,), name="adslot-parent-watch", daemon=True).start()
    sock = bound_socket(config.host, config.port)
    sock.listen(config.backlog)
    listening.send(os.getpid())
    listening.close()
    config.configure_logging()
    configure_from_environment()  # the app's lines and uvicorn's, in ADSLOT_LOG_FORMAT (telemetry/logs.py)
    _serve(config, sock)


def run_workers(
    config: uvicorn.Config, workers: int, reserved: socket.socket, ready: Callable[[], None]
) -> None:
    """Serve `config` with `workers` processes until SIGINT or SIGTERM; return when all have stopped.

    `reserved` (bound_socket(), never listening) holds the port meanwhile and is closed at the end; `ready`
    runs once every first worker's socket listens (not if one fails first)."""
    spawn = multiprocessing.get_context("spawn")
    reports, listening = spawn.Pipe(duplex=False)
    stopping = threading.Event()

    def stop(signum: int, frame: FrameType | None) -> None:
        stopping.set()

    previous = {sig: signal.signal(sig, stop) for sig in (signal.SIGINT, signal.SIGTERM)}

    def start() -> SpawnProcess:
        process = spawn.Process(target=_worker, args=(config, os.getpid(), listening), name="adslot-worker")
        process.start()
        return process

    processes = [start() for _ in range(workers)]
    waiting = workers
    try:
        while not stopping.is_set():
            if reports.poll(POLL_SECONDS):
                reports.recv()
                waiting -= 1
                if waiting == 0:
                    ready()  # every first worker listens (a restarted one reports too: waiting < 0)
            for index, process in enumerate(processes):
                if process.is_alive():
                    continue
                if process.exitcode == STARTUP_FAILURE:
                    log.error("worker %s could not start; stopping", process.pid)
                    stopping.set()
                    break
                log.error("worker %s exited (%s); starting another", process.pid, process.exitcode)
                if process.pid is not None:
                    worker_gone(process.pid)  # its live gauges go; its counts stay
                processes[index] = start()
    finally:
        for process in processes:
            if process.is_alive() and process.pid is not None:
                os.kill(process.pid, signal.SIGTERM)
        for process in processes:
            process.join(STOP_TIMEOUT_SECONDS)
            if process.is_alive():
                log.error("worker %s did not stop; killing it", process.pid)
                process.kill()
                process.join()
        reserved.close()
        reports.close()
        listening.close()
        for sig, handler in previous.items():
            signal.signal(sig, handler)
