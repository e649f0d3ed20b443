"""Local days and hours in any IANA time zone, computed by SQL that knows nothing of time zones.

Grouping by the UTC hour of play_time and converting afterwards is wrong for zones whose offset is not a
whole number of hours: Asia/Kolkata's (+05:30) local hours start at half past each UTC hour. So SQL groups by
the *local wall clock* instead: `wall = play_time + offset`, floored to the hour or the day. The offset is
one number for as long as the zone does not change it; a range that spans DST changes is cut into segments
of constant offset (`segments`), and SQL picks each row's offset with a CASE on play_time. The offset is
kept with each group, so the autumn's repeated wall-clock hour stays two hours, and Python turns each
(wall bucket, offset) into the local day and hour (`LocalClock`).
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta, timezone
from zoneinfo import ZoneInfo

HOUR = 3600
DAY = 86_400


@dataclass(frozen=True, slots=True)
class Segment:
    start: int
    """The first instant (UTC epoch seconds) with this offset; the range's start for the first segment."""
    offset: int
    """The zone's UTC offset in seconds from `start` until the next segment."""


def utc_offset(zone: ZoneInfo, at: int) -> int:
    """The zone's UTC offset in seconds at the instant `at`."""
    offset = datetime.fromtimestamp(at, zone).utcoffset()
    return 0 if offset is None else int(offset.total_seconds())


def _transition(zone: ZoneInfo, before: int, after: int) -> int:
    """The first second in (before, after] that has the offset `after` has, by bisection."""
    target = utc_offset(zone, after)
    while after - before > 1:
        middle = (before + after) // 2
        if utc_offset(zone, middle) == target:
            after = middle
        else:
            before = middle
    return after


def segments(zone: ZoneInfo, start: int, end: int) -> list[Segment]:
    """The zone's offsets over [start, end), each change located to the second.

    The offset is sampled at every UTC hour (no zone changes its offset twice within an hour); a change
    between two samples is found by bisection. A year costs ~8,800 samples, a few milliseconds.
    """
    previous_at, previous = start, utc_offset(zone, start)
    found = [Segment(start, previous)]
    at = start - start % HOUR + HOUR
    while previous_at < end - 1:
        sample = min(at, end - 1)
        offset = utc_offset(zone, sample)
        if offset != previous:
            found.append(Segment(_transition(zone, previous_at, sample), offset))
            previous = offset
        previous_at, at = sample, at + HOUR
    return found


def offset_at(found: list[Segment], at: int) -> int:
    """The offset of the segment containing `at` (the first one for instants before the range)."""
    index = bisect.bisect_right([segment.start for segment in found], at) - 1
    return found[max(index, 0)].offset


def whole_hours(found: list[Segment], start: int, end: int) -> bool:
    """Whether every local hour and day boundary of the range falls on a UTC hour: then counts kept per UTC
    hour (request_stats) belong wholly to one local hour or day."""
    return (
        start % HOUR == 0
        and end % HOUR == 0
        and all(segment.offset % HOUR == 0 and segment.start % HOUR == 0 for segment in found)
    )


class LocalClock:
    """Names the local day and hour of a (wall bucket, offset) group, cached: groups share buckets."""

    def __init__(self) -> None:
        self._seen: dict[tuple[int, int], tuple[str, int, str]] = {}

    def _local(self, wall: int, offset: int) -> tuple[str, int, str]:
        known = self._seen.get((wall, offset))
        if known is None:
            naive = datetime.fromtimestamp(wall, UTC)
            local = naive.replace(tzinfo=timezone(timedelta(seconds=offset)))
            known = (naive.date().isoformat(), wall - offset, local.isoformat())
            self._seen[(wall, offset)] = known
        return known

    def day(self, wall: int, offset: int) -> str:
        """The local date (YYYY-MM-DD) of a wall-clock bucket."""
        return self._local(wall, offset)[0]

    def hour(self, wall: int, offset: int) -> int:
        """The instant (UTC epoch seconds) a wall-clock hour starts: its identity, and its sort order."""
        return self._local(wall, offset)[1]

    def hour_label(self, wall: int, offset: int) -> str:
        """The local hour as ISO 8601 with its UTC offset, e.g. 2026-10-25T02:00:00+01:00."""
        return self._local(wall, offset)[2]
