"""Dayparts compiled to the 168-bit hour-of-week mask, across midnight, the week's end and DST changes."""

from __future__ import annotations

import pytest

from adslot.decision.dayparts import Daypart, active, compile_dayparts
from adslot.decision.model import ALL_HOURS, VenueProfile
from adslot.decision.slot import make_slot
from tests.decision.factories import utc

MON, TUE, WED, THU, FRI, SAT, SUN = range(7)
EVERY_DAY = (MON, TUE, WED, THU, FRI, SAT, SUN)


def hours(mask: int) -> set[int]:
    return {h for h in range(168) if active(mask, h)}


def at(day: int, hour: int) -> int:
    return day * 24 + hour


def test_no_dayparts_means_every_hour() -> None:
    assert compile_dayparts([]) == ALL_HOURS


def test_a_daypart_covers_its_start_hour_up_to_but_not_its_end_hour() -> None:
    assert hours(compile_dayparts([Daypart((MON,), 8, 10)])) == {8, 9}


def test_a_daypart_applies_to_each_of_its_days() -> None:
    assert hours(compile_dayparts([Daypart((TUE, SAT), 23, 24)])) == {at(TUE, 23), at(SAT, 23)}


def test_dayparts_add_up() -> None:
    mask = compile_dayparts([Daypart((MON,), 8, 9), Daypart((MON,), 17, 18), Daypart((WED,), 8, 9)])
    assert hours(mask) == {at(MON, 8), at(MON, 17), at(WED, 8)}


def test_friday_22_to_02_runs_into_saturday_morning() -> None:
    mask = compile_dayparts([Daypart((FRI,), 22, 2)])
    assert hours(mask) == {at(FRI, 22), at(FRI, 23), at(SAT, 0), at(SAT, 1)}


def test_sunday_22_to_02_wraps_to_monday_morning() -> None:
    mask = compile_dayparts([Daypart((SUN,), 22, 2)])
    assert hours(mask) == {at(SUN, 22), at(SUN, 23), at(MON, 0), at(MON, 1)}


def test_equal_start_and_end_is_a_full_24_hours_from_the_start() -> None:
    mask = compile_dayparts([Daypart((MON,), 6, 6)])
    assert hours(mask) == set(range(6, 30))


def test_zero_to_twenty_four_is_the_whole_day() -> None:
    assert hours(compile_dayparts([Daypart((THU,), 0, 24)])) == set(range(at(THU, 0), at(THU, 24)))


def test_every_day_every_hour_is_all_hours() -> None:
    assert compile_dayparts([Daypart(EVERY_DAY, 0, 24)]) == ALL_HOURS


@pytest.mark.parametrize(
    "part",
    [
        Daypart((), 8, 10),
        Daypart((7,), 8, 10),
        Daypart((-1,), 8, 10),
        Daypart((MON,), 24, 2),
        Daypart((MON,), -1, 2),
        Daypart((MON,), 8, 0),
        Daypart((MON,), 8, 25),
    ],
)
def test_out_of_range_dayparts_are_refused(part: Daypart) -> None:
    with pytest.raises(ValueError):
        compile_dayparts([part])


# --- daylight saving: dayparts follow the venue's wall clock -----------------------------------------------

MORNING = compile_dayparts([Daypart(EVERY_DAY, 8, 10)])


def plays(tz: str, epoch: int, mask: int = MORNING) -> bool:
    return active(mask, make_slot(VenueProfile("v", timezone=tz), None, None, epoch).hour_of_week)


@pytest.mark.parametrize(
    ("label", "epoch"),
    [
        ("Berlin, day before spring forward, 08:30 CET", utc(2026, 3, 28, 7, 30)),
        ("Berlin, spring forward day, 08:30 CEST", utc(2026, 3, 29, 6, 30)),
        ("Berlin, day after spring forward, 08:30 CEST", utc(2026, 3, 30, 6, 30)),
        ("Berlin, day before fall back, 08:30 CEST", utc(2026, 10, 24, 6, 30)),
        ("Berlin, fall back day, 08:30 CET", utc(2026, 10, 25, 7, 30)),
        ("Berlin, day after fall back, 08:30 CET", utc(2026, 10, 26, 7, 30)),
    ],
)
def test_berlin_08_to_10_plays_at_08_local_around_dst_changes(label: str, epoch: int) -> None:
    assert plays("Europe/Berlin", epoch), label


@pytest.mark.parametrize(
    ("label", "epoch"),
    [
        ("Berlin, day after spring forward, 07:30 CEST", utc(2026, 3, 30, 5, 30)),
        ("Berlin, day after spring forward, 10:30 CEST", utc(2026, 3, 30, 8, 30)),
        ("Berlin, day after fall back, 07:30 CET", utc(2026, 10, 26, 6, 30)),
        ("Berlin, day after fall back, 10:00 CET", utc(2026, 10, 26, 9, 0)),
    ],
)
def test_berlin_08_to_10_does_not_play_outside_08_to_10_local_around_dst(label: str, epoch: int) -> None:
    assert not plays("Europe/Berlin", epoch), label


@pytest.mark.parametrize(
    ("label", "epoch"),
    [
        ("New York, day before spring forward, 08:30 EST", utc(2026, 3, 7, 13, 30)),
        ("New York, spring forward day, 08:30 EDT", utc(2026, 3, 8, 12, 30)),
        ("New York, day after spring forward, 08:30 EDT", utc(2026, 3, 9, 12, 30)),
        ("New York, fall back day, 08:30 EST", utc(2026, 11, 1, 13, 30)),
        ("New York, day after fall back, 08:30 EST", utc(2026, 11, 2, 13, 30)),
    ],
)
def test_new_york_08_to_10_plays_at_08_local_around_dst_changes(label: str, epoch: int) -> None:
    assert plays("America/New_York", epoch), label


@pytest.mark.parametrize(
    ("label", "epoch"),
    [
        ("New York, day after spring forward, 07:30 EDT", utc(2026, 3, 9, 11, 30)),
        ("New York, day after fall back, 07:30 EST", utc(2026, 11, 2, 12, 30)),
        ("New York, day after spring forward, 10:30 EDT", utc(2026, 3, 9, 14, 30)),
    ],
)
def test_new_york_08_to_10_does_not_play_outside_08_to_10_local_around_dst(label: str, epoch: int) -> None:
    assert not plays("America/New_York", epoch), label


def active_minutes(tz: str, mask: int, start: int, end: int) -> int:
    return sum(plays(tz, t, mask) for t in range(start, end, 60))


def test_a_daypart_made_of_the_skipped_hour_never_plays_on_spring_forward_day() -> None:
    two_am_sunday = compile_dayparts([Daypart((SUN,), 2, 3)])
    # Saturday 22:00 UTC to Sunday 06:00 UTC spans the whole Berlin night of 2026-03-28/29.
    assert active_minutes("Europe/Berlin", two_am_sunday, utc(2026, 3, 28, 22), utc(2026, 3, 29, 6)) == 0
    # A week later the hour exists again and plays for its 60 minutes.
    assert active_minutes("Europe/Berlin", two_am_sunday, utc(2026, 4, 4, 22), utc(2026, 4, 5, 6)) == 60


def test_a_daypart_covering_the_repeated_hour_plays_for_both_hours_on_fall_back_day() -> None:
    two_am_sunday = compile_dayparts([Daypart((SUN,), 2, 3)])
    assert active_minutes("Europe/Berlin", two_am_sunday, utc(2026, 10, 24, 22), utc(2026, 10, 25, 6)) == 120
    assert active_minutes("Europe/Berlin", two_am_sunday, utc(2026, 10, 31, 22), utc(2026, 11, 1, 6)) == 60


def test_a_daypart_after_the_change_keeps_its_full_length_on_change_days() -> None:
    for start, end in [
        (utc(2026, 3, 28, 22), utc(2026, 3, 29, 22)),
        (utc(2026, 10, 24, 22), utc(2026, 10, 25, 23)),
    ]:
        assert active_minutes("Europe/Berlin", MORNING, start, end) == 120
