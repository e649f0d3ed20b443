"""A venue's opening hours: a weekly schedule in its own time zone, days closed included. Pure.

Stored and given as JSON, one key per day (`mon` .. `sun`), each a list of "HH:MM-HH:MM" ranges in the
venue's local time ("24:00" ends a day); a day left out or empty is closed. A venue without hours is always
open. Silence while a venue is closed raises no alert, so what counts is how much of a silence fell in open
hours (open_seconds).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from datetime import datetime, timedelta
from itertools import pairwise
from zoneinfo import ZoneInfo

DAYS = ("mon", "tue", "wed", "thu", "fri", "sat", "sun")
_RANGE = re.compile(r"^([01]\d|2[0-3]):([0-5]\d)-([01]\d|2[0-3]|24):([0-5]\d)$")
MAX_RANGES = 8
"""Ranges per day: a shop shut at lunch has two."""
MAX_SPAN_DAYS = 8
"""open_seconds looks this far back at most: a silence longer than a week is long open whatever the hours."""


class HoursError(ValueError):
    """A schedule that cannot be read; `field` names the day or range at fault."""

    def __init__(self, message: str, field: str) -> None:
        super().__init__(message)
        self.field = field


@dataclass(frozen=True, slots=True)
class Schedule:
    """Per weekday (Monday first), the open ranges as (start, end) minutes after local midnight."""

    days: tuple[tuple[tuple[int, int], ...], ...]

    def as_json(self) -> dict[str, list[str]]:
        return {
            day: [f"{a // 60:02d}:{a % 60:02d}-{b // 60:02d}:{b % 60:02d}" for a, b in ranges]
            for day, ranges in zip(DAYS, self.days, strict=True)
        }

    def dumps(self) -> str:
        return json.dumps(self.as_json(), separators=(",", ":"))


def parse_schedule(value: object, field: str = "hours") -> Schedule:
    """A Schedule from its JSON form; HoursError naming the first fault."""
    if not isinstance(value, dict):
        raise HoursError("opening hours are an object with a key per day (mon .. sun)", field)
    unknown = sorted(set(value) - set(DAYS))
    if unknown:
        raise HoursError(f"{unknown[0]!r} is not a day: use {', '.join(DAYS)}", f"{field}.{unknown[0]}")
    days: list[tuple[tuple[int, int], ...]] = []
    for day in DAYS:
        raw = value.get(day) or []
        where = f"{field}.{day}"
        if not isinstance(raw, list) or len(raw) > MAX_RANGES:
            raise HoursError(f'a day is a list of at most {MAX_RANGES} "HH:MM-HH:MM" ranges', where)
        ranges: list[tuple[int, int]] = []
        for i, text in enumerate(raw):
            match = _RANGE.match(text) if isinstance(text, str) else None
            if match is None:
                raise HoursError(f'{text!r} is not a "HH:MM-HH:MM" range', f"{where}[{i}]")
            start = int(match[1]) * 60 + int(match[2])
            end = int(match[3]) * 60 + int(match[4])
            if end > 24 * 60 or end <= start:
                raise HoursError(f"{text!r} must end after it starts, by 24:00", f"{where}[{i}]")
            ranges.append((start, end))
        ranges.sort()
        for (_, end), (start, _) in pairwise(ranges):
            if start < end:
                raise HoursError("ranges of a day must not overlap", where)
        days.append(tuple(ranges))
    return Schedule(tuple(days))


def loads(text: str | None) -> Schedule | None:
    """A stored schedule (None: none, always open)."""
    return None if text is None else parse_schedule(json.loads(text))


def is_open(schedule: Schedule | None, timezone: str, at: float) -> bool:
    if schedule is None:
        return True
    local = datetime.fromtimestamp(at, ZoneInfo(timezone))
    minute = local.hour * 60 + local.minute
    return any(a <= minute < b for a, b in schedule.days[local.weekday()])


def open_seconds(schedule: Schedule | None, timezone: str, start: float, end: float) -> float:
    """How many of the seconds between `start` and `end` the venue was open (all of them without hours)."""
    if end <= start:
        return 0.0
    if schedule is None:
        return end - start
    zone = ZoneInfo(timezone)
    start = max(start, end - MAX_SPAN_DAYS * 86400)
    day = datetime.fromtimestamp(start, zone).replace(hour=0, minute=0, second=0, microsecond=0)
    total = 0.0
    while day.timestamp() < end:
        for a, b in schedule.days[day.weekday()]:
            # Wall-clock minutes of this date, resolved in its zone (a DST day's ranges shift with it).
            opened = (day + timedelta(minutes=a)).replace(tzinfo=zone).timestamp()
            closed = (day + timedelta(minutes=b)).replace(tzinfo=zone).timestamp()
            total += max(0.0, min(end, closed) - max(start, opened))
        day = (day.replace(tzinfo=None) + timedelta(days=1)).replace(tzinfo=zone)
    return total
