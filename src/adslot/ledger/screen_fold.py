"""What batches tell of screens, gathered in the SQLite ledger writer and written at most every FOLD_SECONDS.
Pure: no I/O.

Each batch's upsert of screen_status and screen_plays cost the writer two statements and a row write per
screen, about a third of its CPU per counted impression (measured with the writer alone: 8.7 µs without the
fold, 11.9-15.3 µs with it). Gathered here, they are written by the first batch FOLD_SECONDS after the last
write, by the writer loop once it is idle that long (writer_loop.py), and on the store's close. The times
written are the batches' own, so a screen's "last request" stays exact and is at most FOLD_SECONDS late; a
writer killed meanwhile loses that much of the screens' news and never a counted play (the ad requests'
rows hold those, and every report reads them).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from adslot.ledger.store import PlaysRow, StatusRow

FOLD_SECONDS = 1.0
"""At most one write of the screens' news per this long under traffic: one statement per table a second,
whatever the batch rate."""


def _later(a: int | None, b: int | None) -> int | None:
    if a is None:
        return b
    return a if b is None or a >= b else b


@dataclass(slots=True)
class ScreenNews:
    """One batch's rows for the screens' tables, and whether its transaction wrote them with what was kept."""

    status: list[StatusRow]
    plays: list[PlaysRow]
    written: bool = False


@dataclass(slots=True)
class ScreenFold:
    every: float = FOLD_SECONDS
    _status: dict[tuple[str, str], list[Any]] = field(default_factory=dict)
    _plays: dict[tuple[str, str, int], int] = field(default_factory=dict)
    _written_at: float = -math.inf

    def __bool__(self) -> bool:
        return bool(self._status or self._plays)

    def due(self, now: float) -> bool:
        """Whether a batch at monotonic time `now` writes what is kept (and its own rows) now."""
        return now - self._written_at >= self.every

    def wait(self, now: float) -> float:
        """Seconds from monotonic time `now` until what is kept is due."""
        return max(0.0, self._written_at + self.every - now)

    def postpone(self, now: float) -> None:
        """A write failed: keep everything, and try again an interval from `now`."""
        self._written_at = now

    def rows(self, news: ScreenNews) -> tuple[list[StatusRow], list[PlaysRow]]:
        """What is kept and `news`, one row per key, sorted (SQLite takes row locks in no order, but a sorted
        write touches the index pages in order): the rows a write writes. Leaves what is kept as it is, for
        a transaction that may still roll back."""
        status = {key: list(row) for key, row in self._status.items()}
        plays = dict(self._plays)
        _fold(status, plays, news)
        return (
            [(venue, screen, *row) for (venue, screen), row in sorted(status.items())],
            [(*key, count) for key, count in sorted(plays.items())],
        )

    def committed(self, news: ScreenNews, now: float) -> None:
        """A batch's transaction committed: forget what it wrote, or keep its rows for a later write."""
        if news.written:
            self._status.clear()
            self._plays.clear()
            self._written_at = now
        else:
            _fold(self._status, self._plays, news)


def _fold(
    status: dict[tuple[str, str], list[Any]], plays: dict[tuple[str, str, int], int], news: ScreenNews
) -> None:
    """Folds `news` into the kept rows: the earliest first sighting and window start, the latest times, the
    counts added (as store.SCREEN_STATUS_UPSERT_SET folds a row into the stored one)."""
    for venue, screen, *new in news.status:
        row = status.get((venue, screen))
        if row is None:
            status[venue, screen] = new
            continue
        row[0] = min(row[0], new[0])
        row[1] = _later(row[1], new[1])
        row[2] = _later(row[2], new[2])
        row[3] = _later(row[3], new[3])
        row[4] = min(row[4], new[4])
        row[5] += new[5]
        row[6] += new[6]
    for venue, screen, hour, count in news.plays:
        key = (venue, screen, hour)
        plays[key] = plays.get(key, 0) + count
