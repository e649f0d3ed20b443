"""A database is in use exactly while a live process holds it: the lock goes with the process, however it
ends, so a killed server never leaves a restore refused."""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path

from adslot.storage.in_use import in_use, lock_path
from tests.conftest import eventually

HOLD = """
import sys, time
from pathlib import Path
from adslot.storage.in_use import hold
hold(Path(sys.argv[1]))
print("held", flush=True)
time.sleep(60)
"""


def test_a_database_is_in_use_while_a_process_holds_it_and_free_once_it_is_killed(tmp_path: Path) -> None:
    database = tmp_path / "production.sqlite3"
    assert not in_use(database)  # never held: no lock file at all
    holder = subprocess.Popen([sys.executable, "-c", HOLD, str(database)], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        assert lock_path(database).exists()
        assert in_use(database)
        assert in_use(database)  # asking does not take it away
    finally:
        holder.send_signal(signal.SIGKILL)
        holder.wait(timeout=30)
    assert eventually(lambda: not in_use(database))
