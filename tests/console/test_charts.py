"""Server-side SVG charts: one polyline per series, gaps break lines, text is escaped."""

from __future__ import annotations

import xml.etree.ElementTree as ET

from adslot.console.charts import Series, line_chart

SVG = "{http://www.w3.org/2000/svg}"


def test_each_series_is_a_line_with_its_legend_and_the_axis_starts_at_zero() -> None:
    svg = ET.fromstring(
        str(line_chart(["a", "b", "c"], [Series("plays", [1, 2, 3]), Series("plan", [0, 1.5, 3])], title="t"))
    )
    assert len(svg.findall(f"{SVG}polyline")) == 2
    texts = [t.text for t in svg.findall(f"{SVG}text")]
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
