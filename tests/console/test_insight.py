"""The forecast page's days: how many hours of each local day the forecast window covers."""

from __future__ import annotations

import datetime as dt

from adslot.console.pages.insight import day_label, hours_by_day


def epoch(text: str) -> int:
    return int(dt.datetime.fromisoformat(text).timestamp())


def test_a_window_cut_inside_its_first_and_last_days_makes_them_partial() -> None:
    hours = hours_by_day("UTC", epoch("2026-12-07T04:00:00+00:00"), epoch("2026-12-09T20:00:00+00:00"))
    assert hours == {"2026-12-07": 20, "2026-12-08": 24, "2026-12-09": 20}


def test_days_are_those_of_the_campaigns_time_zone() -> None:
    hours = hours_by_day(
        "Europe/Berlin", epoch("2026-12-07T23:00:00+00:00"), epoch("2026-12-08T23:00:00+00:00")
    )
    assert hours == {"2026-12-08": 24}


def test_an_unknown_zone_reads_as_utc() -> None:
    assert hours_by_day("Nowhere/Else", 0, 3600) == {"1970-01-01": 1}


def test_a_partial_day_says_its_hours() -> None:
    assert day_label("2026-12-09", 17) == "Wed 9 Dec (17 h)"
    assert day_label("2026-12-08", None) == "Tue 8 Dec"
