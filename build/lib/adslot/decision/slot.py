"""The slot a decision fills, with its venue-local clock resolved once.

Dayparts, daily caps and frequency all read the venue's wall clock, so the time zone lookup happens here, once
per ad request, instead of in every rule that needs it.
"""

from __future__ import annotations

import datetime
from dataclasses import dataclass
from functools import lru_cache
from zoneinfo import ZoneInfo

from adslot.decision.model import ScreenProfile, VenueProfile

HOURS_PER_DAY = 24


@dataclass(frozen=True, slots=True)
class Slot:
    venue: VenueProfile
    screen_id: str | None
    screen: ScreenProfile | None
    play_time: int
    hour_of_week: int
    """Venue-local hour of the week at play_time: Monday 00h = 0 … Sunday 23h = 167."""
    local_date: datetime.date
    """Venue-local calendar date of play_time."""


@lru_cache(maxsize=1024)
def zone(tz_name: str) -> ZoneInfo:
    """ZoneInfo's own cache takes a lock and a weak-reference lookup; a plain LRU in front is cheaper.

    An unknown name raises ``zoneinfo.ZoneInfoNotFoundError`` (a ``KeyError``): venues are validated when they
    are written, so reaching this with a bad name is a bug to surface, not a slot to fill in the wrong time
    zone.
    """
    return ZoneInfo(tz_name)


def local_datetime(tz_name: str, epoch: int) -> datetime.datetime:
    """The wall clock shown in the venue at an instant; an instant always has exactly one, even across DST."""
    return datetime.datetime.fromtimestamp(epoch, zone(tz_name))


def hour_of_week(tz_name: str, epoch: int) -> int:
    local = local_datetime(tz_name, epoch)
    return local.weekday() * HOURS_PER_DAY + local.hour


def local_date(tz_name: str, epoch: int) -> datetime.date:
    return local_datetime(tz_name, epoch).date()


def make_slot(
    venue: VenueProfile, screen_id: str | None, screen: ScreenProfile | None, play_time: int
) -> Slot:
    """Runs on every ad request, so the local clock is computed with one conversion (under a microsecond)."""
    local = datetime.datetime.fromtimestamp(play_time, zone(venue.timezone))
    return Slot(
        venue=venue,
        screen_id=screen_id,
        screen=screen,
        play_time=play_time,
        hour_of_week=local.weekday() * HOURS_PER_DAY + local.hour,
        local_date=local.date(),
    )
