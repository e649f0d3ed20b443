"""Charts drawn on the server as SVG: nothing to load, nothing to build, readable without JavaScript.

Every chart of the console is drawn here, so the rules of a readable chart hold for all of them: a count axis
has whole-number ticks; x labels are thinned until none overlaps the next, and the outermost are anchored to
the chart's edge so none is clipped; series are drawn widest first, so one that coincides with another still
shows around it; time is a line, categories are bars. Text widths are estimated (no font metrics on the
server) generously, and the browser tests check the result against the boxes Chromium draws.
"""

from __future__ import annotations

import math
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from html import escape
from itertools import pairwise

from markupsafe import Markup

PALETTE = ("#2563eb", "#16a34a", "#f59e0b", "#dc2626", "#7c3aed", "#0891b2")
FONT_PX = 11
CHAR_EM = 0.62
"""An upper estimate of a character's width in em, in the console's sans-serif at FONT_PX."""
LABEL_GAP = 10
LEGEND_ROW = 20
WIDTHS = (6.0, 3.5, 2.0)
"""Stroke widths in drawing order: a later series is thinner, so an earlier one it covers shows as a rim."""
DASHES = ("", "10 5", "3 3", "1 3", "8 3 2 3", "2 6")
"""A dash pattern each past the first, so a series lying on another shows it through its gaps."""


@dataclass(frozen=True, slots=True)
class Series:
    name: str
    values: Sequence[float | None]
    dashed: bool = False


def text_width(text: str) -> float:
    return len(text) * FONT_PX * CHAR_EM


def value_ticks(peak: float, *, counts: bool, target: int = 4) -> list[float]:
    """Ticks from 0 to at least `peak`, at a 1-2-2.5-5 step; whole numbers only for a count."""
    peak = max(peak, 0.0)
    if peak == 0:
        return [0.0, 1.0]
    raw = max(peak / target, 1.0) if counts else peak / target
    magnitude = 10 ** math.floor(math.log10(raw))
    step = 10 * magnitude
    for m in (1, 2, 2.5, 5):
        candidate = m * magnitude
        if counts and candidate != int(candidate):
            continue
        if candidate >= raw:
            step = candidate
            break
    return [i * step for i in range(math.ceil(peak / step - 1e-9) + 1)]


def tick_label(value: float, *, counts: bool) -> str:
    return f"{value:,.0f}" if counts else f"{value:,.6g}"


@dataclass(frozen=True, slots=True)
class Placed:
    x: float
    anchor: str
    text: str
    low: float
    high: float


def place_label(x: float, text: str, width: float) -> Placed:
    """A label centred on x, or anchored to the chart's edge it would otherwise cross."""
    half = text_width(text) / 2
    if x - half < 2:
        return Placed(2, "start", text, 2, 2 + 2 * half)
    if x + half > width - 2:
        return Placed(width - 2, "end", text, width - 2 - 2 * half, width - 2)
    return Placed(x, "middle", text, x - half, x + half)


def _steps(count: int) -> list[int]:
    steps = [1, 2, 3, 4, 6, 8, 12, 24, 48, 72, 96, 168]
    while steps[-1] < count:
        steps.append(steps[-1] * 2)
    return steps


def thin_labels(xs: Sequence[float], labels: Sequence[str], width: float) -> list[Placed]:
    """Every k-th label for the smallest k (from steps that land on round hours) at which none overlaps."""
    for step in _steps(len(labels)):
        placed = [place_label(xs[i], labels[i], width) for i in range(0, len(labels), step)]
        if all(a.high + LABEL_GAP <= b.low for a, b in pairwise(placed)):
            return placed
    return [place_label(xs[0], labels[0], width)] if labels else []


def _text(x: float, y: float, text: str, *, anchor: str = "start", cls: str = "") -> str:
    attr = f' class="{cls}"' if cls else ""
    return f'<text x="{x:.1f}" y="{y:.1f}" text-anchor="{anchor}"{attr}>{escape(text)}</text>'


def _style(n: int, item: Series) -> tuple[str, float, str]:
    colour = PALETTE[n % len(PALETTE)]
    width = WIDTHS[min(n, len(WIDTHS) - 1)]
    dash = "6 4" if item.dashed else DASHES[n % len(DASHES)]
    return colour, width, f' stroke-dasharray="{dash}"' if dash else ""


def _legend(
    series: Sequence[Series], left: float, width: float, *, bars: bool = False
) -> tuple[list[str], int]:
    """Each series' swatch and name, wrapped onto as many rows as the width needs; and the rows' height."""
    parts: list[str] = []
    x, row = left, 0
    for n, item in enumerate(series):
        size = 30 + text_width(item.name) + 18
        if x + size > width and x > left:
            x, row = left, row + 1
        colour, stroke, dash = _style(n, item)
        y = 14 + row * LEGEND_ROW
        swatch = (
            f'<rect x="{x + 6:.1f}" y="{y - 10}" width="12" height="12" fill="{colour}"/>'
            if bars
            else f'<line x1="{x:.1f}" x2="{x + 24:.1f}" y1="{y - 4}" y2="{y - 4}" stroke="{colour}" '
            f'stroke-width="{stroke}"{dash}/>'
        )
        parts.append(f'<g class="legend">{swatch}{_text(x + 30, y, item.name)}</g>')
        x += size
    return parts, (row + 1) * LEGEND_ROW if series else 0


def _open(width: float, height: float, title: str, kind: str) -> str:
    return (
        f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {width:.0f} {height:.0f}" role="img" '
        f'class="chart {kind}" aria-label="{escape(title)}"><title>{escape(title)}</title>'
    )


def line_chart(
    labels: Sequence[str],
    series: Sequence[Series],
    *,
    title: str,
    counts: bool = True,
    partial: Collection[int] = (),
    width: int = 960,
    height: int = 260,
) -> Markup:
    """Lines over shared x labels (time), with a y axis from 0 and a legend; a gap (None) breaks a line.

    `partial` are the indexes of buckets the data covers only in part (a day cut by the window's end): the
    segments to them are dotted and their points hollow, so a short last day reads as such, not as a fall."""
    legend, legend_h = _legend(series, 8, width)
    ticks = value_ticks(
        max((v for s in series for v in s.values if v is not None), default=0.0), counts=counts
    )
    tick_texts = [tick_label(t, counts=counts) for t in ticks]
    left = 10 + max(text_width(t) for t in tick_texts)
    right, top, bottom = 12, legend_h + 16, 30
    plot_w, plot_h = width - left - right, height - top - bottom
    peak = ticks[-1]
    count = max(len(labels), 1)

    def x(i: int) -> float:
        return left + (plot_w * i / (count - 1) if count > 1 else plot_w / 2)

    def y(v: float) -> float:
        return top + plot_h - plot_h * v / peak

    parts = [
        _open(width, height, title, "line"),
        f'<rect class="plot" x="{left:.1f}" y="{top}" width="{plot_w:.1f}" height="{plot_h}" fill="none"/>',
    ]
    for value, label in zip(ticks, tick_texts, strict=True):
        parts.append(
            f'<line x1="{left:.1f}" x2="{width - right}" y1="{y(value):.1f}" y2="{y(value):.1f}" '
            'class="grid"/>' + _text(left - 6, y(value) + 4, label, anchor="end", cls="tick value")
        )
    for placed in thin_labels([x(i) for i in range(len(labels))], labels, width):
        parts.append(_text(placed.x, height - bottom + 18, placed.text, anchor=placed.anchor, cls="tick"))
    for n, item in enumerate(series):
        colour, stroke, dash = _style(n, item)
        line = f'fill="none" stroke="{colour}" stroke-width="{stroke}" stroke-linejoin="round"'
        runs: list[list[int]] = [[]]
        for i, v in enumerate(item.values):
            if v is None:
                runs.append([])
            else:
                runs[-1].append(i)
        for run in runs:
            whole = [i for i in run if i not in partial]
            for a, b in pairwise(run):
                if a in partial or b in partial:
                    points = (
                        f"{x(a):.1f},{y(item.values[a] or 0):.1f} {x(b):.1f},{y(item.values[b] or 0):.1f}"
                    )
                    parts.append(
                        f'<polyline class="partial" {line} stroke-dasharray="2 4" points="{points}"/>'
                    )
            for segment in _contiguous(whole):
                if len(segment) > 1:
                    points = " ".join(f"{x(i):.1f},{y(item.values[i] or 0):.1f}" for i in segment)
                    parts.append(f'<polyline class="series" {line}{dash} points="{points}"/>')
                elif len(run) == 1:
                    i = segment[0]
                    parts.append(
                        f'<circle cx="{x(i):.1f}" cy="{y(item.values[i] or 0):.1f}" r="{stroke + 1:g}" '
                        f'fill="{colour}"/>'
                    )
            for i in run:
                if i in partial:
                    parts.append(
                        f'<circle class="partial" cx="{x(i):.1f}" cy="{y(item.values[i] or 0):.1f}" r="4" '
                        f'fill="#fff" stroke="{colour}" stroke-width="2"/>'
                    )
    parts.extend(legend)
    parts.append("</svg>")
    return Markup("".join(parts))


def _contiguous(indexes: Sequence[int]) -> list[list[int]]:
    runs: list[list[int]] = []
    for i in indexes:
        if runs and runs[-1][-1] == i - 1:
            runs[-1].append(i)
        else:
            runs.append([i])
    return runs


def _fit(text: str, room: float) -> str:
    """The text cut with an ellipsis to the room it has (the full text is the bar's tooltip)."""
    if text_width(text) <= room:
        return text
    keep = max(1, int(room / (FONT_PX * CHAR_EM)) - 1)
    return text[:keep] + "…"


def bar_chart(
    labels: Sequence[str],
    series: Sequence[Series],
    *,
    title: str,
    counts: bool = True,
    width: int = 960,
) -> Markup:
    """Horizontal bars, one band per category and a bar per series in it: categories have no order to draw
    a line through, and a band per row keeps every category's label whole, however many there are."""
    legend, legend_h = _legend(series, 8, width, bars=True)
    ticks = value_ticks(max((v or 0.0 for s in series for v in s.values), default=0.0), counts=counts)
    tick_texts = [tick_label(t, counts=counts) for t in ticks]
    room = min(max((text_width(t) for t in labels), default=0.0), width * 0.3)
    left, right, top, bottom = room + 16, 8 + text_width(tick_texts[-1]) / 2, legend_h + 12, 28
    bar_h, band_pad = 12, 10
    band = bar_h * max(len(series), 1) + band_pad
    plot_w, plot_h = width - left - right, band * max(len(labels), 1)
    height = top + plot_h + bottom
    peak = ticks[-1]

    def x(v: float) -> float:
        return left + plot_w * v / peak

    parts = [
        _open(width, height, title, "bars"),
        f'<rect class="plot" x="{left:.1f}" y="{top}" width="{plot_w:.1f}" height="{plot_h}" fill="none"/>',
    ]
    for value, label in zip(ticks, tick_texts, strict=True):
        parts.append(
            f'<line x1="{x(value):.1f}" x2="{x(value):.1f}" y1="{top}" y2="{top + plot_h}" class="grid"/>'
            + _text(x(value), top + plot_h + 18, label, anchor="middle", cls="tick value")
        )
    for row, label in enumerate(labels):
        band_top = top + row * band + band_pad / 2
        parts.append(
            f'<g class="category"><title>{escape(label)}</title>'
            + _text(
                left - 8, band_top + band / 2 - band_pad / 2 + 4, _fit(label, room), anchor="end", cls="tick"
            )
            + "</g>"
        )
        for n, item in enumerate(series):
            value = item.values[row] or 0.0
            colour = PALETTE[n % len(PALETTE)]
            parts.append(
                f'<rect class="bar" x="{left:.1f}" y="{band_top + n * bar_h:.1f}" '
                f'width="{x(value) - left:.1f}" '
                f'height="{bar_h - 2}" fill="{colour}"><title>{escape(label)}: {escape(item.name)} '
                f"{tick_label(value, counts=counts)}</title></rect>"
            )
    parts.extend(legend)
    parts.append("</svg>")
    return Markup("".join(parts))


def sparkline(values: Sequence[float], *, title: str, width: int = 120, height: int = 24) -> Markup:
    """A small line of `values` (a screen's last 24 hours) from 0 to its peak, no axes: read by its shape,
    its peak named in its title; an empty series is a flat line on the baseline."""
    peak = max(values, default=0.0) or 1.0
    count = max(len(values), 1)

    def point(i: int, v: float) -> str:
        x = 1 + (width - 2) * i / (count - 1) if count > 1 else width / 2
        return f"{x:.1f},{height - 2 - (height - 4) * v / peak:.1f}"

    points = " ".join(point(i, v) for i, v in enumerate(values))
    return Markup(
        f'<svg class="chart sparkline" role="img" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}"><title>{escape(title)}</title>'
        f'<polyline fill="none" stroke="{PALETTE[0]}" stroke-width="1.5" points="{points}"/></svg>'
    )
