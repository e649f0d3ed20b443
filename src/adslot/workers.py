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
"""

from __future__ import annotations

import logging
import multiprocessing
import os
import signal
import socket
import sys
import threading
import time
from multiprocessing.context import SpawnProcess
from types import FrameType

import uvicorn
from uvicorn.config import STARTUP_FAILURE

log = logging.getLogger(__name__)
REUSE_PORT = hasattr(socket, "SO_REUSEPORT")
POLL_SECONDS = 0.5
PARENT_POLL_SECONDS = 1.0
STOP_TIMEOUT_SECONDS = 60.0


def reuse_port_socket(host: str, port: int) -> socket.socket:
    """A TCP socket bound to host:port with SO_REUSEPORT, not yet listening."""
    family, kind, proto, _, address = socket.getaddrinfo(
        host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
    )[0]
    sock = socket.socket(family, kind, proto)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
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


def _worker(config: uvicorn.Config, parent: int) -> None:
    """One worker process: its own listening socket on the shared port, then uvicorn until it is told."""
    threading.Thread(target=_stop_with, args=(parent,), name="adslot-parent-watch", daemon=True).start()
    sock = reuse_port_socket(config.host, config.port)
    sock.listen(config.backlog)
    config.configure_logging()
    server = uvicorn.Server(config)
    server.run(sockets=[sock])
    if not server.started:
        sys.exit(STARTUP_FAILURE)


def run_workers(config: uvicorn.Config, workers: int) -> None:
    """Serve `config` with `workers` processes until SIGINT or SIGTERM; return when all have stopped."""
    reserved = reuse_port_socket(config.host, config.port)
    spawn = multiprocessing.get_context("spawn")
    stopping = threading.Event()

    def stop(signum: int, frame: FrameType | None) -> None:
        stopping.set()

    previous = {sig: signal.signal(sig, stop) for sig in (signal.SIGINT, signal.SIGTERM)}

    def start() -> SpawnProcess:
        process = spawn.Process(target=_worker, args=(config, os.getpid()), name="adslot-worker")
        process.start()
        return process

    processes = [start() for _ in range(workers)]
    try:
        while not stopping.wait(POLL_SECONDS):
            for index, process in enumerate(processes):
                if process.is_alive():
                    continue
                if process.exitcode == STARTUP_FAILURE:
                    log.error("worker %s could not start; stopping", process.pid)
                    stopping.set()
                    break
                log.error("worker %s exited (%s); starting another", process.pid, process.exitcode)
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
        for sig, handler in previous.items():
            signal.signal(sig, handler)
