"""Time zone segments and local wall-clock buckets: DST changes located to the second, zones whose offset
is not a whole hour, and the autumn's repeated hour kept as two hours."""

from __future__ import annotations

from zoneinfo import ZoneInfo

import pytest

from adslot.reporting.buckets import LocalClock, Segment, offset_at, segments, whole_hours
from tests.reporting.support import utc

BERLIN = ZoneInfo("Europe/Berlin")


def test_a_year_in_berlin_has_three_segments_changing_at_one_utc() -> None:
    assert segments(BERLIN, utc("2026-01-01T00:00"), utc("2027-01-01T00:00")) == [
        Segment(utc("2026-01-01T00:00"), 3600),
        Segment(utc("2026-03-29T01:00"), 7200),
        Segment(utc("2026-10-25T01:00"), 3600),
    ]


def test_a_change_at_half_past_a_utc_hour_is_found_to_the_second() -> None:
    found = segments(ZoneInfo("America/St_Johns"), utc("2026-03-01T00:00"), utc("2026-04-01T00:00"))
    assert found == [Segment(utc("2026-03-01T00:00"), -12600), Segment(utc("2026-03-08T05:30"), -9000)]


def test_a_range_ending_just_before_a_change_has_one_segment_and_just_after_two() -> None:
    change = utc("2026-10-25T01:00")
    assert len(segments(BERLIN, change - 7200, change)) == 1
    assert segments(BERLIN, change - 7200, change + 1)[1] == Segment(change, 3600)


def test_kolkata_keeps_one_offset_of_five_and_a_half_hours_all_year() -> None:
    found = segments(ZoneInfo("Asia/Kolkata"), utc("2026-01-01T00:00"), utc("2027-01-01T00:00"))
    assert found == [Segment(utc("2026-01-01T00:00"), 19800)]


def test_offset_at_picks_the_segment_containing_the_instant() -> None:
    found = segments(BERLIN, utc("2026-10-24T00:00"), utc("2026-10-26T00:00"))
    assert offset_at(found, utc("2026-10-25T00:59")) == 7200
    assert offset_at(found, utc("2026-10-25T01:00")) == 3600


@pytest.mark.parametrize(
    ("zone", "start", "end", "expected"),
    [
        ("Europe/Berlin", "2026-10-24T22:00", "2026-10-25T23:00", True),
        ("Europe/Berlin", "2026-10-24T22:30", "2026-10-25T23:00", False),
        ("Europe/Berlin", "2026-10-24T22:00", "2026-10-25T23:00:01", False),
        ("Asia/Kolkata", "2026-10-24T18:00", "2026-10-25T18:00", False),
        ("America/St_Johns", "2026-03-01T00:00", "2026-04-01T00:00", False),
        ("UTC", "2026-10-24T00:00", "2026-10-25T00:00", True),
    ],
)
def test_request_hours_fit_local_buckets_only_when_every_boundary_is_a_whole_utc_hour(
    zone: str, start: str, end: str, expected: bool
) -> None:
    found = segments(ZoneInfo(zone), utc(start), utc(end))
    assert whole_hours(found, utc(start), utc(end)) is expected


def test_the_repeated_autumn_hour_is_two_hours_with_their_own_offsets() -> None:
    clock = LocalClock()
    wall = utc("2026-10-25T02:00")  # the wall clock reads 02:00 twice in Berlin that night
    assert clock.hour(wall, 7200) == utc("2026-10-25T00:00")
    assert clock.hour(wall, 3600) == utc("2026-10-25T01:00")
    assert clock.hour_label(wall, 7200) == "2026-10-25T02:00:00+02:00"
    assert clock.hour_label(wall, 3600) == "2026-10-25T02:00:00+01:00"
    assert clock.day(wall, 7200) == clock.day(wall, 3600) == "2026-10-25"


def test_a_half_hour_offset_labels_the_local_hour_that_starts_at_half_past_utc() -> None:
    clock = LocalClock()
    wall = utc("2026-10-25T06:00")
    assert clock.hour(wall, 19800) == utc("2026-10-25T00:30")
    assert clock.hour_label(wall, 19800) == "2026-10-25T06:00:00+05:30"
