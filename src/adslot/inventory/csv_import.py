"""Bulk venues and screens from CSV: every row checked first, then all stored in one transaction, or nothing.

A network's inventory lives in spreadsheets; a half-applied import (the first 3,000 rows stored, row 3,001
bad) would leave the operator guessing what to fix and what to re-send. So the whole file is parsed and
checked, with the same msgspec constraints and repository checks as the JSON API, every problem is reported
with its line and column, and only a clean file is written.

One row per screen; a venue's columns may be repeated (identically) or left blank on its further rows. A
blank cell leaves an existing value as it is, and takes the default for a new venue or screen.
"""

from __future__ import annotations

import csv
import io
import json
import time
import typing
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import msgspec
import sqlalchemy as sa

from adslot.errors import ApiError
from adslot.fleet.hours import HoursError, Schedule, parse_schedule
from adslot.fleet.repository import set_hours
from adslot.inventory.repository import screen_changes, screen_values, venue_changes, venue_values
from adslot.inventory.schemas import ImportResult, ScreenIn, ScreenPatch, VenueIn, VenuePatch
from adslot.places import check_timezone, country_code
from adslot.storage.database import conflict_as
from adslot.storage.tables import screens, venues

MAX_CSV_BYTES = 5 * 1024 * 1024
MAX_CSV_ROWS = 50_000
MAX_DETAILS = 100
"""Problems listed in one answer; the message counts them all."""
CHUNK = 500
"""Ids per IN (...) lookup: well under every driver's parameter limit."""
CONCURRENT_IMPORT = ApiError(
    409,
    "concurrent_change",
    "another request created some of these venues or screens while this import ran; nothing was imported, "
    "send it again",
    "body",
)

VENUE_COLUMNS = {
    name: name
    for name in (
        "venue_id",
        "name",
        "timezone",
        "latitude",
        "longitude",
        "venue_type",
        "tags",
        "country",
        "region",
        "city",
        "impressions_per_play",
    )
}
SCREEN_COLUMNS = {
    "screen_id": "screen_id",
    "screen_name": "name",
    "width": "width",
    "height": "height",
    "orientation": "orientation",
    "mime_types": "mime_types",
    "max_duration_seconds": "max_duration_seconds",
}
LIST_COLUMNS = frozenset({"tags", "mime_types"})
HOURS = "hours"
"""The venue's opening hours, as JSON (fleet/hours.py): set with the venue, replacing any it had."""
_VENUE_TYPES = typing.get_type_hints(VenueIn, include_extras=True)
_SCREEN_TYPES = typing.get_type_hints(ScreenIn, include_extras=True)


class CsvProblem(msgspec.Struct):
    line: int
    column: str | None
    code: str
    message: str


class CsvError(ApiError):
    """400 invalid_csv: the error envelope, its field naming the first problem, plus every problem in
    `error.details`."""

    def __init__(self, problems: list[CsvProblem]) -> None:
        problems = sorted(problems, key=lambda p: p.line)
        first = problems[0]
        where = f"line {first.line}" + (f": {first.column}" if first.column else "")
        super().__init__(
            400,
            "invalid_csv",
            f"{len(problems)} problem(s) in the CSV, nothing was stored; the first, {where}: {first.message}",
            where,
        )
        self.details = problems[:MAX_DETAILS]

    def body(self) -> bytes:
        error = {"code": self.code, "message": self.message, "field": self.field, "details": self.details}
        return msgspec.json.encode({"status": self.status, "error": error})


def check_csv_content_type(content_type: str | None) -> None:
    """415 unless the body is declared text/csv (in UTF-8, or with no charset, which means UTF-8 here)."""
    media_type, _, params = (content_type or "").partition(";")
    charset = ""
    for param in params.split(";"):
        key, _, value = param.partition("=")
        if key.strip().lower() == "charset":
            charset = value.strip().strip('"').lower()
    if media_type.strip().lower() != "text/csv" or charset not in ("", "utf-8", "utf8"):
        raise ApiError(
            415, "unsupported_media_type", "the body must be Content-Type: text/csv in UTF-8", "content-type"
        )


@dataclass
class _Venue:
    line: int
    """The first line that names the venue."""
    fields: dict[str, tuple[Any, int]] = field(default_factory=dict)
    """VenueIn field -> (value, line it was first given on)."""


@dataclass
class _Screen:
    venue_id: str
    screen_id: str
    line: int
    fields: dict[str, Any]


@dataclass
class _Parsed:
    venues: dict[str, _Venue] = field(default_factory=dict)
    screens: dict[tuple[str, str], _Screen] = field(default_factory=dict)
    problems: list[CsvProblem] = field(default_factory=list)
    faulty: set[str] = field(default_factory=set)
    """Venues with a bad cell: their whole-venue checks would only repeat that problem."""
    hours: dict[str, Schedule | None] = field(default_factory=dict)
    """Each venue's opening hours where an `hours` cell gives them (fleet/hours.py's JSON; `always`: none)."""


def _text(body: bytes) -> str:
    if body.startswith(b"\xef\xbb\xbf"):
        body = body[3:]
    try:
        return body.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = body[: exc.start].count(b"\n") + 1
        message = f"not UTF-8 (byte {exc.start + 1} of the file)"
        raise CsvError([CsvProblem(line, None, "invalid_encoding", message)]) from exc


def _records(text: str) -> Iterator[tuple[int, list[str]]]:
    """Non-blank records with the line each starts on (a quoted cell may span lines)."""
    reader = csv.reader(io.StringIO(text, newline=""), strict=True)
    line = 1
    while True:
        try:
            record = next(reader)
        except StopIteration:
            return
        except csv.Error as exc:
            raise CsvError([CsvProblem(reader.line_num, None, "malformed_csv", str(exc))]) from exc
        if any(cell.strip() for cell in record):
            yield line, record
        line = reader.line_num + 1


def _header(line: int, record: list[str]) -> list[str]:
    columns = [cell.strip().lower() for cell in record]
    problems = []
    for i, name in enumerate(columns):
        if name not in VENUE_COLUMNS and name not in SCREEN_COLUMNS and name != HOURS:
            known = ", ".join([*VENUE_COLUMNS, HOURS, *SCREEN_COLUMNS])
            problems.append(CsvProblem(line, name, "unknown_column", f"unknown column; known: {known}"))
        elif name in columns[:i]:
            problems.append(CsvProblem(line, name, "duplicate_column", "the column is named twice"))
    if "venue_id" not in columns:
        problems.append(CsvProblem(line, "venue_id", "missing_column", "the header needs a venue_id column"))
    if any(c in SCREEN_COLUMNS for c in columns) and "screen_id" not in columns:
        problems.append(
            CsvProblem(line, "screen_id", "missing_column", "screen columns need a screen_id column")
        )
    if problems:
        raise CsvError(problems)
    return columns


def _hours(raw: str) -> Schedule | None:
    """An `hours` cell: the API's JSON object of days (`{"mon": ["08:00-22:00"]}`), or `always`."""
    if raw.lower() == "always":
        return None
    try:
        value = json.loads(raw)
    except json.JSONDecodeError as exc:
        raise HoursError(f"not JSON: {exc.msg}", "hours") from exc
    return parse_schedule(value)


def _cell(column: str, raw: str, kind: Any) -> Any:
    """The cell converted and checked as the JSON API would check the same member; raises ApiError."""
    value: Any = [part.strip() for part in raw.split(";") if part.strip()] if column in LIST_COLUMNS else raw
    try:
        value = msgspec.convert(value, kind, strict=False)
    except msgspec.ValidationError as exc:
        raise ApiError(400, "invalid_field", str(exc), column) from exc
    if column == "country":
        return country_code(value, column)
    if column == "timezone":
        check_timezone(value, column)
    return value


def parse_csv(body: bytes) -> _Parsed:
    """Every row read and each cell checked on its own; raises CsvError for a broken file or header, and
    413 for too many rows. Problems with single cells are collected, not raised."""
    records = _records(_text(body))
    first = next(records, None)
    if first is None:
        raise CsvError([CsvProblem(1, None, "missing_header", "the CSV is empty: it needs a header row")])
    columns = _header(*first)
    parsed = _Parsed()
    for count, (line, record) in enumerate(records, start=1):
        if count > MAX_CSV_ROWS:
            raise ApiError(413, "payload_too_large", f"more than {MAX_CSV_ROWS} rows; split the file", "body")
        _row(parsed, line, columns, record)
    return parsed


def _row(parsed: _Parsed, line: int, columns: list[str], record: list[str]) -> None:
    if len(record) > len(columns):
        parsed.problems.append(
            CsvProblem(line, None, "too_many_values", f"{len(record)} values for {len(columns)} columns")
        )
        return
    venue: dict[str, Any] = {}
    screen: dict[str, Any] = {}
    bad = False
    hours: Schedule | bool | None = False
    for column, raw in zip(columns, record, strict=False):
        if not raw.strip():
            continue
        if column == HOURS:
            try:
                hours = _hours(raw.strip())
            except HoursError as exc:
                parsed.problems.append(CsvProblem(line, HOURS, "invalid_field", f"{exc.field}: {exc}"))
                bad = True
            continue
        is_venue = column in VENUE_COLUMNS
        name = VENUE_COLUMNS[column] if is_venue else SCREEN_COLUMNS[column]
        kind = (_VENUE_TYPES if is_venue else _SCREEN_TYPES)[name]
        try:
            value = _cell(column, raw.strip(), kind)
        except ApiError as exc:
            parsed.problems.append(CsvProblem(line, column, exc.code, exc.message))
            bad = True
            continue
        (venue if is_venue else screen)[name] = value
    venue_id = venue.pop("venue_id", None)
    if venue_id is None:
        if not bad:
            parsed.problems.append(
                CsvProblem(line, "venue_id", "missing_value", "every row needs a venue_id")
            )
        return
    if bad:
        parsed.faulty.add(venue_id)
    if hours is not False:
        parsed.hours[venue_id] = hours  # type: ignore[assignment]
    entry = parsed.venues.setdefault(venue_id, _Venue(line))
    for name, value in venue.items():
        known = entry.fields.setdefault(name, (value, line))
        if known[0] != value:
            parsed.problems.append(
                CsvProblem(
                    line,
                    name,
                    "conflicting_value",
                    f"venue {venue_id!r} has {name} {known[0]!r} on line {known[1]}",
                )
            )
    screen_id = screen.pop("screen_id", None)
    if screen_id is None:
        if screen:
            parsed.problems.append(
                CsvProblem(line, "screen_id", "missing_value", "screen columns need a screen_id")
            )
        return
    before = parsed.screens.get((venue_id, screen_id))
    if before is not None:
        parsed.problems.append(
            CsvProblem(
                line,
                "screen_id",
                "duplicate_screen",
                f"screen {screen_id!r} is on line {before.line} already",
            )
        )
        return
    parsed.screens[(venue_id, screen_id)] = _Screen(venue_id, screen_id, line, screen)


def _chunks(items: list[Any]) -> Iterator[list[Any]]:
    for start in range(0, len(items), CHUNK):
        yield items[start : start + CHUNK]


def _existing(
    conn: sa.Connection, venue_ids: list[str]
) -> tuple[dict[str, sa.RowMapping], set[tuple[str, str]]]:
    rows: dict[str, sa.RowMapping] = {}
    pairs: set[tuple[str, str]] = set()
    for chunk in _chunks(venue_ids):
        for row in conn.execute(sa.select(venues).where(venues.c.venue_id.in_(chunk))).mappings():
            rows[row["venue_id"]] = row
        query = sa.select(screens.c.venue_id, screens.c.screen_id).where(screens.c.venue_id.in_(chunk))
        pairs.update((v, s) for v, s in conn.execute(query))
    return rows, pairs


def _checked(
    problems: list[CsvProblem], line: int, check: Callable[..., dict[str, Any]], *args: Any
) -> dict[str, Any] | None:
    """The repository's check of a whole venue (e.g. both coordinates or neither); its ApiError becomes a
    problem on the venue's first line."""
    try:
        return check(*args)
    except ApiError as exc:
        problems.append(CsvProblem(line, exc.field, exc.code, exc.message))
        return None


def import_venues(
    conn: sa.Connection, body: bytes, progress: Callable[[float], None] | None = None
) -> ImportResult:
    """Create or update every venue and screen of the CSV, or raise CsvError and store nothing.
    `progress(share)` is told how far it is: parsed, each thousand venues and screens checked, written."""
    tell = progress or _untold
    if len(body) > MAX_CSV_BYTES:
        raise ApiError(413, "payload_too_large", f"the CSV is larger than {MAX_CSV_BYTES} bytes", "body")
    parsed = parse_csv(body)
    tell(PARSED)
    problems = parsed.problems
    current, screen_pairs = _existing(conn, list(parsed.venues))
    rows = max(1, len(parsed.venues) + len(parsed.screens))
    new_venues: list[dict[str, Any]] = []
    venue_updates: list[dict[str, Any]] = []
    for done, (venue_id, venue) in enumerate(parsed.venues.items()):
        if done % 1000 == 999:
            tell(PARSED + (CHECKED - PARSED) * done / rows)
        if venue_id in parsed.faulty:
            continue
        given = {name: value for name, (value, _) in venue.fields.items()}
        row = current.get(venue_id)
        if row is None and "name" not in given:
            problems.append(CsvProblem(venue.line, "name", "missing_value", "a new venue needs a name"))
            continue
        if row is None:
            data = msgspec.convert({**given, "venue_id": venue_id}, VenueIn)
            values = _checked(problems, venue.line, venue_values, data)
            if values is not None:
                new_venues.append(values)
        else:
            values = _checked(problems, venue.line, venue_changes, msgspec.convert(given, VenuePatch), row)
            if values is not None:
                venue_updates.append({"b_venue_id": venue_id, **values})
    new_screens: list[dict[str, Any]] = []
    screen_updates: list[dict[str, Any]] = []
    for done, (key, screen) in enumerate(parsed.screens.items(), len(parsed.venues)):
        if done % 1000 == 999:
            tell(PARSED + (CHECKED - PARSED) * done / rows)
        if key in screen_pairs:
            changes = screen_changes(msgspec.convert(screen.fields, ScreenPatch))
            screen_updates.append({"b_venue_id": key[0], "b_screen_id": key[1], **changes})
        else:
            made = msgspec.convert({**screen.fields, "screen_id": key[1]}, ScreenIn)
            new_screens.append(screen_values(made) | {"venue_id": key[0]})
    if problems:
        raise CsvError(problems)
    with conflict_as(CONCURRENT_IMPORT):
        _write(conn, new_venues, venue_updates, new_screens, screen_updates)
    for venue_id, schedule in parsed.hours.items():
        set_hours(conn, venue_id, schedule)
    tell(1.0)
    return ImportResult(
        venues_created=len(new_venues),
        venues_updated=len(venue_updates),
        screens_created=len(new_screens),
        screens_updated=len(screen_updates),
    )


PARSED, CHECKED = 0.2, 0.7
"""The shares of an import's progress reached once the CSV is parsed and once every row is checked."""


def _untold(share: float) -> None:
    """No one follows the import's progress."""


def _grouped(updates: list[dict[str, Any]]) -> Iterator[list[dict[str, Any]]]:
    """Updates with the same columns together, so that each group is one executemany."""
    groups: dict[frozenset[str], list[dict[str, Any]]] = {}
    for update in updates:
        groups.setdefault(frozenset(update), []).append(update)
    yield from groups.values()


def _write(
    conn: sa.Connection,
    new_venues: list[dict[str, Any]],
    venue_updates: list[dict[str, Any]],
    new_screens: list[dict[str, Any]],
    screen_updates: list[dict[str, Any]],
) -> None:
    now = int(time.time())
    if new_venues:
        conn.execute(sa.insert(venues), [v | {"created_at": now} for v in new_venues])
    for group in _grouped(venue_updates):
        if len(group[0]) > 1:
            conn.execute(sa.update(venues).where(venues.c.venue_id == sa.bindparam("b_venue_id")), group)
    if new_screens:
        conn.execute(sa.insert(screens), [s | {"created_at": now} for s in new_screens])
    for group in _grouped(screen_updates):
        if len(group[0]) > 2:
            where = sa.and_(
                screens.c.venue_id == sa.bindparam("b_venue_id"),
                screens.c.screen_id == sa.bindparam("b_screen_id"),
            )
            conn.execute(sa.update(screens).where(where), group)
