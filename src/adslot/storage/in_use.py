"""Whether a server has an SQLite database open: a shared lock held for as long as it writes there.

Replacing a database file under a running server would leave its ledger writer committing into the file
that was moved aside, and acknowledging ad requests the restored database never sees. So every ledger writer
process holds a shared flock on a file beside its database for its whole life (`hold`), and `adslot db
restore` asks for the exclusive lock without waiting (`in_use`): it is refused while any writer lives. The
kernel drops the lock when the process ends, however it ends, so a killed server never leaves it behind.
"""

from __future__ import annotations

import os
from pathlib import Path

try:
    import fcntl
except ImportError:  # pragma: no cover - Windows has no flock: in_use() then cannot tell, and says no
    fcntl = None  # type: ignore[assignment]

_held: list[int] = []
"""The descriptors this process holds its locks with, kept open (and so locked) until it exits."""


def lock_path(database: Path) -> Path:
    return database.with_name(database.name + ".in-use")


def hold(database: Path) -> None:
    """Mark `database` as in use by this process until it exits."""
    if fcntl is None:
        return
    fd = os.open(lock_path(database), os.O_RDWR | os.O_CREAT, 0o600)
    fcntl.flock(fd, fcntl.LOCK_SH)
    _held.append(fd)


def in_use(database: Path) -> bool:
    """Whether a live process holds `database` (see `hold`); False when nothing can tell."""
    if fcntl is None or not lock_path(database).exists():
        return False
    fd = os.open(lock_path(database), os.O_RDWR)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    finally:
        os.close(fd)  # closing the descriptor releases a lock taken here
    return False
