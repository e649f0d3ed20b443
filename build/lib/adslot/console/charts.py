"""Charts drawn on the server as SVG: nothing to load, nothing to build, readable without JavaScript."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from html import escape

from markupsafe import Markup

PALETTE = ("#2563eb", "#16a34a", "#f59e0b", "#dc2626", "#7c3aed", "#0891b2")


@dataclass(frozen=True, slots=True)
class Series:
    name: str
    values: Sequence[float | None]
    dashed: bool = False


def _nice_max(value: float) -> float:
    if value <= 0:
        return 1.0
    magnitude = 10 ** (len(str(int(value))) - 1)
    for step in (1, 2, 2.5, 5, 10):
        if step * magnitude >= value:
            return float(step * magnitude)
    return float(10 * magnitude)


def _label(value: float) -> str:
    if value >= 1_000_000:
        return f"{value / 1_000_000:g}M"
    if value >= 1_000:
        return f"{value / 1_000:g}k"
    return f"{value:g}"


def line_chart(
    labels: Sequence[str], series: Sequence[Series], *, title: str, width: int = 760, height: int = 240
) -> Markup:
    """Lines over shared x labels, with a y axis from 0 and a legend; a gap (None) breaks a line."""
    left, right, top, bottom = 48, 12, 28, 36
    plot_w, plot_h = width - left - right, height - top - bottom
    peak = _nice_max(max((v for s in series for v in s.values if v is not None), default=0.0))
    count = max(len(labels), 1)

    def x(i: int) -> float:
        return left + (plot_w * i / (count - 1) if count > 1 else plot_w / 2)

    def y(v: float) -> float:
        return top + plot_h - plot_h * v / peak

    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {width} {height}" role="img" '
        f'class="chart" aria-label="{escape(title)}"><title>{escape(title)}</title>'
    ]
    for step in range(5):
        value = peak * step / 4
        parts.append(
            f'<line x1="{left}" x2="{width - right}" y1="{y(value):.1f}" y2="{y(value):.1f}" class="grid"/>'
            f'<text x="{left - 6}" y="{y(value) + 4:.1f}" text-anchor="end">{_label(value)}</text>'
        )
    every = max(1, count // 8)
    for i, label in enumerate(labels):
        if i % every == 0:
            edge = {0: "start", count - 1: "end"} if count > 1 else {}
            parts.append(
                f'<text x="{x(i):.1f}" y="{height - bottom + 16}" '
                f'text-anchor="{edge.get(i, "middle")}">{escape(label)}</text>'
            )
    for n, item in enumerate(series):
        colour = PALETTE[n % len(PALETTE)]
        runs: list[list[str]] = [[]]
        for i, v in enumerate(item.values):
            if v is None:
                runs.append([])
            else:
                runs[-1].append(f"{x(i):.1f},{y(v):.1f}")
        dash = ' stroke-dasharray="6 4"' if item.dashed else ""
        for run in runs:
            if len(run) > 1:
                points = " ".join(run)
                parts.append(
                    f'<polyline fill="none" stroke="{colour}" stroke-width="2"{dash} points="{points}"/>'
                )
            elif run:
                cx, cy = run[0].split(",")
                parts.append(f'<circle cx="{cx}" cy="{cy}" r="3" fill="{colour}"/>')
        legend_x = left + n * 150
        parts.append(
            f'<rect x="{legend_x}" y="8" width="12" height="12" fill="{colour}"/>'
            f'<text x="{legend_x + 18}" y="18">{escape(item.name)}</text>'
        )
    parts.append("</svg>")
    return Markup("".join(parts))
