"""The delivery report's invalid-traffic counts: per reason, summed like every figure, nested in the JSON
and a column each in the CSV; groups of invalid_fires carry only those figures."""

from __future__ import annotations

import csv
import io
import json

from adslot.reporting.aggregate import fold
from adslot.reporting.formats import delivery_csv, delivery_json
from adslot.reporting.invalid import INVALID_FIGURES, invalid_counts
from adslot.reporting.query import parse_delivery
from tests.reporting.test_aggregate import group


def test_invalid_counts_are_summed_per_reason_and_nested_in_the_json() -> None:
    query = parse_delivery(start="0", end="3600", group_by="campaign")
    report = fold(
        query,
        [
            group(campaign_id=1, fills=3, plays=2),
            {"campaign_id": 1, "invalid_too_fast": 2, "invalid_burst": 1},
            {"campaign_id": 1, "invalid_too_fast": 1, "invalid_foreign_network": 4},
            {"campaign_id": 2, "invalid_out_of_order": 1},
        ],
        None,
    )
    first, second = report.rows
    assert (first.fills, first.plays) == (3, 2)
    body = json.loads(delivery_json(report))
    assert body["data"]["rows"][0]["invalid"] == {
        "too_fast": 3,
        "out_of_order": 0,
        "foreign_network": 4,
        "burst": 1,
    }
    assert (second.fills, second.plays, second.invalid.out_of_order) == (0, 0, 1)
    assert body["data"]["totals"]["invalid"] == {
        "too_fast": 3,
        "out_of_order": 1,
        "foreign_network": 4,
        "burst": 1,
    }


def test_the_csv_has_a_column_per_reason_after_the_metrics() -> None:
    query = parse_delivery(start="0", end="3600", group_by="venue")
    report = fold(
        query, [group(venue_id="a", fills=1), {"venue_id": "a", "invalid_foreign_network": 2}], None
    )
    header, row = list(csv.reader(io.StringIO(delivery_csv(report).decode())))
    assert header[-6:-2] == list(INVALID_FIGURES)
    assert dict(zip(header, row, strict=True))["invalid_foreign_network"] == "2"
    assert header[-7] == "released"


def test_a_group_without_invalid_figures_counts_none() -> None:
    assert invalid_counts({"fills": 3}) == {
        "too_fast": 0,
        "out_of_order": 0,
        "foreign_network": 0,
        "burst": 0,
    }
    assert invalid_counts({"invalid_burst": 2})["burst"] == 2
