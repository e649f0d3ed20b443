"""Folding SQL groups into report rows: sums per row, rates from sums, request counts joined in or null,
screens within their venue, stable order, and totals."""

from __future__ import annotations

from typing import Any

from adslot.reporting.aggregate import dimension_columns, fold, ratio
from adslot.reporting.query import parse_delivery
from tests.reporting.support import utc

ZERO = {
    "fills": 0,
    "plays": 0,
    "impressions": None,
    "starts": 0,
    "first_quartiles": 0,
    "midpoints": 0,
    "third_quartiles": 0,
    "completes": 0,
    "late": 0,
    "duplicates": 0,
    "expired": 0,
    "released": 0,
}


def group(**values: Any) -> dict[str, Any]:
    return ZERO | values


def test_screen_groups_by_venue_too_and_columns_follow_group_by() -> None:
    assert dimension_columns(["screen"]) == ("venue_id", "screen_id")
    assert dimension_columns(["hour", "screen", "venue"]) == ("hour", "venue_id", "screen_id")
    assert dimension_columns(["venue", "campaign", "screen"]) == ("venue_id", "campaign_id", "screen_id")


def test_rates_are_rounded_to_four_decimals_and_null_without_a_denominator() -> None:
    assert (ratio(2, 3), ratio(1, 0), ratio(1, None), ratio(0, 5)) == (0.6667, None, None, 0.0)


def test_groups_landing_in_one_row_are_summed_and_rates_come_from_the_sums() -> None:
    query = parse_delivery(start="0", end="86400", group_by="campaign")
    report = fold(
        query,
        [
            group(campaign_id=2, fills=4, plays=3, impressions=2.0005, starts=3, completes=1, duplicates=2),
            group(campaign_id=2, fills=6, plays=5, impressions=4.0, starts=1, completes=1, late=3),
            group(campaign_id=1, fills=1, expired=1, released=0),
        ],
        None,
    )
    first, second = report.rows
    assert (first.campaign_id, first.fills, first.expired, first.completion_rate) == (1, 1, 1, None)
    assert (second.campaign_id, second.fills, second.plays, second.impressions) == (2, 10, 8, 6.001)
    assert (second.starts, second.completes, second.completion_rate) == (4, 2, 0.5)
    assert (second.late, second.duplicates, second.requests, second.fill_rate) == (3, 2, None, None)
    assert (report.totals.fills, report.totals.plays, report.totals.impressions) == (11, 8, 6.001)
    assert report.totals.requests is None


def test_request_counts_join_their_rows_and_add_rows_that_had_no_fill() -> None:
    query = parse_delivery(start="0", end="7200", group_by="venue")
    report = fold(
        query,
        [group(venue_id="a", fills=3, plays=3, impressions=3.0)],
        [
            {"venue_id": "a", "requests": 4},
            {"venue_id": "a", "requests": 2},
            {"venue_id": "b", "requests": 5},
        ],
    )
    a, b = report.rows
    assert (a.venue_id, a.requests, a.fills, a.fill_rate) == ("a", 6, 3, 0.5)
    assert (b.venue_id, b.requests, b.fills, b.fill_rate, b.plays) == ("b", 5, 0, 0.0, 0)
    assert (report.totals.requests, report.totals.fills, report.totals.fill_rate) == (11, 3, 0.2727)


def test_no_screen_is_one_row_whether_sql_said_null_or_request_stats_said_empty() -> None:
    query = parse_delivery(start="0", end="3600", group_by="screen")
    report = fold(
        query,
        [group(venue_id="a", screen_id=None, fills=1), group(venue_id="a", screen_id="s1", fills=2)],
        [
            {"venue_id": "a", "screen_id": "", "requests": 2},
            {"venue_id": "a", "screen_id": "s1", "requests": 2},
        ],
    )
    assert [(r.venue_id, r.screen_id, r.requests, r.fills) for r in report.rows] == [
        ("a", None, 2, 1),
        ("a", "s1", 2, 2),
    ]


def test_hours_sort_by_instant_so_the_repeated_autumn_hour_follows_its_first_self() -> None:
    query = parse_delivery(
        start=str(utc("2026-10-24T22:00")), end=str(utc("2026-10-25T03:00")), group_by="day,hour"
    )
    wall = utc("2026-10-25T02:00")
    report = fold(
        query,
        [
            group(wall=wall, utc_offset=3600, fills=5),
            group(wall=utc("2026-10-25T01:00"), utc_offset=7200, fills=1),
            group(wall=wall, utc_offset=7200, fills=7),
        ],
        None,
    )
    assert [(r.day, r.hour, r.fills) for r in report.rows] == [
        ("2026-10-25", "2026-10-25T01:00:00+02:00", 1),
        ("2026-10-25", "2026-10-25T02:00:00+02:00", 7),
        ("2026-10-25", "2026-10-25T02:00:00+01:00", 5),
    ]


def test_the_report_echoes_its_range_zone_grouping_and_filters() -> None:
    query = parse_delivery(
        start="0", end="3600", group_by="creative", timezone="Asia/Tokyo", campaign_id="4", venue_id="v"
    )
    report = fold(query, [], None)
    assert (report.from_, report.to, report.timezone, report.group_by) == (
        0,
        3600,
        "Asia/Tokyo",
        ["creative"],
    )
    assert (report.filters.campaign_id, report.filters.venue_id, report.filters.screen_id) == (4, "v", None)
    assert report.rows == [] and report.totals.fills == 0 and report.totals.impressions == 0.0
