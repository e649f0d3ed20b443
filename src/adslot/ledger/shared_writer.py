"""One ledger writer process per SQLite environment for all the workers of `adslot serve`.

With a writer process per worker, N workers would pay N commits (N fsyncs) for what one can carry, each with
batches 1/N as large, taking turns for SQLite's one write lock. `adslot serve` starts one listening writer
per environment before its workers, and each worker's ProcessLedgerStore dials it
(`ADSLOT_LEDGER_SOCKET_DIR`): the batches of all workers that arrive during a commit go in the next one.

The writer lives as long as the server: a watcher thread starts it again if it dies (the workers' batches in
flight fail, never with a false success; their operations are retried on the new one, and what still fails
is answered 503). At the end its
standard input is closed; it answers what its workers still send, then exits when the last one has gone.
"""

from __future__ import annotations

import contextlib
import logging
import os
import select
import shutil
import subprocess
import sys
import tempfile
import threading
from collections.abc import Iterator, Sequence
from pathlib import Path

from adslot.ledger.ivt import IvtConfig
from adslot.ledger.wire import SIZE
from adslot.ledger.writer_process import READY, encode_database
from adslot.settings import EnvironmentSettings

log = logging.getLogger(__name__)
START_TIMEOUT_SECONDS = 60.0
STOP_TIMEOUT_SECONDS = 60.0


def socket_path(socket_dir: Path, env_name: str) -> Path:
    return socket_dir / f"{env_name}.sock"


class SharedWriter:
    """A listening writer process for one environment, started again whenever it exits before stop()."""

    def __init__(self, env: EnvironmentSettings, path: Path, ivt: IvtConfig | None = None) -> None:
        self._database = encode_database(env.database_url, env.database_schema, ivt)
        self.path = path
        self.process: subprocess.Popen[bytes] | None = None
        self.starts = 0
        self._stopping = threading.Event()
        self._lock = threading.Lock()
        self._watcher: threading.Thread | None = None

    def start(self) -> None:
        self._launch()
        name = f"ledger-writer-{self.path.stem}"
        self._watcher = threading.Thread(target=self._watch, name=name, daemon=True)
        self._watcher.start()

    def _launch(self) -> None:
        process = subprocess.Popen(
            [sys.executable, "-m", "adslot.ledger.writer_process", "--listen", str(self.path)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)},
        )
        assert process.stdin is not None and process.stdout is not None
        process.stdin.write(SIZE.pack(len(self._database)) + self._database)
        process.stdin.flush()
        ready, _, _ = select.select([process.stdout], [], [], START_TIMEOUT_SECONDS)
        line = process.stdout.readline() if ready else b""
        if line.strip() != READY:
            process.kill()
            process.wait()
            raise RuntimeError(f"the shared ledger writer for {self.path.stem} did not start (see its log)")
        with self._lock:
            if not self._stopping.is_set():
                self.process = process
                self.starts += 1
                return
        _close(process)  # stop() came while it started: it never served anyone

    def _watch(self) -> None:
        while True:
            process = self.process
            assert process is not None
            code = process.wait()
            if self._stopping.is_set():
                return
            log.error("the shared ledger writer for %s exited (%s); starting it again", self.path.stem, code)
            while not self._stopping.is_set():
                try:
                    self._launch()
                    break
                except Exception:
                    log.exception("the shared ledger writer for %s did not start again", self.path.stem)
                    self._stopping.wait(1.0)

    def stop(self) -> int | None:
        """Close its standard input (it exits once its workers have gone); its exit code."""
        with self._lock:
            self._stopping.set()
            process = self.process
        code = None if process is None else _close(process)
        if self._watcher is not None:
            self._watcher.join(STOP_TIMEOUT_SECONDS)
        return code


def _close(process: subprocess.Popen[bytes]) -> int:
    assert process.stdin is not None
    with contextlib.suppress(BrokenPipeError):
        process.stdin.close()
    try:
        return process.wait(STOP_TIMEOUT_SECONDS)
    except subprocess.TimeoutExpired:
        log.error("a shared ledger writer did not exit; killing it")
        process.kill()
        return process.wait()


@contextlib.contextmanager
def shared_writers(
    environments: Sequence[EnvironmentSettings], ivt: IvtConfig | None = None
) -> Iterator[Path]:
    """Run one shared writer for each of `environments`, judging fires by `ivt`; yield the directory of
    their sockets for the workers."""
    socket_dir = Path(tempfile.mkdtemp(prefix="adslot-ledger-"))
    writers: list[SharedWriter] = []
    try:
        for env in environments:
            writer = SharedWriter(env, socket_path(socket_dir, env.name), ivt)
            writer.start()
            writers.append(writer)
        yield socket_dir
    finally:
        for writer in writers:
            writer.stop()
        shutil.rmtree(socket_dir, ignore_errors=True)
