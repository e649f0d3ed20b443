"""Which screen each ad request a ledger writer issued is on, so that a counted play is folded into its
screen's status (store.py's screen_rows) without reading its ad request back. Pure: no I/O.

A screen never changes once an ad request is issued, so what is kept here is never stale, whoever writes
meanwhile (unlike remembered.py's states); an ad request not found (issued by another writer or node, or
forgotten) is read by id with the others of its batch and kept from then on. Each entry is an int key and
a shared (venue, screen) tuple: about 100 bytes, up to LIMIT of them, the oldest forgotten first.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Mapping
from itertools import islice

from adslot.ledger.records import AdRequest

LIMIT = 250_000
"""Ad requests kept at most (~25 MB): impressions fire within a play window of their ad request, and 250,000
are ten minutes of 400 ad requests a second."""
SHARED_LIMIT = 1 << 16
"""Distinct (venue, screen) tuples kept for sharing; beyond it the table starts again."""

Where = tuple[str, str | None]


class ScreensOf:
    def __init__(self, limit: int = LIMIT) -> None:
        self._limit = limit
        self._by_id: dict[int, Where] = {}
        self._shared: dict[Where, Where] = {}

    def __len__(self) -> int:
        return len(self._by_id)

    @property
    def by_id(self) -> Mapping[int, Where]:
        """Each kept ad request's (venue, screen), by the int of its id (hashed faster than a UUID)."""
        return self._by_id

    def add(self, records: Iterable[AdRequest]) -> None:
        """Ad requests a committed batch issued."""
        self.learn((record.id, record.venue_id, record.screen_id) for record in records)

    def learn(self, located: Iterable[tuple[uuid.UUID, str, str | None]]) -> None:
        """(ad request, venue, screen) of ad requests issued here or read back."""
        shared, by_id = self._shared, self._by_id
        for ident, venue, screen in located:
            where = (venue, screen)
            kept = shared.get(where)
            if kept is None:
                if len(shared) >= SHARED_LIMIT:
                    shared.clear()
                kept = shared[where] = where
            by_id[ident.int] = kept
        excess = len(by_id) - self._limit
        if excess > 0:
            for key in list(islice(by_id, excess)):
                del by_id[key]
