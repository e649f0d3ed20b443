"""Opening hours: read and refused, open or closed at an instant, and how much of a silence was open."""

from __future__ import annotations

from datetime import datetime
from zoneinfo import ZoneInfo

import pytest

from adslot.fleet.hours import HoursError, is_open, loads, open_seconds, parse_schedule

PARIS = "Europe/Paris"


def at(text: str, zone: str = PARIS) -> float:
    return datetime.fromisoformat(text).replace(tzinfo=ZoneInfo(zone)).timestamp()


def test_a_schedule_reads_each_day_and_a_day_left_out_is_closed() -> None:
    schedule = parse_schedule({"mon": ["08:00-12:00", "14:00-24:00"], "sat": ["10:00-18:00"]})
    assert schedule.days[0] == ((480, 720), (840, 1440)) and schedule.days[1] == ()
    assert loads(schedule.dumps()) == schedule
    assert schedule.as_json()["mon"] == ["08:00-12:00", "14:00-24:00"]


@pytest.mark.parametrize(
    ("hours", "field"),
    [
        ([], "hours"),
        ({"someday": []}, "hours.someday"),
        ({"mon": "08:00-12:00"}, "hours.mon"),
        ({"mon": ["8-12"]}, "hours.mon[0]"),
        ({"mon": ["12:00-08:00"]}, "hours.mon[0]"),
        ({"mon": ["08:00-12:00", "11:00-13:00"]}, "hours.mon"),
        ({"tue": ["00:00-24:01"]}, "hours.tue[0]"),
    ],
)
def test_a_bad_schedule_is_refused_naming_the_day_or_range(hours: object, field: str) -> None:
    with pytest.raises(HoursError) as caught:
        parse_schedule(hours)
    assert caught.value.field == field


def test_open_and_closed_follow_the_venues_own_time_zone() -> None:
    schedule = parse_schedule({"mon": ["09:00-17:00"]})
    assert is_open(schedule, PARIS, at("2026-12-07T09:30"))  # a Monday
    assert not is_open(schedule, PARIS, at("2026-12-07T17:00"))
    assert not is_open(schedule, PARIS, at("2026-12-08T10:00"))
    assert not is_open(schedule, PARIS, at("2026-12-07T12:00", "America/New_York"))  # 18:00 in Paris
    assert is_open(None, PARIS, at("2026-12-08T03:00")), "no hours: always open"


def test_only_the_open_part_of_a_silence_counts() -> None:
    schedule = parse_schedule({day: ["09:00-17:00"] for day in ("mon", "tue")})
    # Silent from Monday 16:00 to Tuesday 10:00: one hour on Monday, one on Tuesday.
    assert open_seconds(schedule, PARIS, at("2026-12-07T16:00"), at("2026-12-08T10:00")) == 7200
    assert open_seconds(None, PARIS, 100.0, 700.0) == 600
    assert open_seconds(schedule, PARIS, at("2026-12-09T10:00"), at("2026-12-09T12:00")) == 0
