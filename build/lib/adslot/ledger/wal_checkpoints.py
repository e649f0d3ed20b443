"""SQLite's WAL copied back into the database file by a thread beside the ledger writer, not in its commits.

SQLite checkpoints inside the COMMIT that takes the WAL past `wal_autocheckpoint` pages (1,000 by default):
on a ledger that is the writer's, which then copies those pages into the database file and syncs it before
it can answer the batch. Every thousand pages or so one batch waited milliseconds, and with it every pixel
that arrived meanwhile: those waits were much of the pixels' p99 at half load. Here a thread copies what the
writer committed, at most every PAUSE_SECONDS, on its own connection: a PASSIVE checkpoint never takes the
write lock, and SQLite releases the GIL while it copies. It costs the writer's process ~1.5 µs of CPU per
pixel (the thread's fsyncs).

The WAL goes back to its start only after a checkpoint that copied all of it, which a thread racing the
writer's commits rarely makes; so the writer keeps a checkpoint of its own, at BACKSTOP_PAGES, which then
copies only the few pages the thread had not yet, and bounds the WAL's size.
"""

from __future__ import annotations

import logging
import sqlite3
import threading
import time
from pathlib import Path

log = logging.getLogger(__name__)
BACKSTOP_PAGES = 4000
"""The writer's own wal_autocheckpoint: the WAL's most pages (16 MiB of 4 KiB pages) between restarts."""
PAUSE_SECONDS = 0.02
"""After each checkpoint, so that a busy writer's next few commits are copied together: a checkpoint syncs
the WAL and the database file, two fsyncs however few pages it copies."""


class WalCheckpointer:
    def __init__(self, path: Path) -> None:
        self._path = path
        self._wrote = threading.Event()
        self._closing = False
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="adslot-sqlite-checkpoints", daemon=True)
        self._thread.start()

    def wrote(self) -> None:
        """The writer committed: copy its pages soon."""
        self._wrote.set()

    def close(self) -> None:
        self._closing = True
        self._wrote.set()
        if self._thread is not None:
            self._thread.join()
            self._thread = None

    def _run(self) -> None:
        conn = sqlite3.connect(self._path, isolation_level=None, check_same_thread=False)
        try:
            while True:
                self._wrote.wait()
                if self._closing:
                    return
                self._wrote.clear()
                try:
                    conn.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchone()
                except sqlite3.Error as exc:
                    # The writer's backstop checkpoint still bounds the WAL; the next commit retries this.
                    log.warning("SQLite checkpoint failed: %s", exc)
                time.sleep(PAUSE_SECONDS)
        finally:
            conn.close()
