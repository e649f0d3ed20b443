"""The delivery report as the console shows it: named columns with their units, a page wide, and its chart.

The page shows the figures ad ops read every day; the CSV download (reporting/formats.py) keeps every column
of the API, so nothing is lost by leaving some off the page.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any
from zoneinfo import ZoneInfo

import msgspec
from markupsafe import Markup

from adslot.console.charts import Series, bar_chart, line_chart
from adslot.reporting.aggregate import dimension_columns
from adslot.reporting.schemas import DeliveryReport, DeliveryRow


@dataclass(frozen=True, slots=True)
class Column:
    key: str
    label: str
    numeric: bool = True


METRICS = (
    Column("requests", "Ad requests"),
    Column("fills", "Fills"),
    Column("fill_rate", "Fill rate (%)"),
    Column("plays", "Plays"),
    Column("impressions", "Impressions (audience)"),
    Column("completion_rate", "Completion rate (%)"),
    Column("late", "Late fires"),
    Column("duplicates", "Duplicate fires"),
    Column("invalid", "Invalid fires"),
)
CSV_ONLY = (
    "the quartile counts (starts, first quartiles, midpoints, third quartiles, completes), expired and "
    "released ad requests, invalid fires by rule, and plays split into direct and programmatic"
)
"""What the CSV download has that the table leaves off, said on the page."""
DIMENSIONS = {
    "campaign_id": "Campaign",
    "creative_id": "Creative",
    "venue_id": "Venue",
    "screen_id": "Screen",
    "day": "Day",
    "hour": "Hour",
}
CATEGORIES = ("campaign_id", "creative_id", "venue_id", "screen_id")
QUARTER_HOUR = 900
"""Time zones are offset from UTC by whole quarters of an hour: a step that meets every local hour's start."""
MOST_BARS = 20
"""Categories a bar chart shows, those with the most plays: past that, the table and the CSV have the rest."""


def columns(report: DeliveryReport) -> list[Column]:
    dims = [
        Column(d, f"{DIMENSIONS[d]} ({report.timezone})" if d in ("day", "hour") else DIMENSIONS[d], False)
        for d in dimension_columns(report.group_by)
    ]
    return [*dims, *METRICS]


def invalid_total(row: DeliveryRow) -> int:
    return sum(msgspec.structs.asdict(row.invalid).values())


def invalid_detail(row: DeliveryRow) -> str:
    """Each rule's count, for the Invalid fires cell's tooltip."""
    return ", ".join(f"{k.replace('_', ' ')}: {v:,}" for k, v in msgspec.structs.asdict(row.invalid).items())


def _hour(value: str) -> str:
    return dt.datetime.fromisoformat(value).strftime("%Y-%m-%d %H:%M")


def cell(row: DeliveryRow, key: str, names: Mapping[int, str]) -> str:
    """A cell as read: thousands separated, rates in percent, campaigns by name, hours without seconds."""
    if key == "invalid":
        return f"{invalid_total(row):,}"
    value: Any = getattr(row, key, None)
    if value is None or isinstance(value, msgspec.UnsetType):
        return figure(None)
    if key == "campaign_id":
        return "Programmatic" if value == "programmatic" else names.get(value, f"Campaign {value}")
    if key == "creative_id" and value == "programmatic":
        return "Programmatic"
    if key == "hour":
        return _hour(value)
    if key.endswith("_rate"):
        return f"{value * 100:.1f}"
    if key == "impressions" or (isinstance(value, int) and key not in DIMENSIONS):
        return figure(value)
    return str(value)


def figure(value: float | None, decimals: int = 1) -> str:
    """A count or an amount as the console's figures read: thousands separated; counts whole."""
    if value is None:
        return "—"
    if isinstance(value, int):
        return f"{value:,}"
    return f"{value:,.{decimals}f}"


def _time_label(key: str, at: dt.datetime) -> str:
    return f"{at:%a} {at.day} {at:%b}" if key == "day" else f"{at:%a} {at.day} {at:%H}h"


def time_buckets(report: DeliveryReport, key: str) -> list[dt.datetime]:
    """Every day or hour of the report's range in its time zone, those without delivery too: a line over
    time must not join two days with delivery across a day without it."""
    zone = ZoneInfo(report.timezone)
    found: set[dt.datetime] = set()
    for at in range(report.from_, report.to, QUARTER_HOUR):
        local = dt.datetime.fromtimestamp(at, zone)
        found.add(
            local.replace(hour=0, minute=0, second=0) if key == "day" else local.replace(minute=0, second=0)
        )
    return sorted(found)


def _bucket_key(key: str, at: dt.datetime) -> str | int:
    return at.date().isoformat() if key == "day" else int(at.timestamp())


def _row_key(key: str, value: str) -> str | int:
    return value if key == "day" else int(dt.datetime.fromisoformat(value).timestamp())


def chart(report: DeliveryReport, names: Mapping[int, str]) -> Markup | None:
    """A line over time when the report is grouped by day or hour (summed over any other grouping); bars per
    campaign, creative, venue or screen otherwise; nothing for an ungrouped report's one row."""
    if not report.rows:
        return None
    time_key = next((k for k in ("hour", "day") if k in dimension_columns(report.group_by)), None)
    if time_key is not None:
        plays: dict[str | int, float] = {}
        fills: dict[str | int, float] = {}
        for row in report.rows:
            at = _row_key(time_key, str(getattr(row, time_key)))
            plays[at] = plays.get(at, 0.0) + row.plays
            fills[at] = fills.get(at, 0.0) + row.fills
        buckets = time_buckets(report, time_key)
        bucket_keys = [_bucket_key(time_key, b) for b in buckets]
        return line_chart(
            [_time_label(time_key, b) for b in buckets],
            [
                Series("fills", [fills.get(k, 0.0) for k in bucket_keys]),
                Series("plays", [plays.get(k, 0.0) for k in bucket_keys]),
            ],
            title=f"Fills and plays by {time_key} ({report.timezone})",
        )
    keys = [k for k in dimension_columns(report.group_by) if k in CATEGORIES]
    if not keys:
        return None
    rows = sorted(report.rows, key=lambda r: -r.plays)[:MOST_BARS]
    labels = [" · ".join(cell(r, k, names) for k in keys) for r in rows]
    shown = " · ".join(DIMENSIONS[k].lower() for k in keys)
    most = f", the {MOST_BARS} with most plays" if len(report.rows) > MOST_BARS else ""
    return bar_chart(
        labels,
        [Series("fills", [float(r.fills) for r in rows]), Series("plays", [float(r.plays) for r in rows])],
        title=f"Fills and plays by {shown}{most}",
    )
