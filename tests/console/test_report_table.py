"""The delivery report as the console shows it: named columns with units, cells as read, bars for categories
and a line for time."""

from __future__ import annotations

import datetime as dt
import xml.etree.ElementTree as ET
from typing import Any

from adslot.console import report_table
from adslot.reporting.schemas import DeliveryReport, DeliveryRow, Filters, InvalidCounts, Metrics

SVG = "{http://www.w3.org/2000/svg}"
FIGURES: dict[str, Any] = {
    "requests": 1200,
    "fills": 1000,
    "fill_rate": 0.8333,
    "plays": 990,
    "impressions": 2475.5,
    "starts": 990,
    "first_quartiles": 990,
    "midpoints": 980,
    "third_quartiles": 975,
    "completes": 970,
    "completion_rate": 0.9798,
    "late": 3,
    "duplicates": 1,
    "expired": 10,
    "released": 0,
    "invalid": InvalidCounts(too_fast=2, out_of_order=0, foreign_network=1, burst=0),
    "direct_plays": 990,
    "programmatic_plays": 0,
}


def epoch(text: str) -> int:
    return int(dt.datetime.fromisoformat(text).timestamp())


def report(
    group_by: list[str],
    rows: list[DeliveryRow],
    start: int = 0,
    end: int = 86400,
    timezone: str = "Europe/Berlin",
) -> DeliveryReport:
    return DeliveryReport(
        from_=start,
        to=end,
        timezone=timezone,
        group_by=group_by,
        filters=Filters(None, None, None),
        rows=rows,
        totals=Metrics(**FIGURES),
    )


def test_columns_are_named_for_people_with_their_units() -> None:
    labels = [c.label for c in report_table.columns(report(["campaign", "day"], []))]
    assert labels[:2] == ["Campaign", "Day (Europe/Berlin)"]
    assert "Fill rate (%)" in labels and "Completion rate (%)" in labels and "Invalid fires" in labels
    assert not [label for label in labels if "_" in label or label.isupper()]
    assert len(labels) <= 11


def test_cells_read_as_figures_campaigns_by_name() -> None:
    row = DeliveryRow(**FIGURES, campaign_id=7, hour="2026-10-25T02:00:00+01:00")
    names = {7: "Acme spring"}
    assert report_table.cell(row, "campaign_id", names) == "Acme spring"
    assert report_table.cell(row, "campaign_id", {}) == "Campaign 7"
    assert report_table.cell(row, "hour", names) == "2026-10-25 02:00"
    assert report_table.cell(row, "requests", names) == "1,200"
    assert report_table.cell(row, "fill_rate", names) == "83.3"
    assert report_table.cell(row, "impressions", names) == "2,475.5"
    assert report_table.cell(row, "invalid", names) == "3"
    assert report_table.invalid_detail(row) == "too fast: 2, out of order: 0, foreign network: 1, burst: 0"
    unknown = DeliveryRow(**(FIGURES | {"requests": None, "fill_rate": None}), campaign_id="programmatic")
    assert report_table.cell(unknown, "requests", names) == "—"
    assert report_table.cell(unknown, "campaign_id", names) == "Programmatic"


def test_a_report_by_campaign_is_bars_with_the_most_played_first() -> None:
    rows = [
        DeliveryRow(**(FIGURES | {"plays": 5}), campaign_id=1),
        DeliveryRow(**(FIGURES | {"plays": 9}), campaign_id=2),
    ]
    chart = report_table.chart(report(["campaign"], rows), {1: "Acme", 2: "Zenith"})
    assert chart is not None
    svg = ET.fromstring(str(chart))
    assert "bars" in (svg.get("class") or "") and not svg.findall(f"{SVG}polyline")
    categories = [t.text for t in svg.iter(f"{SVG}text") if t.get("class") == "tick"]
    assert categories == ["Zenith", "Acme"]


def test_a_report_by_day_and_campaign_is_one_line_over_the_days_summed() -> None:
    rows = [
        DeliveryRow(**(FIGURES | {"plays": 5, "fills": 5}), campaign_id=1, day="2026-12-02"),
        DeliveryRow(**(FIGURES | {"plays": 4, "fills": 4}), campaign_id=2, day="2026-12-02"),
        DeliveryRow(**(FIGURES | {"plays": 3, "fills": 3}), campaign_id=1, day="2026-12-01"),
    ]
    berlin_days = (epoch("2026-12-01T00:00:00+01:00"), epoch("2026-12-04T00:00:00+01:00"))
    chart = report_table.chart(report(["campaign", "day"], rows, *berlin_days), {})
    assert chart is not None
    svg = ET.fromstring(str(chart))
    assert "line" in (svg.get("class") or "") and not [
        r for r in svg.iter(f"{SVG}rect") if r.get("class") == "bar"
    ]
    days = [t.text for t in svg.iter(f"{SVG}text") if t.get("class") == "tick"]
    assert days == ["Tue 1 Dec", "Wed 2 Dec", "Thu 3 Dec"]  # the 3rd had no delivery: a 0, not left out
    line = [p for p in svg.findall(f"{SVG}polyline") if p.get("class") == "series"][-1]
    assert len((line.get("points") or "").split()) == 3
    ticks = [t.text for t in svg.iter(f"{SVG}text") if t.get("class") == "tick value"]
    assert ticks[-1] == "10"  # 5 + 4 on the 2nd, in whole steps


def test_an_hourly_chart_has_every_local_hour_of_the_range_even_at_a_half_hour_offset() -> None:
    start = epoch("2026-12-01T00:00:00+05:30")
    rows = [DeliveryRow(**FIGURES, hour="2026-12-01T10:00:00+05:30")]
    hours = report_table.time_buckets(report(["hour"], rows, start, start + 86400, "Asia/Kolkata"), "hour")
    assert len(hours) == 24 and hours[0].isoformat() == "2026-12-01T00:00:00+05:30"


def test_an_ungrouped_or_empty_report_has_no_chart() -> None:
    assert report_table.chart(report([], [DeliveryRow(**FIGURES)]), {}) is None
    assert report_table.chart(report(["campaign"], []), {}) is None


def test_a_figure_reads_with_thousands_separated_and_counts_whole() -> None:
    figure = report_table.figure
    assert figure(1004) == "1,004" and figure(-1004) == "-1,004"
    assert figure(2016.0) == "2,016.0" and figure(12.345, 2) == "12.35"
    assert figure(None) == "—"
