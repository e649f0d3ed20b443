"""Folding SQL groups into delivery report rows and totals: pure, so every figure is testable without a
database.

SQL hands over groups keyed by table columns and a wall-clock bucket (see `buckets`); here they become the
report's dimensions (local day, local hour), groups that land in the same row are summed, request counts are
joined in, and rates are derived from the sums (never averaged from rates).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, fields
from typing import Any

from adslot.reporting.buckets import LocalClock
from adslot.reporting.invalid import INVALID_FIGURES
from adslot.reporting.query import DeliveryQuery
from adslot.reporting.schemas import DeliveryReport, DeliveryRow, Filters, InvalidCounts, Metrics

PROGRAMMATIC = "programmatic"
"""The campaign and creative of the row of programmatic ad requests (a demand partner won them: no
campaign of this catalog, null in ad_requests) when grouped by campaign or creative."""
PROGRAMMATIC_DIMENSIONS = frozenset({"campaign_id", "creative_id"})
COLUMN_OF = {
    "campaign": "campaign_id",
    "creative": "creative_id",
    "venue": "venue_id",
    "screen": "screen_id",
    "day": "day",
    "hour": "hour",
}
TABLE_COLUMNS = ("campaign_id", "creative_id", "venue_id", "screen_id")
COUNTS = (
    "fills",
    "plays",
    "starts",
    "first_quartiles",
    "midpoints",
    "third_quartiles",
    "completes",
    "late",
    "duplicates",
    "expired",
    "released",
    *INVALID_FIGURES,
    "programmatic_plays",
)
"""The integer metrics SQL sums per group, under these names (a group may lack some: 0)."""
METRIC_COLUMNS = tuple(field for field in Metrics.__struct_fields__)


def dimension_columns(group_by: Iterable[str]) -> tuple[str, ...]:
    """The row's dimension columns, in group_by order. A screen id is only unique within its venue, so
    grouping by screen groups by venue too (venue_id comes first unless venue was asked for earlier)."""
    columns: list[str] = []
    for dimension in group_by:
        if dimension == "screen" and "venue_id" not in columns:
            columns.append("venue_id")
        if COLUMN_OF[dimension] not in columns:
            columns.append(COLUMN_OF[dimension])
    return tuple(columns)


def grouped_table_columns(group_by: Iterable[str]) -> tuple[str, ...]:
    """The ad_requests columns SQL groups by for these dimensions."""
    columns = dimension_columns(group_by)
    return tuple(column for column in TABLE_COLUMNS if column in columns)


@dataclass(slots=True)
class Tally:
    """Running sums of one report row."""

    requests: int = 0
    fills: int = 0
    plays: int = 0
    impressions: float = 0.0
    starts: int = 0
    first_quartiles: int = 0
    midpoints: int = 0
    third_quartiles: int = 0
    completes: int = 0
    late: int = 0
    duplicates: int = 0
    expired: int = 0
    released: int = 0
    invalid_too_fast: int = 0
    invalid_out_of_order: int = 0
    invalid_foreign_network: int = 0
    invalid_burst: int = 0
    programmatic_plays: int = 0

    def add_delivery(self, group: Mapping[str, Any]) -> None:
        # PostgreSQL's SUM of integers is NUMERIC (a Decimal in Python): normalise every figure. The groups of
        # invalid_fires (repository.invalid_groups) carry only the invalid figures.
        for name in COUNTS:
            setattr(self, name, getattr(self, name) + int(group.get(name) or 0))
        self.impressions += float(group.get("impressions") or 0)

    def add(self, other: Tally) -> None:
        for item in fields(Tally):
            setattr(self, item.name, getattr(self, item.name) + getattr(other, item.name))

    def metrics(self, requests_known: bool) -> dict[str, Any]:
        requests = self.requests if requests_known else None
        return {
            "requests": requests,
            "fills": self.fills,
            "fill_rate": ratio(self.fills, requests),
            "plays": self.plays,
            "impressions": round(self.impressions, 3),
            "starts": self.starts,
            "first_quartiles": self.first_quartiles,
            "midpoints": self.midpoints,
            "third_quartiles": self.third_quartiles,
            "completes": self.completes,
            "completion_rate": ratio(self.completes, self.starts),
            "late": self.late,
            "duplicates": self.duplicates,
            "expired": self.expired,
            "released": self.released,
            "invalid": InvalidCounts(
                self.invalid_too_fast,
                self.invalid_out_of_order,
                self.invalid_foreign_network,
                self.invalid_burst,
            ),
            "direct_plays": self.plays - self.programmatic_plays,
            "programmatic_plays": self.programmatic_plays,
        }


def ratio(part: int, whole: int | None) -> float | None:
    """part / whole rounded to 4 decimals; null when whole is unknown or 0."""
    return None if not whole else round(part / whole, 4)


Key = tuple[Any, ...]


class Folder:
    """Sums SQL groups into report rows keyed by the report's dimension columns."""

    def __init__(self, query: DeliveryQuery) -> None:
        self.columns = dimension_columns(query.group_by)
        self.clock = LocalClock()
        self.rows: dict[Key, Tally] = {}
        self.hour_labels: dict[int, str] = {}

    def _key(self, group: Mapping[str, Any]) -> Key:
        key: list[Any] = []
        for column in self.columns:
            if column == "day":
                key.append(self.clock.day(group["wall"], group["utc_offset"]))
            elif column == "hour":
                hour = self.clock.hour(group["wall"], group["utc_offset"])
                self.hour_labels.setdefault(hour, self.clock.hour_label(group["wall"], group["utc_offset"]))
                key.append(hour)
            elif column == "screen_id":
                key.append(group[column] or None)  # request_stats stores "no screen" as ""
            else:
                key.append(group[column])
        return tuple(key)

    def _tally(self, group: Mapping[str, Any]) -> Tally:
        key = self._key(group)
        tally = self.rows.get(key)
        if tally is None:
            tally = self.rows[key] = Tally()
        return tally

    def add_delivery(self, group: Mapping[str, Any]) -> None:
        self._tally(group).add_delivery(group)

    def add_requests(self, group: Mapping[str, Any]) -> None:
        self._tally(group).requests += int(group["requests"] or 0)

    def sorted_rows(self) -> list[tuple[Key, Tally]]:
        def order(item: tuple[Key, Tally]) -> tuple[tuple[bool, Any], ...]:
            return tuple((value is not None, value) for value in item[0])

        return sorted(self.rows.items(), key=order)

    def dimensions(self, key: Key) -> dict[str, Any]:
        values = dict(zip(self.columns, key, strict=True))
        for name in PROGRAMMATIC_DIMENSIONS.intersection(values):
            if values[name] is None:
                values[name] = PROGRAMMATIC
        if "hour" in values:
            values["hour"] = self.hour_labels[values["hour"]]
        return values


def fold(
    query: DeliveryQuery,
    delivery: Iterable[Mapping[str, Any]],
    requests: Iterable[Mapping[str, Any]] | None,
) -> DeliveryReport:
    """The report from SQL's groups: `delivery` from ad_requests (the COUNTS, impressions, the grouped
    table columns and, when grouped by time, `wall` and `utc_offset`), `requests` from request_stats (or None
    when request counts cannot be attributed to these rows: they are then reported as null)."""
    folder = Folder(query)
    for group in delivery:
        folder.add_delivery(group)
    for group in requests or ():
        folder.add_requests(group)
    known = requests is not None
    rows: list[DeliveryRow] = []
    totals = Tally()
    for key, tally in folder.sorted_rows():
        totals.add(tally)
        rows.append(DeliveryRow(**folder.dimensions(key), **tally.metrics(known)))
    return DeliveryReport(
        from_=query.start,
        to=query.end,
        timezone=query.timezone,
        group_by=list(query.group_by),
        filters=Filters(query.campaign_id, query.venue_id, query.screen_id),
        rows=rows,
        totals=Metrics(**totals.metrics(known)),
    )
