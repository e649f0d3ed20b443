"""Server-side SVG charts: one polyline per series, gaps break lines, text is escaped; whole ticks for counts,
labels thinned apart and kept inside the chart, coinciding series drawn apart, bars for categories, partial
buckets dotted. (The browser tests check the same on the boxes Chromium draws.)"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from itertools import pairwise

import pytest

from adslot.console.charts import (
    WIDTHS,
    Series,
    bar_chart,
    line_chart,
    place_label,
    text_width,
    thin_labels,
    value_ticks,
)

SVG = "{http://www.w3.org/2000/svg}"


def test_each_series_is_a_line_with_its_legend_and_the_axis_starts_at_zero() -> None:
    svg = ET.fromstring(
        str(line_chart(["a", "b", "c"], [Series("plays", [1, 2, 3]), Series("plan", [0, 1.5, 3])], title="t"))
    )
    assert len(svg.findall(f"{SVG}polyline")) == 2
    texts = [t.text for t in svg.iter(f"{SVG}text")]
    assert "plays" in texts and "plan" in texts and "0" in texts


def test_a_gap_breaks_a_line_and_a_lone_point_is_a_dot() -> None:
    svg = ET.fromstring(str(line_chart(["a", "b", "c", "d"], [Series("s", [1, None, 2, 3])], title="t")))
    assert len(svg.findall(f"{SVG}polyline")) == 1
    assert len(svg.findall(f"{SVG}circle")) == 1


def test_labels_and_titles_are_escaped() -> None:
    markup = str(line_chart(["<b>"], [Series("<script>", [1])], title="a & b"))
    assert "<script>" not in markup and "&lt;script&gt;" in markup
    ET.fromstring(markup)


def test_an_empty_chart_still_renders() -> None:
    ET.fromstring(str(line_chart([], [], title="nothing")))


@pytest.mark.parametrize("peak", [0, 1, 3, 7, 15, 99, 168, 2_345, 1_000_001])
def test_a_count_axis_has_whole_ticks_from_zero_past_the_peak(peak: int) -> None:
    ticks = value_ticks(peak, counts=True)
    assert ticks[0] == 0 and ticks[-1] >= peak and len(ticks) <= 7
    assert all(t == int(t) for t in ticks)
    steps = {b - a for a, b in pairwise(ticks)}
    assert len(steps) == 1


def test_a_fractional_axis_may_have_fractional_ticks() -> None:
    assert value_ticks(1, counts=False) == [0, 0.25, 0.5, 0.75, 1.0]


def test_count_tick_labels_are_whole_numbers_with_separators() -> None:
    svg = ET.fromstring(str(line_chart(["a", "b"], [Series("s", [0, 3])], title="t")))
    ticks = [t.text for t in svg.iter(f"{SVG}text") if "value" in (t.get("class") or "")]
    assert ticks == ["0", "1", "2", "3"]
    svg = ET.fromstring(str(line_chart(["a", "b"], [Series("s", [0, 12_345])], title="t")))
    ticks = [t.text for t in svg.iter(f"{SVG}text") if "value" in (t.get("class") or "")]
    assert ticks[-1] == "15,000"


def test_thinned_labels_never_overlap_and_stay_inside_the_chart() -> None:
    labels = [f"Mon {h:02d}h" for h in range(168)]
    xs = [40 + 900 * i / 167 for i in range(168)]
    placed = thin_labels(xs, labels, 960)
    assert 2 <= len(placed) < 168
    assert all(a.high < b.low for a, b in pairwise(placed))
    assert all(p.low >= 0 and p.high <= 960 for p in placed)
    assert [p.text for p in placed][:2] == ["Mon 00h", "Mon 12h"]  # a step that lands on round hours


def test_a_label_at_an_edge_is_anchored_to_it() -> None:
    assert place_label(955, "Wed 9 Dec (17 h)", 960).anchor == "end"
    assert place_label(3, "Mon 7 Dec", 960).anchor == "start"
    middle = place_label(480, "Tue", 960)
    assert middle.anchor == "middle" and middle.high - middle.low == pytest.approx(text_width("Tue"))


def test_series_on_top_are_thinner_and_dashed_so_the_ones_below_show() -> None:
    svg = ET.fromstring(
        str(
            line_chart(["a", "b"], [Series("r", [1, 2]), Series("f", [1, 2]), Series("p", [1, 2])], title="t")
        )
    )
    lines = svg.findall(f"{SVG}polyline")
    widths = [float(line.get("stroke-width") or 0) for line in lines]
    assert widths == list(WIDTHS)
    assert lines[0].get("stroke-dasharray") is None
    assert lines[1].get("stroke-dasharray") != lines[2].get("stroke-dasharray")


def test_a_bar_chart_has_a_bar_per_category_and_series_and_a_whole_value_axis() -> None:
    svg = ET.fromstring(
        str(bar_chart(["Acme", "Zenith"], [Series("fills", [3, 9]), Series("plays", [2, 9])], title="t"))
    )
    bars = [r for r in svg.iter(f"{SVG}rect") if r.get("class") == "bar"]
    assert len(bars) == 4
    assert float(bars[2].get("width") or 0) > float(bars[0].get("width") or 0)
    ticks = [t.text for t in svg.iter(f"{SVG}text") if "value" in (t.get("class") or "")]
    assert ticks == ["0", "5", "10"]


def test_a_long_category_is_cut_with_an_ellipsis_and_kept_whole_in_its_tooltip() -> None:
    name = "A campaign with a very long name " * 5
    svg = ET.fromstring(str(bar_chart([name], [Series("plays", [1])], title="t")))
    shown = [t.text or "" for t in svg.iter(f"{SVG}text") if t.get("class") == "tick"]
    assert shown[0].endswith("…") and text_width(shown[0]) <= 960 * 0.3 + 10
    assert any((t.text or "").startswith(name) for t in svg.iter(f"{SVG}title"))


def test_a_partial_bucket_is_dotted_and_hollow_not_a_fall() -> None:
    svg = ET.fromstring(
        str(
            line_chart(["d1", "d2", "d3", "d4"], [Series("plays", [90, 100, 95, 20])], title="t", partial={3})
        )
    )
    partial = [e for e in svg.iter() if e.get("class") == "partial"]
    assert {e.tag for e in partial} == {f"{SVG}polyline", f"{SVG}circle"}
    whole = [e for e in svg.findall(f"{SVG}polyline") if e.get("class") == "series"]
    assert len(whole) == 1 and len((whole[0].get("points") or "").split()) == 3


def test_lone_points_of_coinciding_series_are_nested_dots() -> None:
    svg = ET.fromstring(str(line_chart(["a"], [Series("fills", [4]), Series("plays", [4])], title="t")))
    radii = [float(c.get("r") or 0) for c in svg.findall(f"{SVG}circle")]
    assert len(radii) == 2 and radii[0] > radii[1]
