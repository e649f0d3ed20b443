"""What the test bidder received and answered, as JSON lines and as a bounded list kept in memory.

The test bidder exists so that an integrator (or a test) can see what an exchange really sent it: every bid
request, every answer, every notice and pixel. The lines go to a file or stdout as they happen, for a person
to follow with `tail -f`; the last entries stay in memory too, for `GET /log`, so a test can check them
without parsing a file another process writes.
"""

from __future__ import annotations

import time
from collections import deque
from typing import Any, TextIO

import msgspec

MAX_ENTRIES = 10_000
"""How many entries `GET /log` keeps: enough for a test run or a demo, bounded for a bidder left running."""

Entry = dict[str, Any]


class BidderLog:
    """An append-only log: each entry stamped with its time (`at`, Unix seconds) and its order (`seq`)."""

    def __init__(self, sink: TextIO | None = None, max_entries: int = MAX_ENTRIES) -> None:
        self._sink = sink
        self._entries: deque[Entry] = deque(maxlen=max_entries)
        self._seq = 0

    def add(self, kind: str, **fields: Any) -> Entry:
        """Record one event; None values are left out, so a line says only what was there."""
        self._seq += 1
        entry: Entry = {"seq": self._seq, "at": round(time.time(), 3), "kind": kind}
        entry.update((key, value) for key, value in fields.items() if value is not None)
        self._entries.append(entry)
        if self._sink is not None:
            self._sink.write(msgspec.json.encode(entry).decode() + "\n")
            self._sink.flush()
        return entry

    def entries(self, kind: str | None = None) -> list[Entry]:
        """The kept entries, oldest first; only those of `kind` when it is given."""
        return [entry for entry in self._entries if kind is None or entry["kind"] == kind]
