"""Dayparts compiled to a 168-bit hour-of-week mask, so a decision tests a daypart with one shift and one AND.

Hours are venue-local wall-clock hours (see ``slot.hour_of_week``). Across daylight saving changes that means:

- spring forward: the skipped local hour (e.g. 02:00-03:00 in Europe/Berlin on 2026-03-29) never occurs, so a
  daypart made only of that hour does not play that day; every other hour plays at its usual local time.
- fall back: the repeated local hour (02:00-03:00 in Europe/Berlin on 2026-10-25) occurs twice, and a daypart
  covering it plays during both real hours, because both show 02:xx on the venue's clock.

A media owner sells "08-10 local" and the screen's audience lives by the local clock, so wall-clock hours are
the promise to keep; the length of the day in real seconds is not.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from adslot.decision.model import ALL_HOURS, HOURS_PER_WEEK

DAYS_PER_WEEK = 7
HOURS_PER_DAY = 24


@dataclass(frozen=True, slots=True)
class Daypart:
    """Hours ``start_hour`` up to (not including) ``end_hour`` on each of ``days`` (0 = Monday … 6 = Sunday).

    An ``end_hour`` at or before ``start_hour`` runs past midnight into the next day (Sunday wraps to Monday):
    ``Daypart((4,), 22, 2)`` is Friday 22h-24h and Saturday 0h-2h; ``start_hour == end_hour`` is 24 hours.
    """

    days: tuple[int, ...]
    start_hour: int
    end_hour: int


def compile_dayparts(parts: Iterable[Daypart]) -> int:
    """The union of the parts as a mask; no parts at all means no restriction (every hour).

    Raises ``ValueError`` on a value outside its range: the API validates first, and a silently wrong mask
    would sell hours nobody bought.
    """
    mask = 0
    seen = False
    for part in parts:
        seen = True
        _check(part)
        length = (part.end_hour - part.start_hour) % HOURS_PER_DAY or HOURS_PER_DAY
        for day in part.days:
            first = day * HOURS_PER_DAY + part.start_hour
            for offset in range(length):
                mask |= 1 << ((first + offset) % HOURS_PER_WEEK)
    return mask if seen else ALL_HOURS


def active(mask: int, hour_of_week: int) -> bool:
    return bool((mask >> hour_of_week) & 1)


def _check(part: Daypart) -> None:
    if not part.days:
        raise ValueError("a daypart needs at least one day")
    for day in part.days:
        if not 0 <= day < DAYS_PER_WEEK:
            raise ValueError(f"day {day} is outside 0 (Monday) .. 6 (Sunday)")
    if not 0 <= part.start_hour < HOURS_PER_DAY:
        raise ValueError(f"start_hour {part.start_hour} is outside 0 .. 23")
    if not 1 <= part.end_hour <= HOURS_PER_DAY:
        raise ValueError(f"end_hour {part.end_hour} is outside 1 .. 24")
