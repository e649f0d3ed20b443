"""The pixel guard: a flood of fires on one ad request is answered cheaply and kept off the database.

Per process, in front of the ledger (api/proof_of_play.py begin_event):
- At most `limit` fires a second per ad request uuid (ADSLOT_RATE_LIMIT_PIXELS, default 50; a second of the
  wall clock): the rest are answered 429 before the ledger sees them. A play fires at most twelve (six events,
  from both VAST layers) over the length of its creative; fifty in one second is only ever a flood.
- The first fire of each (event, layer) of an ad request in a second goes to the ledger as it is, and so
  does its first repeat; while that repeat is in the ledger, the later repeats of that second wait for it
  and then go to the ledger together, in one batch: the ad request's row is written for the first fire, for
  its first repeat, and once for all the repeats that arrived meanwhile, however many (the ledger resolves a
  batch's fires of one ad request into one UPDATE). Each repeat is still a fire the ledger decides and
  records (`duplicate` into duplicate_count, `late` into late_count), and each answer waits for its own
  commit, so the record's counts stay exact and nothing is acknowledged before it is durable.

Several workers or nodes may each receive fires of one uuid; each guards its own share, and the ledger's
fired bits keep the counts right whatever process a fire lands on.

Memory is bounded by time: the guard knows the fires of the current second only (a new second starts an empty
table), so it holds one second of this process's fires, as one int per ad request (its count and the
(event, layer)s fired). A first fire costs one lookup and one store of an int and keeps nothing else; only
a repeat of an (event, layer) in the same second pays for more. No task, no I/O.
"""

from __future__ import annotations

import asyncio
from functools import partial
from typing import Protocol

from adslot.ledger.records import FIRE_BITS, Fire, Verdict

_Slot = tuple[str, str]


_BITS: dict[str, dict[str, int]] = {
    layer: {event: bit for (event, fired_layer), bit in FIRE_BITS.items() if fired_layer == layer}
    for layer in {layer for _, layer in FIRE_BITS}
}
"""Each (event, layer)'s bit (records.FIRE_BITS), looked up by layer then event: two lookups of str keys,
whose hashes are cached, cost less than making and hashing a tuple."""
COUNT_UNIT = 1 << 16
"""An ad request's entry in the guard is its fires this second times COUNT_UNIT, plus the bits of the
(event, layer)s fired (all below COUNT_UNIT)."""
assert max(FIRE_BITS.values()) < COUNT_UNIT


class _Ledger(Protocol):
    def enqueue(self, fire: Fire, /) -> asyncio.Future[Verdict]: ...


"""(event, layer)."""


class _Flood:
    """An ad request fired more than once this second: the latest ledger future per (event, layer)."""

    __slots__ = ("flights",)

    def __init__(self) -> None:
        self.flights: dict[_Slot, asyncio.Future[Verdict]] = {}


class PixelGuard:
    def __init__(self, ledger: _Ledger, limit: int) -> None:
        """`ledger`: what takes the fires (the GroupCommitter), whose `enqueue` is looked up at each fire so
        that one swapped in later is the one used. `limit`: fires a second per uuid, 0 for none."""
        self._ledger = ledger
        self._limit = limit
        self._second = 0
        self._fired: dict[int, int] = {}
        """This second's fires per ad request uuid, as one int each (count * COUNT_UNIT | the fired bits of
        its (event, layer)s): the first fire of an ad request (nearly every fire) costs one lookup and one
        store and keeps no object alive, where its future and Fire, kept for the rest of the second, would
        be walked by every young garbage collection (tens of thousands of them at full load)."""
        self._floods: dict[int, _Flood] = {}
        """The ad requests fired again this second, with their fires in flight."""
        self._waiting: dict[tuple[int, str, str], list[tuple[Fire, asyncio.Future[Verdict]]]] = {}
        """Repeats waiting for their slot's fire in flight, with the futures they are answered from."""

    @property
    def tracked(self) -> int:
        """The ad requests the guard remembers: those fired this second."""
        return len(self._fired)

    def enqueue(self, fire: Fire) -> asyncio.Future[Verdict] | None:
        """The future of `fire`'s verdict, or None when its uuid is over the limit (answer 429, nothing
        stored)."""
        if fire.at != self._second:
            self._second = fire.at
            self._fired = {}
            self._floods = {}
        ident = fire.ad_request_id.int
        fired = self._fired.get(ident, 0)
        bit = _BITS[fire.layer][fire.event]
        self._fired[ident] = fired + COUNT_UNIT | bit
        if self._limit and fired >= self._limit * COUNT_UNIT:
            return None
        if not fired & bit:  # the first fire of its (event, layer) this second: nearly all
            return self._ledger.enqueue(fire)
        return self._again(ident, fire)

    def _again(self, ident: int, fire: Fire) -> asyncio.Future[Verdict] | None:
        """A repeat of an (event, layer) already fired this second: joined to its fire in flight, or sent to
        the ledger (the first repeat, which later repeats then wait for)."""
        flood = self._floods.get(ident)
        if flood is None:
            flood = self._floods[ident] = _Flood()
        slot = (fire.event, fire.layer)
        flight = flood.flights.get(slot)
        if flight is None or flight.done():
            future = flood.flights[slot] = self._ledger.enqueue(fire)
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
        flood = self._floods.get(key[0])
        if latest is not None and flood is not None:
            flood.flights[key[1], key[2]] = latest


def _pass_on(answer: asyncio.Future[Verdict], verdict: asyncio.Future[Verdict]) -> None:
    if answer.done():
        return
    if verdict.cancelled():
        answer.cancel()
    elif (exc := verdict.exception()) is not None:
        answer.set_exception(exc)
    else:
        answer.set_result(verdict.result())
