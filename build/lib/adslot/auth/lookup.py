"""Keys a worker's catalog snapshot does not hold yet, looked up in the database before they are refused.

A key created while the server runs (the CLI, the console) is in the database at once, but in a worker's
snapshot only after that worker's next catalog reload. So a presented key whose hash the snapshot lacks is
looked up here before the request is refused: one query on the unique `api_keys.key_hash` index, for keys
not revoked. A key found is added to the snapshot, so its next request is a dict lookup again.

Unknown keys must not reach the database one request each, for a flood of garbage keys would then be a
flood of queries. Three things bound it, per worker and environment:
- concurrent misses share one query (a GroupCommitter, as the ad request point reads do): one `IN` list;
- one query at a time, and each starts at least SPACING_SECONDS after the one before: at most
  1 / SPACING_SECONDS queries a second, whatever the number of keys (what arrives meanwhile joins the next
  query; a new key's first request waits about two spacings at most, and only while unknown keys pour in);
- a hash found absent is answered from memory (ABSENT_MAX hashes at most) for ABSENT_SECONDS, so a player
  that keeps sending a revoked or mistyped key costs a query per worker that often, not per request.

Why a short-lived negative entry is safe: a key's 128 random bits cannot be presented before the key exists,
so a hash found absent stays absent (a revoked key is never active again). The one exception is a key whose
plaintext is known before it is stored (the sandbox's testing key, seeded before serving). For it, and for
any oversight, an entry lives ABSENT_SECONDS, well under a second, and every catalog change the worker sees
(creating a key is one) clears them all: a key created after it was tried is accepted again after
ABSENT_SECONDS, or the worker's next catalog check if that comes first.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Sequence

from adslot.auth.keys import KeyRecord
from adslot.ledger.group_commit import GroupCommitter

ABSENT_SECONDS = 0.25
"""How long a hash found absent is refused without asking the database again."""
ABSENT_MAX = 4096
"""Absent hashes kept at most (about 150 bytes each); past it the oldest go first."""
SPACING_SECONDS = 0.01
"""The least time from the start of one lookup query to the start of the next."""

Fetch = Callable[[Sequence[str]], Awaitable[dict[str, KeyRecord]]]
"""The active keys among the given hashes, by hash: one query."""


class KeyLookup:
    def __init__(
        self,
        fetch: Fetch,
        *,
        max_batch: int = 512,
        absent_seconds: float = ABSENT_SECONDS,
        absent_max: int = ABSENT_MAX,
        spacing_seconds: float = SPACING_SECONDS,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._fetch = fetch
        self._batches: GroupCommitter[str, KeyRecord | None] = GroupCommitter(self._query, max_batch)
        self._absent_seconds = absent_seconds
        self._absent_max = absent_max
        self._spacing = spacing_seconds
        self._clock = clock
        self._absent: dict[str, float] = {}
        """Hash -> until when it is refused from memory; in insertion order, which is expiry order."""
        self._generation = 0
        """Bumped by changed(): a lookup that began before keeps what it found to itself."""
        self._next_query = 0.0
        self.queries = 0
        """Lookup queries run so far (the bound above is checked against it)."""

    def start(self) -> None:
        self._batches.start()

    async def close(self) -> None:
        await self._batches.close()

    async def find(self, key_hash: str, snapshot: dict[str, KeyRecord]) -> KeyRecord | None:
        """The active key with this hash, or None. `snapshot` is the keys dict of the catalog in use: a key
        found is added to it, unless the catalog changed during the lookup (its replacement was loaded
        later and knows better; a key revoked meanwhile must not slip into it). A storage outage is raised
        to the caller, and nothing is remembered."""
        until = self._absent.get(key_hash)
        if until is not None:
            if self._clock() < until:
                return None
            del self._absent[key_hash]
        generation = self._generation
        record = await self._batches.submit(key_hash)
        if generation == self._generation:
            if record is not None:
                snapshot[key_hash] = record
            else:
                self._remember_absent(key_hash)
        return record

    def changed(self) -> None:
        """The catalog in use was replaced: forget the absent hashes (a key among them may have been created)
        and keep the results of lookups in flight out of the new snapshot."""
        self._absent.clear()
        self._generation += 1

    def _remember_absent(self, key_hash: str) -> None:
        now = self._clock()
        absent = self._absent
        while absent and (len(absent) >= self._absent_max or next(iter(absent.values())) <= now):
            del absent[next(iter(absent))]
        absent[key_hash] = now + self._absent_seconds

    async def _query(self, hashes: Sequence[str]) -> list[KeyRecord | None]:
        wait = self._next_query - self._clock()
        if wait > 0:
            await asyncio.sleep(wait)
        self._next_query = self._clock() + self._spacing
        self.queries += 1
        found = await self._fetch(sorted(set(hashes)))
        return [found.get(key_hash) for key_hash in hashes]
