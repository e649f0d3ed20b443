"""The lookup of keys a worker's snapshot lacks: found keys join it, unknown ones cost bounded work."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Coroutine, Sequence
from typing import Any, TypeVar

import psycopg
import pytest

from adslot.auth.keys import KeyRecord
from adslot.auth.lookup import KeyLookup
from adslot.storage.failures import unavailable

T = TypeVar("T")
WAIT = 10.0
KEY = KeyRecord(7, 3, frozenset({"ad_request"}))


def run(scenario: Coroutine[Any, Any, T]) -> T:
    return asyncio.run(asyncio.wait_for(scenario, WAIT))


class Keys:
    """A stand-in for the api_keys table: records each query's hashes and start; may hold it or fail."""

    def __init__(self, stored: dict[str, KeyRecord] | None = None) -> None:
        self.stored = dict(stored or {})
        self.queries: list[list[str]] = []
        self.started: list[float] = []
        self.hold: asyncio.Event | None = None
        self.error: Exception | None = None
        self.seconds = 0.0

    async def __call__(self, hashes: Sequence[str]) -> dict[str, KeyRecord]:
        self.queries.append(list(hashes))
        self.started.append(time.monotonic())
        if self.hold is not None:
            await self.hold.wait()
        await asyncio.sleep(self.seconds)
        if self.error is not None:
            raise self.error
        return {h: self.stored[h] for h in hashes if h in self.stored}


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def lookup(keys: Keys, **kwargs: Any) -> KeyLookup:
    kwargs.setdefault("spacing_seconds", 0.0)
    found = KeyLookup(keys, **kwargs)
    found.start()
    return found


def test_concurrent_misses_share_one_query_with_each_hash_asked_once() -> None:
    async def scenario() -> None:
        keys = Keys({"h3": KEY})
        found = lookup(keys)
        asked = [f"h{i}" for i in range(100)] + ["h3", "h5"]
        answers = await asyncio.gather(*(found.find(h, {}) for h in asked))
        await found.close()
        assert keys.queries == [sorted(set(asked))]
        assert found.queries == 1
        assert [h for h, record in zip(asked, answers, strict=True) if record is not None] == ["h3", "h3"]

    run(scenario())


def test_a_key_found_joins_the_snapshot_so_its_next_request_needs_no_lookup() -> None:
    async def scenario() -> None:
        found = lookup(Keys({"new": KEY}))
        snapshot: dict[str, KeyRecord] = {}
        assert await found.find("new", snapshot) == KEY
        await found.close()
        assert snapshot == {"new": KEY}

    run(scenario())


def test_a_hash_found_absent_is_refused_from_memory_until_its_time_is_up_then_asked_again() -> None:
    async def scenario() -> None:
        keys, clock = Keys(), Clock()
        found = lookup(keys, absent_seconds=0.25, clock=clock)
        snapshot: dict[str, KeyRecord] = {}
        assert await found.find("h", snapshot) is None
        clock.now += 0.24
        keys.stored["h"] = KEY  # stored meanwhile: still refused from memory, without a query
        assert await found.find("h", snapshot) is None
        assert found.queries == 1
        clock.now += 0.01
        assert await found.find("h", snapshot) == KEY
        await found.close()
        assert found.queries == 2

    run(scenario())


def test_a_catalog_change_forgets_the_absent_hashes_at_once() -> None:
    async def scenario() -> None:
        keys = Keys()
        found = lookup(keys, absent_seconds=60.0, clock=Clock())
        assert await found.find("h", {}) is None
        keys.stored["h"] = KEY
        found.changed()
        assert await found.find("h", {}) == KEY
        await found.close()
        assert found.queries == 2

    run(scenario())


@pytest.mark.parametrize("stored", [True, False], ids=["found", "absent"])
def test_what_a_lookup_finds_after_the_catalog_changed_answers_its_request_but_is_not_kept(
    stored: bool,
) -> None:
    async def scenario() -> None:
        keys = Keys({"h": KEY} if stored else {})
        keys.hold = asyncio.Event()
        found = lookup(keys, absent_seconds=60.0, clock=Clock())
        snapshot: dict[str, KeyRecord] = {}
        pending = asyncio.ensure_future(found.find("h", snapshot))
        while not keys.queries:
            await asyncio.sleep(0)
        found.changed()  # e.g. the key was revoked and the poll swapped the keys in: the old table must stay
        keys.hold.set()
        assert await pending == (KEY if stored else None)
        assert snapshot == {}
        keys.hold = None
        await found.find("h", snapshot)
        await found.close()
        assert found.queries == 2, "nothing was remembered from the lookup that the change overtook"

    run(scenario())


def test_the_absent_hashes_kept_are_bounded_and_the_oldest_go_first() -> None:
    async def scenario() -> None:
        found = lookup(Keys(), absent_max=3, absent_seconds=60.0, clock=Clock())
        for h in ("a", "b", "c", "d", "e"):
            await found.find(h, {})
        assert found.queries == 5
        for h in ("c", "d", "e"):
            await found.find(h, {})
        assert found.queries == 5, "the newest three are refused from memory"
        for h in ("a", "b"):
            await found.find(h, {})
        await found.close()
        assert found.queries == 7, "the oldest two were dropped to keep three"

    run(scenario())


def test_one_lookup_query_starts_at_most_every_spacing_and_the_first_at_once() -> None:
    async def scenario() -> None:
        keys = Keys()
        found = lookup(keys, spacing_seconds=0.05)
        began = time.monotonic()
        for h in ("a", "b", "c", "d"):
            await found.find(h, {})
        await found.close()
        assert keys.started[0] - began < 0.04, "a lookup after a quiet spell waits for nothing"
        gaps = [later - earlier for earlier, later in zip(keys.started, keys.started[1:], strict=False)]
        assert len(gaps) == 3 and min(gaps) >= 0.049, gaps

    run(scenario())


def test_a_flood_of_distinct_unknown_keys_costs_one_query_per_spacing_at_most() -> None:
    async def scenario() -> None:
        keys = Keys()
        keys.seconds = 0.001
        spacing = 0.02
        found = lookup(keys, spacing_seconds=spacing)

        async def player(n: int) -> list[KeyRecord | None]:
            return [await found.find(f"garbage-{n}-{i}", {}) for i in range(20)]

        began = time.monotonic()
        answers = await asyncio.gather(*(player(n) for n in range(50)))
        elapsed = time.monotonic() - began
        await found.close()
        assert all(record is None for each in answers for record in each)
        assert sum(len(q) for q in keys.queries) == 1000, "every unknown hash was asked"
        assert found.queries <= 1 + elapsed / spacing
        assert found.queries <= 1000 / 20, keys.queries

    run(scenario())


def test_a_storage_outage_reaches_every_waiter_and_leaves_nothing_remembered() -> None:
    async def scenario() -> None:
        keys = Keys({"h": KEY})
        keys.error = psycopg.OperationalError("connection refused")
        found = lookup(keys, absent_seconds=60.0, clock=Clock())
        answers = await asyncio.gather(*(found.find(h, {}) for h in ("h", "x")), return_exceptions=True)
        assert all(isinstance(a, psycopg.OperationalError) and unavailable(a) for a in answers), answers
        keys.error = None
        snapshot: dict[str, KeyRecord] = {}
        assert await found.find("h", snapshot) == KEY
        assert await found.find("x", snapshot) is None
        await found.close()
        assert found.queries == 3, "the failed hashes were asked again, not refused from memory"

    run(scenario())
