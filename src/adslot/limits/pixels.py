"""The pixel guard: a flood of fires on one ad request is answered cheaply and kept off the database.

Per process, in front of the ledger (api/proof_of_play.py begin_event):
- At most `limit` fires a second per ad request uuid (ADSLOT_RATE_LIMIT_PIXELS, default 50; a second of the
  wall clock): the rest are answered 429 before the ledger sees them. A play fires at most twelve (six events,
  from both VAST layers) over the length of its creative; fifty in one second is only ever a flood.
- While a fire of an (ad request, event, layer) is in the ledger, the repeats of that second wait for it and
  then go to the ledger together, in one batch: the ad request's row is written once for the first fire and
  once for all the repeats that arrived meanwhile, however many (the ledger resolves a batch's fires of one ad
  request into one UPDATE). Each repeat is still a fire the ledger decides and records (`duplicate` into
  duplicate_count, `late` into late_count), and each answer waits for its own commit, so the record's counts
  stay exact and nothing is acknowledged before it is durable.

Several workers or nodes may each receive fires of one uuid; each guards its own share, and the ledger's
fired bits keep the counts right whatever process a fire lands on.

Memory is bounded by time: the guard knows the fires of the current second only (a new second starts an empty
table), so it holds one second of this process's fires. The first fire of an ad request in a second costs a
dict lookup and an insert (~0.2 µs); only a second fire of it in the same second pays for more. No task, no
I/O.
"""

from __future__ import annotations

import asyncio
from functools import partial
from typing import Protocol

from adslot.ledger.records import Fire, Verdict

_Slot = tuple[str, str]


class _Ledger(Protocol):
    def enqueue(self, fire: Fire, /) -> asyncio.Future[Verdict]: ...


"""(event, layer)."""


class _Seen:
    """An ad request fired more than once this second: how often, and the latest ledger future per slot."""

    __slots__ = ("count", "flights")

    def __init__(self, first: Fire, future: asyncio.Future[Verdict]) -> None:
        self.count = 1
        self.flights: dict[_Slot, asyncio.Future[Verdict]] = {(first.event, first.layer): future}


class PixelGuard:
    def __init__(self, ledger: _Ledger, limit: int) -> None:
        """`ledger`: what takes the fires (the GroupCommitter), whose `enqueue` is looked up at each fire so
        that one swapped in later is the one used. `limit`: fires a second per uuid, 0 for none."""
        self._ledger = ledger
        self._limit = limit
        self._second = 0
        self._seen: dict[int, tuple[Fire, asyncio.Future[Verdict]] | _Seen] = {}
        """This second's ad requests by uuid: the first fire and its future, or _Seen once fired again."""
        self._waiting: dict[tuple[int, str, str], list[tuple[Fire, asyncio.Future[Verdict]]]] = {}
        """Repeats waiting for their slot's fire in flight, with the futures they are answered from."""

    @property
    def tracked(self) -> int:
        """The ad requests the guard remembers: those fired this second."""
        return len(self._seen)

    def enqueue(self, fire: Fire) -> asyncio.Future[Verdict] | None:
        """The future of `fire`'s verdict, or None when its uuid is over the limit (answer 429, nothing
        stored)."""
        if fire.at != self._second:
            self._second = fire.at
            self._seen = {}
        ident = fire.ad_request_id.int
        seen = self._seen.get(ident)
        if seen is None:
            future = self._ledger.enqueue(fire)
            self._seen[ident] = (fire, future)
            return future
        return self._again(ident, seen, fire)

    def _again(
        self, ident: int, seen: tuple[Fire, asyncio.Future[Verdict]] | _Seen, fire: Fire
    ) -> asyncio.Future[Verdict] | None:
        """A fire on an ad request already fired this second: limited, joined to its slot's fire in flight,
        or sent to the ledger."""
        if type(seen) is tuple:
            seen = self._seen[ident] = _Seen(*seen)
        assert isinstance(seen, _Seen)
        seen.count += 1
        if self._limit and seen.count > self._limit:
            return None
        slot = (fire.event, fire.layer)
        flight = seen.flights.get(slot)
        if flight is None or flight.done():
            future = seen.flights[slot] = self._ledger.enqueue(fire)
            return future
        answer: asyncio.Future[Verdict] = flight.get_loop().create_future()
        key = (ident, *slot)
        waiting = self._waiting.get(key)
        if waiting is None:
            waiting = self._waiting[key] = []
            flight.add_done_callback(partial(self._release, key))
        waiting.append((fire, answer))
        return answer

    def _release(self, key: tuple[int, str, str], _flight: asyncio.Future[Verdict]) -> None:
        """The slot's fire is decided: its waiting repeats go to the ledger together, and become the fire in
        flight that later repeats of this second wait for."""
        latest: asyncio.Future[Verdict] | None = None
        for fire, answer in self._waiting.pop(key, ()):
            try:
                verdict = self._ledger.enqueue(fire)
            except Exception as exc:  # the ledger is stopping: answered as begin_event's own enqueue would
                if not answer.done():
                    answer.set_exception(exc)
                continue
            verdict.add_done_callback(partial(_pass_on, answer))
            latest = verdict
        seen = self._seen.get(key[0])
        if latest is not None and isinstance(seen, _Seen):
            seen.flights[key[1], key[2]] = latest


def _pass_on(answer: asyncio.Future[Verdict], verdict: asyncio.Future[Verdict]) -> None:
    if answer.done():
        return
    if verdict.cancelled():
        answer.cancel()
    elif (exc := verdict.exception()) is not None:
        answer.set_exception(exc)
    else:
        answer.set_result(verdict.result())
