"""The proof-of-play report's shaping: places summed per venue or screen, plays at each venue's local time,
plays per hour of the day, and a place read from what a venue has."""

from __future__ import annotations

import re

import pytest

from adslot.console.proof import MAX_PERIOD_DAYS, hours_chart, place_of, places, report_period, sample
from adslot.errors import ApiError
from adslot.reporting.schemas import DeliveryReport, DeliveryRow, Filters, InvalidCounts, Metrics, PlayRow

NO_INVALID = InvalidCounts(too_fast=0, out_of_order=0, foreign_network=0, burst=0)


def metrics(plays: int, impressions: float = 0.0) -> dict[str, object]:
    return {
        "requests": None,
        "fills": plays,
        "fill_rate": None,
        "plays": plays,
        "impressions": impressions,
        "starts": 0,
        "first_quartiles": 0,
        "midpoints": 0,
        "third_quartiles": 0,
        "completes": 0,
        "completion_rate": None,
        "late": 0,
        "duplicates": 0,
        "expired": 0,
        "released": 0,
        "invalid": NO_INVALID,
        "direct_plays": plays,
        "programmatic_plays": 0,
    }


def play(venue_id: str, screen_id: str | None, at: int) -> PlayRow:
    return PlayRow(
        ad_request_uuid="00000000-0000-0000-0000-000000000001",
        venue_id=venue_id,
        screen_id=screen_id,
        play_time=at,
        campaign_id=1,
        creative_id=7,
        impressions=2.5,
        impression_at=at,
        start_at=None,
        first_quartile_at=None,
        midpoint_at=None,
        third_quartile_at=None,
        complete_at=at + 15,
        duplicate_count=0,
        late_count=0,
    )


VENUES = {
    "airport": {"name": "Airport T1", "timezone": "America/New_York", "city": "Newark", "country": "US"},
    "mall": {"name": "Mall", "timezone": "Europe/Berlin", "latitude": 52.5, "longitude": 13.4},
}
SCREENS = {("airport", "gate-1"): "Gate one", ("airport", "gate-2"): None}


def test_places_sum_a_venues_screens_or_keep_them_apart_most_plays_first() -> None:
    rows = [
        DeliveryRow(venue_id="airport", screen_id="gate-1", **metrics(3, 3.0)),
        DeliveryRow(venue_id="airport", screen_id="gate-2", **metrics(4, 8.0)),
        DeliveryRow(venue_id="mall", screen_id=None, **metrics(5, 5.0)),
        DeliveryRow(venue_id="nowhere", screen_id=None, **metrics(0)),
    ]
    by_venue = places(rows, VENUES, SCREENS, by_screen=False)
    assert [(p.venue_id, p.plays, p.impressions) for p in by_venue] == [
        ("airport", 7, 11.0),
        ("mall", 5, 5.0),
    ]
    assert (by_venue[0].place, by_venue[0].timezone) == ("Newark, US", "America/New_York")
    by_screen = places(rows, VENUES, SCREENS, by_screen=True)
    assert [(p.screen_id, p.screen_name, p.plays) for p in by_screen] == [
        (None, None, 5),
        ("gate-2", None, 4),
        ("gate-1", "Gate one", 3),
    ]


def test_a_place_is_the_city_region_and_country_else_coordinates_else_a_dash() -> None:
    assert place_of({"city": "Newark", "region": "NJ", "country": "US"}) == "Newark, NJ, US"
    assert place_of({"latitude": 52.5, "longitude": 13.4}) == "52.5000, 13.4000"
    assert place_of({}) == "—"


def test_a_sample_play_is_shown_at_its_venues_local_time_with_names() -> None:
    winter = 1_796_126_400  # 2026-12-01 12:00 UTC
    shown = sample(
        [play("airport", "gate-1", winter), play("mall", None, winter)], VENUES, SCREENS, {7: "Spring 15s"}
    )
    assert shown[0].local_time == "2026-12-01 07:00:00 EST"
    assert (shown[0].venue, shown[0].screen, shown[0].creative) == ("Airport T1", "Gate one", "Spring 15s")
    assert shown[1].local_time == "2026-12-01 13:00:00 CET" and shown[1].screen == "—"
    assert shown[0].completed and shown[0].impressions == 2.5


def test_plays_per_hour_of_the_day_add_up_each_local_hour_over_the_days() -> None:
    rows = [
        DeliveryRow(hour="2026-12-01T09:00:00+01:00", **metrics(2)),
        DeliveryRow(hour="2026-12-02T09:00:00+01:00", **metrics(3)),
        DeliveryRow(hour="2026-12-02T23:00:00+01:00", **metrics(1)),
    ]
    report = DeliveryReport(
        from_=0,
        to=1,
        timezone="Europe/Berlin",
        group_by=["hour"],
        filters=Filters(campaign_id=1, venue_id=None, screen_id=None),
        rows=rows,
        totals=Metrics(**metrics(6)),
    )
    svg = str(hours_chart(report))
    bars = dict(re.findall(r"<title>(\d\d):00 to \d\d:59: plays (\d+)</title>", svg))
    assert bars["09"] == "5" and bars["23"] == "1" and bars["10"] == "0" and len(bars) == 24


DAY = 86_400
NOW = 1_796_126_400  # 2026-12-01 12:00 UTC


def test_a_report_covers_the_dates_asked_else_the_flight() -> None:
    flight = (NOW - 10 * DAY, NOW + 20 * DAY)
    assert report_period(flight, None, None, NOW) == flight
    assert report_period(flight, NOW - DAY, None, NOW) == (NOW - DAY, flight[1])
    assert report_period(flight, None, NOW, NOW) == (flight[0], NOW)


def test_a_flight_of_years_is_shown_from_a_year_ago_for_two_years_and_longer_asks_are_refused() -> None:
    flight = (NOW - 2000 * DAY, NOW + 20_000 * DAY)
    start, end = report_period(flight, None, None, NOW)
    assert start == NOW - NOW % DAY - 366 * DAY and end - start == MAX_PERIOD_DAYS * DAY
    ended = (NOW - 3000 * DAY, NOW - 1000 * DAY)
    assert report_period(ended, None, None, NOW) == (ended[1] - MAX_PERIOD_DAYS * DAY, ended[1])
    for start_at, end_at in ((NOW, NOW), (NOW, NOW - DAY), (NOW, NOW + (MAX_PERIOD_DAYS + 1) * DAY)):
        with pytest.raises(ApiError) as refused:
            report_period(flight, start_at, end_at, NOW)
        assert (refused.value.status, refused.value.field) == (400, "to")
