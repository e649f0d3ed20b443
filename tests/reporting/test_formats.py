"""CSV and JSON renderings: the same figures, a header naming the grouped dimensions then the metrics,
empty cells for null, RFC 4180 quoting and line ends."""

from __future__ import annotations

import csv
import io
import json

import pytest

from adslot.reporting.aggregate import fold
from adslot.reporting.formats import (
    delivery_csv,
    delivery_json,
    playlog_csv_header,
    playlog_csv_rows,
    playlog_json,
)
from adslot.reporting.query import parse_delivery
from adslot.reporting.schemas import PlaylogPage, PlayRow
from tests.reporting.test_aggregate import group

METRICS = [
    "requests",
    "fills",
    "fill_rate",
    "plays",
    "impressions",
    "starts",
    "first_quartiles",
    "midpoints",
    "third_quartiles",
    "completes",
    "completion_rate",
    "late",
    "duplicates",
    "expired",
    "released",
]
INVALID = ["invalid_too_fast", "invalid_out_of_order", "invalid_foreign_network", "invalid_burst"]
"""The CSV's columns for the JSON's `invalid` counts."""
SPLIT = ["direct_plays", "programmatic_plays"]
"""Plays split into direct and programmatic: the CSV's last columns."""


def report_of(group_by: str) -> object:
    query = parse_delivery(start="0", end="3600", group_by=group_by)
    return fold(
        query,
        [
            group(venue_id='lobby, "east"', screen_id=None, fills=2, plays=1, impressions=1.25, starts=1),
            group(venue_id="mall", screen_id="s1", fills=1),
        ],
        [{"venue_id": "mall", "screen_id": "s1", "requests": 3}],
    )


def test_delivery_csv_has_dimension_then_metric_columns_and_crlf_lines() -> None:
    body = delivery_csv(report_of("screen")).decode()  # type: ignore[arg-type]
    assert body.endswith("\r\n") and body.count("\r\n") == 3
    rows = list(csv.reader(io.StringIO(body)))
    assert rows[0] == ["venue_id", "screen_id", *METRICS, *INVALID, *SPLIT]
    assert body.splitlines()[1].startswith('"lobby, ""east""",,0,2,,1,1.25,')
    assert rows[1] == ['lobby, "east"', "", "0", "2", "", "1", "1.25", "1", "0", "0", "0", "0", "0.0"] + [
        "0"
    ] * 8 + ["1", "0"]
    assert rows[2][:6] == ["mall", "s1", "3", "1", "0.3333", "0"]
    assert rows[2][12] == ""  # completion_rate without a start


def test_delivery_json_is_the_envelope_and_rows_carry_only_grouped_dimensions() -> None:
    body = json.loads(delivery_json(report_of("venue")))  # type: ignore[arg-type]
    assert body["status"] == 200
    assert body["data"]["group_by"] == ["venue"] and body["data"]["from"] == 0
    row = body["data"]["rows"][0]
    assert set(row) == {"venue_id", *METRICS, "invalid", *SPLIT}
    assert set(body["data"]["totals"]) == {*METRICS, "invalid", *SPLIT}


def test_playlog_csv_header_then_rows_with_empty_cells_for_events_not_counted() -> None:
    row = PlayRow("u-1", "v1", None, 100, 1, 10, 1.5, 101, 102, None, None, None, None, 2, 0)
    body = (playlog_csv_header() + playlog_csv_rows([row])).decode()
    assert body.splitlines() == [
        "ad_request_uuid,venue_id,screen_id,play_time,campaign_id,creative_id,impressions,impression_at,"
        "start_at,first_quartile_at,midpoint_at,third_quartile_at,complete_at,duplicate_count,late_count",
        "u-1,v1,,100,1,10,1.5,101,102,,,,,2,0",
    ]
    page = PlaylogPage(venue_id="v1", screen_id=None, from_=0, to=200, rows=[row], next_cursor=None)
    data = json.loads(playlog_json(page))["data"]
    assert data["rows"][0]["screen_id"] is None and data["rows"][0]["start_at"] == 102
    assert (data["from"], data["next_cursor"]) == (0, None)


def test_csv_text_a_spreadsheet_would_run_as_a_formula_starts_with_an_apostrophe() -> None:
    query = parse_delivery(start="0", end="3600", group_by="venue,screen")
    report = fold(
        query,
        [
            group(venue_id='=HYPERLINK("http://x","y")', screen_id="@SUM(A1)", fills=1),
            group(venue_id="+1", screen_id="-2", fills=1),
            group(venue_id="\tlobby", screen_id="\rs", fills=1),
            group(venue_id="lobby=east", screen_id="s-1", fills=1),
        ],
        [],
    )
    rows = list(csv.DictReader(io.StringIO(delivery_csv(report).decode())))  # type: ignore[arg-type]
    cells = sorted((row["venue_id"], row["screen_id"]) for row in rows)
    assert cells == sorted(
        [
            ('\'=HYPERLINK("http://x","y")', "'@SUM(A1)"),
            ("'+1", "'-2"),
            ("'\tlobby", "'\rs"),
            ("lobby=east", "s-1"),
        ]
    )
    assert {row["fills"] for row in rows} == {"1"}, "numbers are never prefixed"
    # JSON carries the ids exactly as stored.
    venues = {row["venue_id"] for row in json.loads(delivery_json(report))["data"]["rows"]}  # type: ignore[arg-type]
    assert '=HYPERLINK("http://x","y")' in venues and "+1" in venues


def test_playlog_csv_rows_neutralise_formulas_too() -> None:
    row = PlayRow("u-1", "=1+1", "-x", 100, 1, 10, 1.5, 101, None, None, None, None, None, 0, 0)
    assert playlog_csv_rows([row]).decode() == "u-1,'=1+1,'-x,100,1,10,1.5,101,,,,,,0,0\r\n"


@pytest.mark.parametrize(
    "text",
    [
        " =1+1",
        "\u00a0=cmd|' /C calc'!A0",
        "|cmd",
        "\uff1dSUM(A1)",
        "\uff20SUM(A1)",
        'lobby;=HYPERLINK("http://x")',
        "lobby, +1",
        "  -2",
    ],
)
def test_formulas_behind_blanks_pipes_fullwidth_signs_or_a_locale_s_separator_are_neutralised(
    text: str,
) -> None:
    row = PlayRow("u-1", text, None, 100, 1, 10, 1.5, 101, None, None, None, None, None, 0, 0)
    cell = next(csv.reader(io.StringIO(playlog_csv_rows([row]).decode())))[1]
    assert cell == "'" + text


@pytest.mark.parametrize("text", ["lobby", "lobby=east", "s-1", "Hall A; level 2", "a, b"])
def test_plain_text_with_signs_inside_is_written_as_it_is(text: str) -> None:
    row = PlayRow("u-1", text, None, 100, 1, 10, 1.5, 101, None, None, None, None, None, 0, 0)
    assert next(csv.reader(io.StringIO(playlog_csv_rows([row]).decode())))[1] == text
