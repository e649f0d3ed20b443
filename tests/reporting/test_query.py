"""Report parameters: defaults, and each bad value answered with its exact status, code and field."""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from adslot.errors import ApiError
from adslot.reporting.query import Cursor, parse_delivery, parse_playlog

DAY = 86_400


def test_delivery_defaults_group_by_campaign_in_utc_as_json() -> None:
    query = parse_delivery(start="3600", end="7200")
    assert (query.start, query.end, query.group_by, query.timezone, query.fmt) == (
        3600,
        7200,
        ("campaign",),
        "UTC",
        "json",
    )
    assert (query.campaign_id, query.venue_id, query.screen_id) == (None, None, None)


def test_delivery_keeps_the_group_by_order_and_reads_every_filter() -> None:
    query = parse_delivery(
        start="0",
        end=str(366 * DAY),
        group_by="hour,screen,campaign",
        timezone="Asia/Kolkata",
        campaign_id="7",
        venue_id="lobby",
        screen_id="s 1",
        fmt="csv",
    )
    assert query.group_by == ("hour", "screen", "campaign")
    assert (query.timezone, str(query.zone)) == ("Asia/Kolkata", "Asia/Kolkata")
    assert (query.campaign_id, query.venue_id, query.screen_id, query.fmt) == (7, "lobby", "s 1", "csv")
    assert query.by_time and query.requests_by_campaign


@pytest.mark.parametrize(
    ("group_by", "campaign_id", "expected"),
    [("venue,screen,day,hour", None, False), ("venue", "3", True), ("creative", None, True)],
)
def test_requests_only_fit_reports_not_split_or_filtered_by_campaign(
    group_by: str, campaign_id: str | None, expected: bool
) -> None:
    query = parse_delivery(start="0", end="3600", group_by=group_by, campaign_id=campaign_id)
    assert query.requests_by_campaign is expected


DELIVERY_OK: dict[str, str] = {"start": "3600", "end": "7200"}


@pytest.mark.parametrize(
    ("changes", "status", "code", "field"),
    [
        ({"start": None}, 400, "missing_field", "from"),
        ({"end": None}, 400, "missing_field", "to"),
        ({"start": ""}, 400, "empty_value", "from"),
        ({"start": "soon"}, 400, "invalid_type", "from"),
        ({"start": "1.5"}, 400, "invalid_type", "from"),
        ({"start": "٣٦٠٠"}, 400, "invalid_type", "from"),  # int() would take Arabic-Indic digits
        ({"start": "-1"}, 400, "invalid_field", "from"),
        ({"end": "99999999999999"}, 400, "invalid_field", "to"),
        ({"end": "3600"}, 400, "invalid_field", "to"),
        ({"end": "1000"}, 400, "invalid_field", "to"),
        ({"end": str(3600 + 366 * DAY + 1)}, 400, "invalid_field", "to"),
        ({"group_by": "campaign,week"}, 400, "invalid_field", "group_by"),
        ({"group_by": "day,day"}, 400, "invalid_field", "group_by"),
        ({"group_by": ""}, 400, "invalid_field", "group_by"),
        ({"group_by": "campaign, venue"}, 400, "invalid_field", "group_by"),
        ({"timezone": "Mars/Olympus"}, 422, "invalid_timezone", "timezone"),
        ({"timezone": "../../etc/passwd"}, 422, "invalid_timezone", "timezone"),
        ({"timezone": "/usr/share/zoneinfo/UTC"}, 422, "invalid_timezone", "timezone"),
        ({"timezone": "Europe"}, 422, "invalid_timezone", "timezone"),
        ({"timezone": ""}, 422, "invalid_timezone", "timezone"),
        ({"fmt": "xml"}, 400, "invalid_format", "format"),
        ({"campaign_id": "0"}, 400, "invalid_field", "campaign_id"),
        ({"campaign_id": str(2**31)}, 400, "invalid_field", "campaign_id"),
        ({"campaign_id": "one"}, 400, "invalid_type", "campaign_id"),
        ({"venue_id": ""}, 400, "empty_value", "venue_id"),
        ({"venue_id": "v" * 129}, 400, "too_long", "venue_id"),
        ({"screen_id": "s\x01"}, 400, "invalid_characters", "screen_id"),
    ],
)
def test_bad_delivery_parameters_name_their_field(
    changes: dict[str, Any], status: int, code: str, field: str
) -> None:
    with pytest.raises(ApiError) as raised:
        parse_delivery(**(DELIVERY_OK | changes))
    assert (raised.value.status, raised.value.code, raised.value.field) == (status, code, field)


def test_the_longest_delivery_range_is_366_days() -> None:
    assert parse_delivery(start="0", end=str(366 * DAY)).end == 366 * DAY


def test_playlog_defaults_and_cursor_round_trip() -> None:
    query = parse_playlog(venue_id="lobby", start="0", end=str(31 * DAY))
    assert (query.fmt, query.limit, query.after, query.screen_id) == ("json", 10_000, None, None)
    cursor = Cursor(1_792_900_000, uuid.UUID("0190f0a0-0000-7000-8000-000000000001"))
    again = parse_playlog(venue_id="lobby", start="0", end="10", after=cursor.encode(), limit="100000")
    assert (again.after, again.limit) == (cursor, 100_000)


PLAYLOG_OK: dict[str, str] = {"venue_id": "lobby", "start": "3600", "end": "7200"}


@pytest.mark.parametrize(
    ("changes", "status", "code", "field"),
    [
        ({"venue_id": None}, 400, "missing_field", "venue_id"),
        ({"venue_id": " "}, 400, "empty_value", "venue_id"),
        ({"start": None}, 400, "missing_field", "from"),
        ({"end": str(3600 + 31 * DAY + 1)}, 400, "invalid_field", "to"),
        ({"limit": "0"}, 400, "invalid_field", "limit"),
        ({"limit": "100001"}, 400, "invalid_field", "limit"),
        ({"limit": "ten"}, 400, "invalid_type", "limit"),
        ({"after": "next"}, 400, "invalid_field", "cursor"),
        ({"after": "12." + "G" * 32}, 400, "invalid_field", "cursor"),
        ({"fmt": "jsonl"}, 400, "invalid_format", "format"),
        ({"screen_id": "x" * 129}, 400, "too_long", "screen_id"),
    ],
)
def test_bad_playlog_parameters_name_their_field(
    changes: dict[str, Any], status: int, code: str, field: str
) -> None:
    with pytest.raises(ApiError) as raised:
        parse_playlog(**(PLAYLOG_OK | changes))
    assert (raised.value.status, raised.value.code, raised.value.field) == (status, code, field)
