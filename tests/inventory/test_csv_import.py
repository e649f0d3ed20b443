"""Reading the venue CSV: lines numbered as an editor shows them, a lenient header, strict cells."""

from __future__ import annotations

import pytest

from adslot.errors import ApiError
from adslot.inventory.csv_import import CsvError, check_csv_content_type, parse_csv


def problems(body: str | bytes) -> list[tuple[int, str | None, str]]:
    parsed = parse_csv(body.encode() if isinstance(body, str) else body)
    return [(p.line, p.column, p.code) for p in parsed.problems]


def test_lines_are_counted_as_an_editor_shows_them_across_blank_lines_and_quoted_newlines() -> None:
    body = 'venue_id,name,width,screen_id\n\n"a","x",,\n"b","multi\nline",,\n\nc,y,0,s\n'
    assert problems(body) == [(4, "name", "invalid_field"), (7, "width", "invalid_field")]


def test_the_header_may_differ_in_case_and_spaces_and_may_start_with_a_bom() -> None:
    parsed = parse_csv("\ufeff Venue_ID , NAME ,Tags\nv,V, a ; b ;;\n".encode())
    venue = parsed.venues["v"]
    assert {k: value for k, (value, _) in venue.fields.items()} == {"name": "V", "tags": ["a", "b"]}


def test_a_venue_repeated_with_the_same_values_is_one_venue_with_its_screens() -> None:
    parsed = parse_csv(b"venue_id,name,screen_id,width\nv,V,s1,100\nv,V,s2,\nv,,s3,300\n")
    assert list(parsed.venues) == ["v"] and parsed.problems == []
    assert [(s.screen_id, s.line, s.fields) for s in parsed.screens.values()] == [
        ("s1", 2, {"width": 100}),
        ("s2", 3, {}),
        ("s3", 4, {"width": 300}),
    ]


def test_a_venue_value_that_changes_between_rows_conflicts() -> None:
    body = "venue_id,latitude,longitude\nv,1,2\nv,1.0,2\nv,1.5,\n"
    assert problems(body) == [(4, "latitude", "conflicting_value")]


def test_cells_are_checked_like_the_json_api_members() -> None:
    body = (
        "venue_id,country,timezone,impressions_per_play,mime_types,screen_id\nv,uk,Mars/Base,0,image/png,s\n"
    )
    assert problems(body) == [
        (2, "country", "invalid_field"),
        (2, "timezone", "invalid_timezone"),
        (2, "impressions_per_play", "invalid_field"),
        (2, "mime_types", "invalid_field"),
    ]


def test_country_cells_are_stored_in_upper_case() -> None:
    assert parse_csv(b"venue_id,country\nv,fr\n").venues["v"].fields["country"] == ("FR", 2)


def test_a_broken_file_is_refused_whole_with_the_line() -> None:
    with pytest.raises(CsvError) as raised:
        parse_csv(b'venue_id,name\nv,"open\n')
    assert raised.value.field == "line 2"
    assert [d.code for d in raised.value.details] == ["malformed_csv"]


def test_too_many_rows_is_payload_too_large() -> None:
    with pytest.raises(ApiError) as raised:
        parse_csv(b"venue_id\n" + b"v\n" * 50_001)
    assert (raised.value.status, raised.value.code) == (413, "payload_too_large")


@pytest.mark.parametrize("content_type", ["text/csv", "text/csv; charset=utf-8", 'TEXT/CSV;Charset="UTF-8"'])
def test_text_csv_in_utf8_is_accepted(content_type: str) -> None:
    check_csv_content_type(content_type)


@pytest.mark.parametrize(
    "content_type", [None, "", "text/plain", "application/csv", "text/csv; charset=latin-1"]
)
def test_any_other_content_type_is_unsupported(content_type: str | None) -> None:
    with pytest.raises(ApiError) as raised:
        check_csv_content_type(content_type)
    assert (raised.value.status, raised.value.code) == (415, "unsupported_media_type")
