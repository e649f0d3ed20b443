"""The reports' SQL on SQLite and PostgreSQL, against rows written directly: every metric's exact figure,
each grouping, request counts and when they cannot be attributed, DST days of 23 and 25 hours, local hours
of half- and quarter-hour zones, and play log paging by cursor."""

from __future__ import annotations

import pytest
import sqlalchemy as sa

from adslot.errors import ApiError
from adslot.reporting import repository
from adslot.reporting.query import parse_delivery, parse_playlog
from adslot.reporting.repository import delivery_report, playlog_batches, playlog_page
from adslot.reporting.schemas import DeliveryReport
from tests.reporting.support import ad_request, insert, played, stat, utc

T = utc("2026-06-01T10:00")
ALL_EVENTS = ("start", "first_quartile", "midpoint", "third_quartile", "complete")


def report(engine: sa.Engine, now: int = T + 3000, **params: str) -> DeliveryReport:
    query = parse_delivery(**params)  # type: ignore[arg-type]
    with engine.connect() as conn:
        return delivery_report(conn, query, now)


def figures(row: object, *names: str) -> tuple[object, ...]:
    return tuple(getattr(row, name) for name in names)


def test_every_metric_by_campaign_counts_only_the_range_and_its_filters(db: sa.Engine) -> None:
    insert(
        db,
        [
            played(T, *ALL_EVENTS, impressions=2.5, duplicate_count=2),
            played(T + 60, "start", "first_quartile", creative_id=11, impressions=0.3333, late_count=1),
            ad_request(T + 120),  # expiry passed unplayed, not yet settled: expired
            ad_request(T + 180, settle_reason="expired", settled_at=T + 1080),
            ad_request(T + 240, settle_reason="released", settled_at=T + 250),
            ad_request(T + 300, campaign_id=2, expires_at=T + 3100),  # still playable at now
            played(T + 360, campaign_id=2, settle_reason="played", settled_at=T + 1260),
            played(T, venue_id="v2"),
            played(T - 1),  # before from
            played(T + 3600),  # at to: excluded
        ],
    )
    result = report(db, start=str(T), end=str(T + 3600))
    one, two = result.rows
    assert figures(one, "campaign_id", "requests", "fills", "fill_rate", "plays", "impressions") == (
        1,
        None,
        6,
        None,
        3,
        3.833,
    )
    assert figures(one, "starts", "first_quartiles", "midpoints", "third_quartiles", "completes") == (
        2,
        2,
        1,
        1,
        1,
    )
    assert figures(one, "completion_rate", "late", "duplicates", "expired", "released") == (0.5, 1, 2, 2, 1)
    assert figures(two, "campaign_id", "fills", "plays", "impressions", "starts", "completion_rate") == (
        2,
        2,
        1,
        1.0,
        0,
        None,
    )
    assert figures(two, "expired", "released") == (0, 0)
    assert figures(result.totals, "fills", "plays", "impressions", "expired", "released", "requests") == (
        8,
        4,
        4.833,
        2,
        1,
        None,
    )
    venue_only = report(db, start=str(T), end=str(T + 3600), venue_id="v1", campaign_id="1")
    assert [figures(r, "campaign_id", "fills", "plays", "impressions") for r in venue_only.rows] == [
        (1, 5, 2, 2.833)
    ]
    by_creative = report(db, start=str(T), end=str(T + 3600), group_by="campaign,creative")
    assert [figures(r, "campaign_id", "creative_id", "fills", "plays") for r in by_creative.rows] == [
        (1, 10, 5, 2),
        (1, 11, 1, 1),
        (2, 10, 2, 1),
    ]


def test_an_unplayed_ad_request_is_expired_only_once_its_expiry_is_past(db: sa.Engine) -> None:
    insert(db, [ad_request(T)])
    assert report(db, now=T + 900, start=str(T), end=str(T + 3600)).totals.expired == 0
    assert report(db, now=T + 901, start=str(T), end=str(T + 3600)).totals.expired == 1


def test_a_report_with_more_groups_than_the_limit_is_refused_with_advice(
    db: sa.Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(repository, "MAX_GROUPS", 2)
    insert(db, [played(T), played(T + 3600), played(T + 7200)])
    assert len(report(db, start=str(T), end=str(T + 7200), group_by="hour").rows) == 2
    with pytest.raises(ApiError) as raised:
        report(db, start=str(T), end=str(T + 10800), group_by="hour")
    assert (raised.value.status, raised.value.code, raised.value.field) == (
        400,
        "report_too_large",
        "group_by",
    )
    assert len(report(db, start=str(T), end=str(T + 10800), group_by="day").rows) == 1


def requests_data(db: sa.Engine) -> None:
    insert(
        db,
        [
            played(T),
            played(T, screen_id="s1"),
            ad_request(T + 10, screen_id="s1"),
            played(T, venue_id="v2", screen_id="s1", campaign_id=2),
        ],
        [
            stat("v1", T, 4),
            stat("v1", T, 5, "s1"),
            stat("v2", T, 2, "s1"),
            stat("v3", T, 7),
            stat("v1", T - 3600, 9),
        ],
    )


def test_requests_and_fill_rate_per_venue_and_screen(db: sa.Engine) -> None:
    requests_data(db)
    keys = ("venue_id", "screen_id", "requests", "fills", "fill_rate")
    by_screen = report(db, start=str(T), end=str(T + 3600), group_by="screen")
    assert [figures(r, *keys) for r in by_screen.rows] == [
        ("v1", None, 4, 1, 0.25),
        ("v1", "s1", 5, 2, 0.4),
        ("v2", "s1", 2, 1, 0.5),
        ("v3", None, 7, 0, 0.0),
    ]
    assert figures(by_screen.totals, "requests", "fills", "fill_rate") == (18, 4, 0.2222)
    by_venue = report(db, start=str(T), end=str(T + 3600), group_by="venue")
    assert [figures(r, "venue_id", "requests", "fills", "fill_rate") for r in by_venue.rows] == [
        ("v1", 9, 3, 0.3333),
        ("v2", 2, 1, 0.5),
        ("v3", 7, 0, 0.0),
    ]
    one_screen = report(db, start=str(T), end=str(T + 3600), group_by="venue", screen_id="s1")
    assert [figures(r, "venue_id", "requests", "fills") for r in one_screen.rows] == [
        ("v1", 5, 2),
        ("v2", 2, 1),
    ]


def test_requests_are_null_when_split_or_filtered_by_campaign_or_off_the_utc_hour(db: sa.Engine) -> None:
    requests_data(db)
    for params in (
        {"group_by": "campaign"},
        {"group_by": "venue,creative"},
        {"group_by": "venue", "campaign_id": "1"},
    ):
        result = report(db, start=str(T), end=str(T + 3600), **params)
        assert all(r.requests is None and r.fill_rate is None for r in result.rows), params
        assert result.totals.requests is None
    off_hour = report(db, start=str(T + 1), end=str(T + 3600), group_by="venue")
    assert [figures(r, "venue_id", "requests", "fills") for r in off_hour.rows] == [("v1", None, 1)]


def hourly(
    start: str, hours: int, requests: int = 2
) -> tuple[list[dict[str, object]], list[dict[str, object]]]:
    first = utc(start)
    times = [first + 3600 * n for n in range(hours)]
    return [played(t) for t in times], [stat("v1", t, requests) for t in times]


def test_berlin_autumn_day_has_25_hours_with_the_repeated_hour_twice(db: sa.Engine) -> None:
    rows, stats = hourly("2026-10-24T21:00", 28)  # through 2026-10-26T00:00 UTC
    insert(db, rows, stats)
    params = {"start": str(utc("2026-10-24T21:00")), "end": str(utc("2026-10-26T01:00"))}
    days = report(db, group_by="day", timezone="Europe/Berlin", **params)
    assert [figures(r, "day", "fills", "requests", "fill_rate") for r in days.rows] == [
        ("2026-10-24", 1, 2, 0.5),
        ("2026-10-25", 25, 50, 0.5),
        ("2026-10-26", 2, 4, 0.5),
    ]
    hours = report(db, group_by="day,hour", timezone="Europe/Berlin", **params)
    october_25 = [r.hour for r in hours.rows if r.day == "2026-10-25"]
    assert len(october_25) == 25 and all(r.fills == 1 and r.requests == 2 for r in hours.rows)
    assert october_25[:4] == [
        "2026-10-25T00:00:00+02:00",
        "2026-10-25T01:00:00+02:00",
        "2026-10-25T02:00:00+02:00",
        "2026-10-25T02:00:00+01:00",
    ]
    assert october_25[-1] == "2026-10-25T23:00:00+01:00"
    utc_days = report(db, group_by="day", **params)
    assert [figures(r, "day", "fills") for r in utc_days.rows] == [
        ("2026-10-24", 3),
        ("2026-10-25", 24),
        ("2026-10-26", 1),
    ]


def test_berlin_spring_day_has_23_hours_and_no_two_oclock(db: sa.Engine) -> None:
    rows, stats = hourly("2026-03-28T23:00", 23)  # local midnight to midnight of 2026-03-29
    insert(db, rows, stats)
    params = {"start": str(utc("2026-03-28T23:00")), "end": str(utc("2026-03-29T22:00"))}
    hours = report(db, group_by="hour", timezone="Europe/Berlin", **params)
    labels = [r.hour for r in hours.rows]
    assert len(labels) == 23 and labels[1:3] == ["2026-03-29T01:00:00+01:00", "2026-03-29T03:00:00+02:00"]
    days = report(db, group_by="day", timezone="Europe/Berlin", **params)
    assert [figures(r, "day", "fills", "requests") for r in days.rows] == [("2026-03-29", 23, 46)]


def test_kolkata_hours_and_days_start_at_half_past_utc_hours(db: sa.Engine) -> None:
    insert(
        db,
        [
            played(utc("2026-10-25T00:29:59")),  # 05:59:59 IST
            played(utc("2026-10-25T00:30:00")),  # 06:00:00 IST
            played(utc("2026-10-25T18:29:59")),  # 23:59:59 IST on the 25th
            played(utc("2026-10-25T18:30:00")),  # 00:00:00 IST on the 26th
        ],
        [stat("v1", utc("2026-10-25T00:00"), 10)],
    )
    params = {
        "start": str(utc("2026-10-25T00:00")),
        "end": str(utc("2026-10-26T00:00")),
        "timezone": "Asia/Kolkata",
    }
    hours = report(db, group_by="hour", **params)
    assert [figures(r, "hour", "fills", "requests") for r in hours.rows] == [
        ("2026-10-25T05:00:00+05:30", 1, None),
        ("2026-10-25T06:00:00+05:30", 1, None),
        ("2026-10-25T23:00:00+05:30", 1, None),
        ("2026-10-26T00:00:00+05:30", 1, None),
    ]
    days = report(db, group_by="day", **params)
    assert [figures(r, "day", "fills") for r in days.rows] == [("2026-10-25", 3), ("2026-10-26", 1)]
    whole = report(db, group_by="venue", **params)
    assert [figures(r, "requests", "fills", "fill_rate") for r in whole.rows] == [(10, 4, 0.4)]


def test_kathmandu_hours_start_at_a_quarter_past_utc_hours(db: sa.Engine) -> None:
    insert(db, [played(utc("2026-10-25T00:14:59")), played(utc("2026-10-25T00:15:00"))])
    hours = report(
        db,
        group_by="hour",
        timezone="Asia/Kathmandu",
        start=str(utc("2026-10-25T00:00")),
        end=str(utc("2026-10-25T01:00")),
    )
    assert [r.hour for r in hours.rows] == ["2026-10-25T05:00:00+05:45", "2026-10-25T06:00:00+05:45"]


def test_playlog_pages_by_cursor_through_ties_without_losing_or_repeating_a_play(db: sa.Engine) -> None:
    same = [played(T, "start", screen_id="s1") for _ in range(5)]
    insert(
        db,
        [
            *same,
            played(T - 1),
            played(T + 1, screen_id="s2"),
            ad_request(T),  # not played
            played(T, venue_id="v2"),
            played(T + 600, impressions=2.0),  # after to
        ],
    )
    query = parse_playlog(venue_id="v1", start=str(T - 1), end=str(T + 600), limit="2")
    seen: list[tuple[int, str]] = []
    pages = 0
    with db.connect() as conn:
        while True:
            page = playlog_page(conn, query)
            pages += 1
            seen += [(row.play_time, row.ad_request_uuid) for row in page.rows]
            if page.next_cursor is None:
                break
            query = parse_playlog(
                venue_id="v1", start=str(T - 1), end=str(T + 600), limit="2", after=page.next_cursor
            )
    assert pages == 4 and len(seen) == 7 and len(set(seen)) == 7
    assert seen == sorted(seen, key=lambda item: (item[0], item[1].replace("-", "")))
    assert seen[0][0] == T - 1 and seen[-1][0] == T + 1
    assert sorted(uuid for t, uuid in seen if t == T) == sorted(str(r["id"]) for r in same)


def test_playlog_rows_carry_the_proof_of_play_record_and_filter_by_screen(db: sa.Engine) -> None:
    row = played(T, "start", "complete", screen_id="s1", impressions=1.75, duplicate_count=3, late_count=1)
    insert(db, [row, played(T + 5, screen_id="s2")])
    query = parse_playlog(venue_id="v1", start=str(T), end=str(T + 60), screen_id="s1")
    with db.connect() as conn:
        page = playlog_page(conn, query)
        batches = list(playlog_batches(conn, parse_playlog(venue_id="v1", start=str(T), end=str(T + 60))))
    (only,) = page.rows
    assert only.ad_request_uuid == str(row["id"])
    assert figures(
        only, "venue_id", "screen_id", "play_time", "campaign_id", "creative_id", "impressions"
    ) == (
        "v1",
        "s1",
        T,
        1,
        10,
        1.75,
    )
    assert figures(only, "impression_at", "start_at", "first_quartile_at", "complete_at") == (T, T, None, T)
    assert (only.duplicate_count, only.late_count, page.next_cursor) == (3, 1, None)
    assert [[r.screen_id for r in batch] for batch in batches] == [["s1", "s2"]]


def test_a_range_longer_than_the_apis_limit_is_read_window_by_window_to_the_sum_of_its_windows(
    db: sa.Engine,
) -> None:
    day = 86_400
    start = T - 10 * 365 * day  # a ten-year flight ending at T: rows in its first, middle and last windows
    insert(
        db,
        [
            played(start, "start", impressions=2.0),
            played(start + 366 * day - 1, "start", "complete"),  # the first window's last second
            played(start + 366 * day, "start"),  # the second window's first
            played(start + 5 * 365 * day + 7200, venue_id="v2"),
            ad_request(T - 3600, settle_reason="released", settled_at=T - 3500),
        ],
        [stat("v1", start, 4), stat("v1", T - 3600, 3)],
    )
    whole = report(db, start=str(start), end=str(T), group_by="venue", max_days=None)  # type: ignore[arg-type]
    parts = [
        report(db, start=str(first), end=str(last), group_by="venue")
        for first, last in repository.windows(start, T)
    ]
    assert len(parts) == 10
    names = ("requests", "fills", "plays", "impressions", "starts", "completes", "released")
    for row in whole.rows:
        summed = [
            sum(getattr(r, name) for part in parts for r in part.rows if r.venue_id == row.venue_id)
            for name in names
        ]
        assert summed == [getattr(row, name) for name in names]
    assert (whole.totals.fills, whole.totals.plays, whole.totals.starts, whole.totals.completes) == (
        5,
        4,
        3,
        1,
    )
    assert (whole.totals.requests, whole.totals.released, whole.totals.impressions) == (7, 1, 5.0)
    with pytest.raises(ApiError) as refused:
        parse_delivery(start=str(start), end=str(T))  # the API's own limit stands
    assert refused.value.field == "to"


def test_a_local_day_cut_by_a_window_boundary_is_one_row_summing_both_sides(db: sa.Engine) -> None:
    day = 86_400
    start = T - 400 * day  # a window boundary at start + 366 days, 10:00 UTC: mid-day in Kolkata too
    boundary = start + 366 * day
    insert(db, [played(boundary - 60), played(boundary + 60, "start")])
    whole = report(
        db,
        start=str(start),
        end=str(T),
        group_by="day",
        timezone="Asia/Kolkata",
        max_days=None,  # type: ignore[arg-type]
    )
    assert [(row.day, row.plays, row.starts) for row in whole.rows] == [("2026-04-28", 2, 1)]
