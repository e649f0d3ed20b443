"""Shared by the tests of every writer that queues on a WriteTurn (the ledger's, the management engine's)."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

from adslot.storage.write_turn import WriteTurn

HELD_SECONDS = 0.3


def assert_waits_for_the_turn(held: WriteTurn, write: Callable[[], None], what: str) -> None:
    """`write`, run while another holder keeps `held`, does not finish before it is released and finishes
    soon after (the kernel wakes it; SQLite's busy handler would sleep up to 100 ms at a time)."""
    finished: list[float] = []

    def run() -> None:
        write()
        finished.append(time.monotonic())

    with held:
        writer = threading.Thread(target=run)
        writer.start()
        time.sleep(HELD_SECONDS)
        assert not finished, f"{what} ran while another writer held the turn"
        released = time.monotonic()
    writer.join(timeout=30)
    assert finished, f"{what} never ran after the turn was released"
    assert finished[0] - released < 5.0
