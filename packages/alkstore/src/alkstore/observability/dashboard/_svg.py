"""Line charts as inline SVG, drawn on the server: no script, no assets.

A chart is a handful of polylines over a shared time axis, with gridlines,
the axis labels and a legend that shows each series' latest value. Gaps (a
``None``) break a line rather than drawing it through zero.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from ._html import esc

__all__ = ["Series", "line_chart", "nice_ceiling", "sparkline"]


@dataclass(frozen=True)
class Series:
    label: str
    color: str
    values: Sequence[float | None]


def nice_ceiling(value: float) -> float:
    """The smallest of 1, 2, 2.5, 5 times a power of ten that is >= *value*
    (1 for nothing above 0): a round top for an axis."""
    if value <= 0:
        return 1.0
    exp = math.floor(math.log10(value))
    for step in (1.0, 2.0, 2.5, 5.0, 10.0):
        top = step * 10.0**exp
        if top >= value * (1 - 1e-9):
            return top
    return 10.0 ** (exp + 1)  # pragma: no cover - the loop always returns


def _fmt(value: float) -> str:
    if value == 0:
        return "0"
    if abs(value) >= 1000:
        return f"{value / 1000:.3g}k"
    if float(value).is_integer():
        return str(int(value))
    return f"{value:.3g}"


def _ago(seconds: float) -> str:
    if seconds < 90:
        return f"-{seconds:.0f}s"
    if seconds < 5400:
        return f"-{seconds / 60:.0f}m"
    return f"-{seconds / 3600:.1f}h"


def line_chart(
    title: str,
    ages_s: Sequence[float],
    series: Sequence[Series],
    *,
    width: int = 560,
    height: int = 190,
    unit: str = "",
) -> str:
    """An SVG chart of *series* over time; ``ages_s[i]`` is how many seconds
    before now point ``i`` was taken (oldest first)."""
    left, right, top, bottom = 44, 10, 26, 38
    plot_w, plot_h = width - left - right, height - top - bottom
    values = [v for s in series for v in s.values if v is not None]
    low = min([0.0, *values])
    high = max([0.0, *values])
    y_top = nice_ceiling(high) if high > 0 else (0.0 if low < 0 else 1.0)
    y_bottom = -nice_ceiling(-low) if low < 0 else 0.0
    span_y = (y_top - y_bottom) or 1.0
    oldest = max(ages_s) if ages_s else 0.0
    span_x = oldest or 1.0

    def x(age: float) -> float:
        return left + plot_w * (1 - age / span_x) if oldest else left + plot_w

    def y(value: float) -> float:
        return top + plot_h * (1 - (value - y_bottom) / span_y)

    parts = [
        f'<svg class="chart" xmlns="http://www.w3.org/2000/svg" width="{width}" '
        f'height="{height}" viewBox="0 0 {width} {height}" role="img" '
        f'aria-label="{esc(title)}">',
        f"<title>{esc(title)}</title>",
        f'<text x="{left}" y="16" font-size="13" font-weight="600" fill="#1d2330">'
        f"{esc(title)}</text>",
    ]
    for i in range(5):
        value = y_bottom + span_y * i / 4
        gy = y(value)
        stroke = "#9aa3b2" if value == 0 else "#e3e6eb"
        parts.append(
            f'<line x1="{left}" y1="{gy:.1f}" x2="{left + plot_w}" y2="{gy:.1f}" '
            f'stroke="{stroke}" stroke-width="1"/>'
        )
        parts.append(
            f'<text x="{left - 6}" y="{gy + 4:.1f}" font-size="10" text-anchor="end" '
            f'fill="#5d6677">{esc(_fmt(value))}</text>'
        )
    if ages_s:
        base = top + plot_h + 14
        parts.append(
            f'<text x="{left}" y="{base}" font-size="10" fill="#5d6677">{esc(_ago(oldest))}</text>'
        )
        parts.append(
            f'<text x="{left + plot_w}" y="{base}" font-size="10" text-anchor="end" '
            f'fill="#5d6677">now</text>'
        )
    else:
        parts.append(
            f'<text x="{left + plot_w / 2}" y="{top + plot_h / 2}" font-size="12" '
            f'text-anchor="middle" fill="#5d6677">collecting samples...</text>'
        )
    for s in series:
        run: list[str] = []
        for age, point in zip(ages_s, s.values, strict=False):
            if point is None:
                parts.extend(_polyline(run, s.color))
                run = []
                continue
            run.append(f"{x(age):.1f},{y(point):.1f}")
        parts.extend(_polyline(run, s.color))
    lx = left
    legend_y = height - 6
    for s in series:
        last = next((v for v in reversed(s.values) if v is not None), None)
        text = f"{s.label} {_fmt(last)}{unit}" if last is not None else s.label
        parts.append(
            f'<rect x="{lx}" y="{legend_y - 9}" width="10" height="10" rx="2" fill="{s.color}"/>'
        )
        parts.append(
            f'<text x="{lx + 14}" y="{legend_y}" font-size="11" fill="#1d2330">{esc(text)}</text>'
        )
        lx += 22 + 7 * len(text)
    parts.append("</svg>")
    return "".join(parts)


def _polyline(points: list[str], color: str) -> list[str]:
    if not points:
        return []
    if len(points) == 1:
        cx, cy = points[0].split(",")
        return [f'<circle cx="{cx}" cy="{cy}" r="2" fill="{color}"/>']
    return [
        f'<polyline fill="none" stroke="{color}" stroke-width="1.8" '
        f'stroke-linejoin="round" points="{" ".join(points)}"/>'
    ]


def sparkline(values: Sequence[float], *, width: int = 120, height: int = 24) -> str:
    """A tiny trend line for a table cell."""
    if len(values) < 2:
        return ""
    high = max(values) or 1.0
    step = width / (len(values) - 1)
    points = " ".join(
        f"{i * step:.1f},{height - 2 - (height - 4) * v / high:.1f}" for i, v in enumerate(values)
    )
    return (
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}" aria-hidden="true"><polyline fill="none" '
        f'stroke="#3b7dd8" stroke-width="1.5" points="{points}"/></svg>'
    )
