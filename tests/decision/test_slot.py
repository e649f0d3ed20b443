"""The slot's venue-local clock: hour of week (Monday 00h = 0) and local date, from play_time and zone."""

from __future__ import annotations

import datetime
import zoneinfo

import pytest

from adslot.decision.model import ScreenProfile, VenueProfile
from adslot.decision.slot import hour_of_week, local_date, make_slot
from tests.decision.factories import START, utc


def test_monday_midnight_utc_is_hour_zero_of_the_week() -> None:
    assert hour_of_week("UTC", START) == 0


def test_sunday_23h_is_the_last_hour_of_the_week() -> None:
    assert hour_of_week("UTC", START + 7 * 86_400 - 1) == 167


def test_next_monday_midnight_wraps_to_hour_zero() -> None:
    assert hour_of_week("UTC", START + 7 * 86_400) == 0


def test_hour_of_week_is_the_venue_local_hour_not_utc() -> None:
    # Monday 00:30 UTC is Sunday 19:30 in New York (EST, UTC-5).
    assert hour_of_week("America/New_York", START + 1800) == 6 * 24 + 19
    assert hour_of_week("Asia/Tokyo", START + 1800) == 9  # Monday 09:30 JST


def test_local_date_is_the_venue_calendar_date() -> None:
    assert local_date("America/New_York", START + 1800) == datetime.date(2026, 1, 4)
    assert local_date("UTC", START + 1800) == datetime.date(2026, 1, 5)


def test_half_hour_offsets_change_the_hour_at_half_past_utc() -> None:
    # Asia/Kolkata is UTC+5:30: Monday 23:59 local is 18:29 UTC; 18:30 UTC is Tuesday 00:00 local.
    assert hour_of_week("Asia/Kolkata", utc(2026, 1, 5, 18, 29)) == 23
    assert hour_of_week("Asia/Kolkata", utc(2026, 1, 5, 18, 30)) == 24
    assert local_date("Asia/Kolkata", utc(2026, 1, 5, 18, 30)) == datetime.date(2026, 1, 6)


def test_spring_forward_skips_the_local_hour_two_in_berlin() -> None:
    # 2026-03-29: CET 02:00 becomes CEST 03:00 at 01:00 UTC; Sunday is weekday 6.
    assert hour_of_week("Europe/Berlin", utc(2026, 3, 29, 0, 59)) == 6 * 24 + 1
    assert hour_of_week("Europe/Berlin", utc(2026, 3, 29, 1, 0)) == 6 * 24 + 3


def test_fall_back_repeats_the_local_hour_two_in_berlin() -> None:
    # 2026-10-25: CEST 03:00 becomes CET 02:00 at 01:00 UTC, so 02:30 local happens at 00:30 and 01:30 UTC.
    assert hour_of_week("Europe/Berlin", utc(2026, 10, 25, 0, 30)) == 6 * 24 + 2
    assert hour_of_week("Europe/Berlin", utc(2026, 10, 25, 1, 30)) == 6 * 24 + 2
    assert hour_of_week("Europe/Berlin", utc(2026, 10, 25, 2, 30)) == 6 * 24 + 3


def test_make_slot_carries_the_request_and_its_local_clock() -> None:
    venue = VenueProfile("lobby", timezone="America/New_York")
    screen = ScreenProfile("lobby", "s1", width=1920, height=1080)
    slot = make_slot(venue, "s1", screen, START + 1800)
    assert slot.venue is venue
    assert slot.screen is screen
    assert slot.screen_id == "s1"
    assert slot.play_time == START + 1800
    assert slot.hour_of_week == 6 * 24 + 19
    assert slot.local_date == datetime.date(2026, 1, 4)


def test_make_slot_agrees_with_the_helpers_over_a_year_of_hours() -> None:
    venue = VenueProfile(
        "v", timezone="Australia/Lord_Howe"
    )  # half-hour DST shifts: the oddest clock there is
    for epoch in range(START, START + 366 * 86_400, 3 * 3600 + 17 * 60):
        slot = make_slot(venue, None, None, epoch)
        assert slot.hour_of_week == hour_of_week(venue.timezone, epoch)
        assert slot.local_date == local_date(venue.timezone, epoch)


def test_unknown_time_zone_is_an_error_not_a_guess() -> None:
    with pytest.raises(zoneinfo.ZoneInfoNotFoundError):
        make_slot(VenueProfile("v", timezone="Mars/Olympus_Mons"), None, None, START)
