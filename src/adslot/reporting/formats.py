"""Reports as JSON envelopes or CSV (RFC 4180: a header row, CRLF line ends, quoted where needed).

A CSV cell is empty for null; numbers are written as JSON writes them, so both formats carry the same figures.
Text that a spreadsheet would run as a formula is written with a leading apostrophe, as OWASP advises: ids
come from whoever named the venue or screen, and a media owner opens these files in a spreadsheet. That is
text that starts with a tab or a carriage return, or whose first character after any blanks is =, +, -, @ or
| (or their fullwidth forms, which some spreadsheets read alike), at its start or after a ; or , (where a
spreadsheet in another locale splits the cell there). JSON carries the text as stored.
"""

from __future__ import annotations

import csv
import io
import re
from collections.abc import Iterable, Sequence
from typing import Any

import msgspec

from adslot.reporting.aggregate import METRIC_COLUMNS, dimension_columns
from adslot.reporting.demand import NOTICE_COLUMN, demand_columns
from adslot.reporting.invalid import INVALID_FIGURES
from adslot.reporting.schemas import (
    PLAY_COLUMNS,
    DeliveryEnvelope,
    DeliveryReport,
    DeliveryRow,
    DemandEnvelope,
    DemandReport,
    DemandRow,
    PlaylogEnvelope,
    PlaylogPage,
    PlayRow,
)

FORMULA = re.compile(r"^[\t\r]|(?:^|[;,])[\s\u00a0\u3000]*[=+\-@|\uff1d\uff0b\uff0d\uff20\uff5c]")


def _cell(value: Any) -> Any:
    if value is None:
        return ""
    if isinstance(value, str) and FORMULA.search(value):
        return "'" + value
    return value


def csv_text(header: Sequence[str], rows: Iterable[Sequence[Any]]) -> str:
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\r\n")
    if header:
        writer.writerow(header)
    writer.writerows([_cell(value) for value in row] for row in rows)
    return out.getvalue()


PLAY_SPLIT = ("direct_plays", "programmatic_plays")
"""Last in the CSV, after the invalid_<rule> columns: the columns before them keep their places."""


def delivery_columns(report: DeliveryReport) -> tuple[str, ...]:
    """The dimensions, then the metrics, the `invalid` counts as an invalid_<rule> column each, then the
    split of plays into direct and programmatic."""
    metrics = [name for name in METRIC_COLUMNS if name != "invalid" and name not in PLAY_SPLIT]
    return (*dimension_columns(report.group_by), *metrics, *INVALID_FIGURES, *PLAY_SPLIT)


def _value(row: DeliveryRow, name: str) -> Any:
    if name.startswith("invalid_"):
        return getattr(row.invalid, name.removeprefix("invalid_"))
    return getattr(row, name)


def delivery_csv(report: DeliveryReport) -> bytes:
    """The header (the grouped dimensions, then the metrics) and one line per row; no totals line, so the
    file sums like any table."""
    columns = delivery_columns(report)
    return csv_text(columns, ([_value(row, name) for name in columns] for row in report.rows)).encode()


def delivery_json(report: DeliveryReport) -> bytes:
    return msgspec.json.encode(DeliveryEnvelope(200, report))


def playlog_csv_header() -> bytes:
    return csv_text(PLAY_COLUMNS, ()).encode()


def playlog_csv_rows(rows: Iterable[PlayRow]) -> bytes:
    return csv_text((), (msgspec.structs.astuple(row) for row in rows)).encode()


def playlog_json(page: PlaylogPage) -> bytes:
    return msgspec.json.encode(PlaylogEnvelope(200, page))


def _demand_value(row: DemandRow, name: str) -> Any:
    if name.startswith(NOTICE_COLUMN):
        return row.notice_drops.get("notice_" + name.removeprefix(NOTICE_COLUMN), 0)
    if name.startswith("drop_"):
        return row.drops.get(name.removeprefix("drop_"), 0)
    return getattr(row, name)


def demand_csv(report: DemandReport) -> bytes:
    """One line per partner and hour (no totals: the file sums like any table); errors by reason are in the
    JSON only."""
    columns = demand_columns()
    return csv_text(columns, ([_demand_value(row, name) for name in columns] for row in report.rows)).encode()


def demand_json(report: DemandReport) -> bytes:
    return msgspec.json.encode(DemandEnvelope(200, report))
