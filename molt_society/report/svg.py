"""Inline SVG charts for the offline report: line, points and bar series on linear, log10 or time axes.

Pure Python, no script, no external reference. Every string from the data is escaped; numbers that are
NaN or infinite (or not positive on a log axis) are skipped. Each drawn data mark carries ``class="mark"``.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from html import escape

from molt_society.report.model import Figure

WIDTH = 640
PLOT_HEIGHT = 250  # height of the plotting area; the viewBox grows with the legend and the x labels
FONT = 11
CHAR_W = 6.3  # mean glyph width at FONT px, for layout estimates
# Okabe-Ito, the colorblind-safe palette (yellow last: weak on white).
PALETTE = ("#0072B2", "#E69F00", "#009E73", "#D55E00", "#CC79A7", "#56B4E9", "#000000", "#F0E442")
SUPERSCRIPT = str.maketrans("-0123456789", "⁻⁰¹²³⁴⁵⁶⁷⁸⁹")
DAY = 86400.0
TIME_STEPS = (1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200, 10800, 21600, 43200, 86400,
              172800, 604800, 1209600)  # fmt: skip
MONTH_STEPS = (1, 2, 3, 6, 12, 24, 60, 120, 240, 600)
MAX_CATEGORIES = 1000  # x_kind "category" without labels: indexes above are dropped
TIME_RANGE = (-6.0e10, 2.5e11)  # epoch seconds datetime can label (years ~100 to ~9900)


def esc(text: object) -> str:
    """``text`` escaped for HTML text and attribute values alike."""
    return escape(str(text), quote=True)


def finite(v: object) -> bool:
    return isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v)


def fmt_number(v: float | int) -> str:
    """A number for people: ints with thousands separators, floats to 4 significant digits."""
    if isinstance(v, bool):
        return str(v).lower()
    if isinstance(v, int):
        return f"{v:,}"
    if not math.isfinite(v):
        return "—"
    if v == 0:
        return "0"
    a = abs(v)
    if a >= 1e9 or a < 1e-3:
        mantissa, exponent = f"{v:.3e}".split("e")
        return f"{_strip(mantissa)}e{int(exponent)}"
    if a >= 1000:
        return f"{v:,.0f}"
    decimals = max(0, 3 - math.floor(math.log10(a)))
    return _strip(f"{v:,.{decimals}f}")


def _strip(s: str) -> str:
    return s.rstrip("0").rstrip(".") if "." in s else s


def shorten(text: str, limit: int) -> str:
    """``text`` cut to ``limit`` characters, an ellipsis in the middle (cut before escaping, never after)."""
    if len(text) <= limit:
        return text
    head = (limit - 1) * 3 // 5
    return text[:head] + "…" + text[len(text) - (limit - 1 - head) :]


# ---- ticks ----------------------------------------------------------------------------------------------


def nice_step(span: float, target: int) -> float:
    """The 1-2-5 step that cuts ``span`` into about ``target`` intervals."""
    raw = span / max(target, 1)
    mag = 10.0 ** math.floor(math.log10(raw))
    for m in (1.0, 2.0, 5.0):
        if raw <= m * mag * (1 + 1e-9):
            return m * mag
    return 10.0 * mag


def nice_ticks(lo: float, hi: float, target: int = 5, snap: bool = True) -> tuple[float, float, list[float]]:
    """1-2-5 ticks over [lo, hi]; ``snap`` widens the domain to the outer ticks. Returns (lo, hi, ticks)."""
    lo, hi = _widen(lo, hi)
    if not math.isfinite(hi - lo):
        return lo, hi, [lo, hi]
    step = nice_step(hi - lo, target)
    if snap:
        lo, hi = math.floor(lo / step + 1e-9) * step, math.ceil(hi / step - 1e-9) * step
    i0, i1 = math.ceil(lo / step - 1e-9), math.floor(hi / step + 1e-9)
    if not 0 <= i1 - i0 <= 4 * target:  # precision lost at this magnitude
        return lo, hi, [lo, hi]
    return lo, hi, [_tidy(i * step, step) for i in range(i0, i1 + 1)]


def _tidy(v: float, step: float) -> float:
    """``v`` without the float noise of ``i * step`` (0.30000000000000004 -> 0.3)."""
    digits = max(0, 1 - math.floor(math.log10(step)))
    return round(v, digits) if digits < 300 else v


def _widen(lo: float, hi: float) -> tuple[float, float]:
    """A non-empty interval around a single value."""
    if hi - lo > 1e-12 * max(abs(lo), abs(hi)) and hi > lo:
        return lo, hi
    d = abs(lo) * 0.1 if lo != 0 else 1.0
    return lo - d, hi + d


def tick_label(v: float, step: float, top: float) -> str:
    """Label of a linear tick ``v`` on an axis with 1-2-5 ``step`` and largest magnitude ``top``."""
    if v == 0:
        return "0"
    if top >= 1e15 or step < 1e-4:
        mantissa, exponent = f"{v:.2e}".split("e")
        return f"{_strip(mantissa)}e{int(exponent)}"
    if top >= 1e4:
        for unit, suffix in ((1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k")):
            if top >= unit:
                decimals = max(0, -math.floor(math.log10(step / unit) + 1e-9))
                return f"{v / unit:.{decimals}f}{suffix}"
    decimals = max(0, -math.floor(math.log10(step) + 1e-9))
    return f"{v:,.{decimals}f}"


def decade_label(d: int, powers: bool = False) -> str:
    """10**d as plain digits, or as a power of ten when ``powers`` or far from 1."""
    if -3 <= d <= 4 and not powers:
        return f"{10**d:,}" if d >= 0 else f"{10.0**d:.{-d}f}"
    return "10" + str(d).translate(SUPERSCRIPT)


@dataclass
class Axis:
    """A mapping from data (already log10 when ``log``) to [0, 1], with ticks as (position, label)."""

    lo: float
    hi: float
    log: bool
    ticks: list[tuple[float, str]]

    def frac(self, v: float) -> float:
        return (v - self.lo) / (self.hi - self.lo)


def linear_axis(lo: float, hi: float, target: int, snap: bool = True) -> Axis:
    lo, hi, ticks = nice_ticks(lo, hi, target, snap)
    step = ticks[1] - ticks[0] if len(ticks) > 1 else abs(hi - lo) or 1.0
    top = max(abs(lo), abs(hi))
    return Axis(lo, hi, False, [(t, tick_label(t, step, top)) for t in ticks])


def log_axis(lo: float, hi: float) -> Axis:
    """Axis over log10 values [lo, hi]: decade ticks, or 1-2-5 multiples when under two decades show."""
    if hi - lo < 1e-9:
        lo, hi = lo - 0.5, hi + 0.5
    pad = (hi - lo) * 0.04
    lo, hi = lo - pad, hi + pad
    decades = list(range(math.ceil(lo), math.floor(hi) + 1))
    if len(decades) >= 2:
        every = math.ceil(len(decades) / 8)
        shown = [d for d in decades if d % every == 0]
        powers = any(not -3 <= d <= 4 for d in shown)
        return Axis(lo, hi, True, [(float(d), decade_label(d, powers)) for d in shown])
    ticks: list[tuple[float, str]] = []
    for d in range(math.floor(lo), math.ceil(hi) + 1):
        for m in (1, 2, 5):
            t = math.log10(m) + d
            if lo <= t <= hi:
                ticks.append((t, decade_label(d) if m == 1 else fmt_number(m * 10.0**d)))
    if len(ticks) < 2:
        _, _, values = nice_ticks(10.0**lo, 10.0**hi, 4, snap=False)
        step = values[1] - values[0] if len(values) > 1 else 10.0**lo
        ticks = [(math.log10(v), tick_label(v, step, 10.0**hi)) for v in values if v > 0]
    return Axis(lo, hi, True, ticks)


def time_axis(lo: float, hi: float, target: int = 6) -> Axis:
    """Axis over epoch seconds, ticks on round UTC times: HH:MM under two days, else YYYY-MM-DD."""
    if hi - lo < 1:
        lo, hi = lo - 1800, hi + 1800
    span = hi - lo
    raw = span / target
    ticks: list[float] = []
    if raw <= 14 * DAY:
        step = float(next((s for s in TIME_STEPS if s >= raw), TIME_STEPS[-1]))
        if span >= 2 * DAY:
            step = max(step, DAY)
        ticks = [i * step for i in range(math.ceil(lo / step), math.floor(hi / step) + 1)]
    else:
        months = next((m for m in MONTH_STEPS if m * 30.44 * DAY >= raw), MONTH_STEPS[-1])
        start = datetime.fromtimestamp(lo, UTC)
        index = start.year * 12 + start.month - 1
        index += -index % months
        while True:
            t = datetime(index // 12, index % 12 + 1, 1, tzinfo=UTC).timestamp()
            if t > hi:
                break
            if t >= lo:
                ticks.append(t)
            index += months
        step = months * 30.44 * DAY
    fmt = ("%H:%M:%S" if step < 60 else "%H:%M") if span < 2 * DAY else "%Y-%m-%d"
    return Axis(lo, hi, False, [(t, datetime.fromtimestamp(t, UTC).strftime(fmt)) for t in ticks])


def category_axis(n: int, labels: list[str]) -> Axis:
    return Axis(
        -0.5, n - 0.5, False, [(float(i), labels[i] if i < len(labels) else str(i)) for i in range(n)]
    )


# ---- drawing --------------------------------------------------------------------------------------------

Point = tuple[float, float | None]  # (x, y); y None breaks a line


@dataclass
class _Prepared:
    name: str
    style: str
    color: str
    dash: str  # stroke-dasharray of lines: set once the palette's colors repeat
    points: list[Point]


def _prepare(fig: Figure) -> list[_Prepared]:
    """Series with x and y as floats on the axes' scales (log10 where log); unusable values dropped."""
    category = fig.x_kind == "category"
    log_x = fig.log_x and fig.x_kind == "number"
    out: list[_Prepared] = []
    for i, s in enumerate(fig.series):
        pts: list[Point] = []
        for x, y in zip(s.x, s.y, strict=False):
            if not finite(x) or (log_x and x <= 0):
                continue
            if category and (x < 0 or x != int(x) or x >= (len(fig.categories) or MAX_CATEGORIES)):
                continue
            fx = math.log10(x) if log_x else float(x)
            fy: float | None = None
            if finite(y) and y is not None and not (fig.log_y and y <= 0):
                fy = math.log10(y) if fig.log_y else float(y)
            pts.append((fx, fy))
        style = s.style if s.style in ("line", "points", "bars") else "line"
        dash = ("", "6 3", "2 3")[min(i // len(PALETTE), 2)]
        out.append(_Prepared(str(s.name), style, PALETTE[i % len(PALETTE)], dash, pts))
    return out


BandPoint = tuple[float, float, float]  # x, low, high on the axes' scales


def _prepare_bands(
    fig: Figure, series: list[_Prepared], bands: Mapping[str, Band]
) -> list[tuple[str, list[BandPoint]]]:
    """(color, run of points) per unbroken stretch of each band whose series exists; unusable values
    (not finite, not positive on a log axis) break it."""
    out: list[tuple[str, list[BandPoint]]] = []

    def scale(v: float | None, log: bool) -> float | None:
        if not finite(v) or v is None or (log and v <= 0):
            return None
        return math.log10(v) if log else float(v)

    for s in series:
        if s.name not in bands:
            continue
        xs, lows, highs = bands[s.name]
        run: list[BandPoint] = []
        for x, lo, hi in zip(xs, lows, highs, strict=False):
            px = scale(x, fig.log_x and fig.x_kind == "number")
            plo, phi = scale(lo, fig.log_y), scale(hi, fig.log_y)
            if px is None or plo is None or phi is None:
                if run:
                    out.append((s.color, run))
                run = []
                continue
            run.append((px, plo, phi))
        if run:
            out.append((s.color, run))
    return out


def _bands_svg(f: _Frame, shades: list[tuple[str, list[BandPoint]]]) -> list[str]:
    """Each band run as a polygon (its upper edge, then the lower edge back); a lone point as a bar."""
    out: list[str] = []
    for color, run in shades:
        if len(run) == 1:
            x, lo, hi = run[0]
            out.append(
                f'<line class="mark band" x1="{f.px(x):.1f}" x2="{f.px(x):.1f}" y1="{f.py(lo):.1f}" '
                f'y2="{f.py(hi):.1f}" stroke="{color}" stroke-opacity="0.35" stroke-width="6"/>'
            )
            continue
        upper = [f"{f.px(x):.1f},{f.py(hi):.1f}" for x, _, hi in run]
        lower = [f"{f.px(x):.1f},{f.py(lo):.1f}" for x, lo, _ in reversed(run)]
        out.append(
            f'<polygon class="mark band" points="{" ".join(upper + lower)}" fill="{color}" '
            'fill-opacity="0.18" stroke="none"/>'
        )
    return [f'<g class="bands">{"".join(out)}</g>'] if out else []


def _bar_gap(xs: list[float]) -> float:
    """Smallest distance between distinct x values of bars (1 when there is one)."""
    ordered = sorted(set(xs))
    gaps = [b - a for a, b in itertools.pairwise(ordered) if b - a > 0]
    return min(gaps) if gaps else 1.0


@dataclass
class _Frame:
    """Where the plot sits in the figure: margins, plot size, the axes and how the x labels are drawn."""

    x_axis: Axis
    y_axis: Axis
    left: float
    top: float
    plot_w: float
    plot_h: float
    height: float
    y_label_w: float
    x_labels: list[str]  # tick labels as shown (shortened)
    rotate: bool  # category labels at -45 degrees
    show_every: int  # label every n-th tick

    @property
    def base(self) -> float:
        return self.top + self.plot_h

    def px(self, v: float) -> float:
        return self.left + self.x_axis.frac(v) * self.plot_w

    def py(self, v: float) -> float:
        return self.top + (1 - self.y_axis.frac(v)) * self.plot_h


Band = tuple[Sequence[float], Sequence[float | None], Sequence[float | None]]
"""An interval around a line series: x, low, high (None breaks the band)."""


def figure_svg(fig: Figure, bands: Mapping[str, Band] | None = None) -> str | None:
    """The figure as one ``<svg class="figure">`` element, or None when there is nothing to draw.

    ``bands``: per series name, an interval (a CI) drawn as a translucent area of the series' color behind
    every series; the axes cover it."""
    series = _prepare(fig)
    shades = _prepare_bands(fig, series, bands or {})
    xs = [x for s in series for x, y in s.points if y is not None] + [p[0] for _, run in shades for p in run]
    ys = [y for s in series for _, y in s.points if y is not None] + [
        v for _, run in shades for p in run for v in p[1:]
    ]
    if not ys:
        return None
    bars = [s for s in series if s.style == "bars" and any(y is not None for _, y in s.points)]
    bar_xs = [x for s in bars for x, y in s.points if y is not None]
    gap = _bar_gap(bar_xs) if bars else 0.0
    x_axis, x_label = _x_axis(fig, xs, gap, bool(bars))
    y_axis = _y_axis(fig, ys, bool(bars))
    legend_items = [s for s in series if s.points] if len(series) > 1 else []
    legend_rows, legend_svg = _legend(legend_items)
    frame = _layout(fig, x_axis, y_axis, legend_rows)
    out: list[str] = [
        f'<svg class="figure" data-key="{esc(fig.key)}" viewBox="0 0 {WIDTH} {frame.height:.0f}" '
        f'width="100%" role="img" font-size="{FONT}" preserveAspectRatio="xMidYMid meet">',
        f"<title>{esc(fig.title)}</title>",
    ]
    out += _axes_svg(fig, frame, x_label)
    out += _bands_svg(frame, shades)
    out += _data_svg(fig, frame, series, bars, gap)
    out.append(legend_svg)
    out.append("</svg>")
    return "".join(out)


def _x_axis(fig: Figure, xs: list[float], gap: float, bars: bool) -> tuple[Axis, str]:
    """The x axis (category, time, log or linear) and its label (time axes say UTC and the first day)."""
    time_kind = fig.x_kind == "time" and TIME_RANGE[0] <= min(xs) and max(xs) <= TIME_RANGE[1]
    x_label = str(fig.x_label)
    if fig.x_kind == "category":
        n = max(len(fig.categories), int(max(xs)) + 1)
        return category_axis(n, [str(c) for c in fig.categories]), x_label
    lo, hi = min(xs) - gap / 2, max(xs) + gap / 2
    if time_kind:
        x_axis = time_axis(lo, hi)
        if "UTC" not in x_label:
            first = datetime.fromtimestamp(x_axis.lo, UTC).strftime("%Y-%m-%d")
            x_label += f" (UTC, from {first})" if x_axis.hi - x_axis.lo < 2 * DAY else " (UTC)"
        return x_axis, x_label
    if fig.log_x and fig.x_kind == "number":
        return log_axis(lo, hi), x_label
    return linear_axis(lo, hi, 6, snap=not bars), x_label


def _y_axis(fig: Figure, ys: list[float], bars: bool) -> Axis:
    """The y axis: bars stand on zero (linear) or on the bottom (log)."""
    if fig.log_y:
        return log_axis(min(ys), max(ys))
    if bars:
        return linear_axis(min([*ys, 0.0]), max([*ys, 0.0]), 5)
    return linear_axis(min(ys), max(ys), 5)


def _layout(fig: Figure, x_axis: Axis, y_axis: Axis, legend_rows: int) -> _Frame:
    """Margins from the tick labels and the legend; long category labels turn -45 degrees."""
    y_label_w = max((len(label) for _, label in y_axis.ticks), default=1) * CHAR_W
    left = 24 + y_label_w + 8
    top = 14 + legend_rows * 18
    x_labels = [shorten(label, 20) for _, label in x_axis.ticks]
    last = len(x_labels[-1]) * CHAR_W / 2 + 4 if x_labels and fig.x_kind != "category" else 0
    right = max(24.0, last)
    plot_w = WIDTH - left - right
    slot = plot_w / max(len(x_axis.ticks), 1)
    widest = max((len(label) for label in x_labels), default=1) * CHAR_W
    rotate = fig.x_kind == "category" and widest > slot * 0.92
    show_every = 1
    if rotate:  # labels at -45 degrees: room below, and on the left for the first one
        show_every = max(1, math.ceil(FONT * 1.4 / slot))
        tick_room = widest * 0.71 + 16
        left = max(left, widest * 0.71 - slot / 2 + 6)
        plot_w = WIDTH - left - right
    else:
        tick_room = 20.0
    bottom = tick_room + 22
    plot_h = float(PLOT_HEIGHT)
    height = top + plot_h + bottom
    return _Frame(x_axis, y_axis, left, top, plot_w, plot_h, height, y_label_w, x_labels, rotate, show_every)


def _axes_svg(fig: Figure, f: _Frame, x_label: str) -> list[str]:
    """Grid, axis lines, tick labels and the two axis titles."""
    grid: list[str] = []
    labels: list[str] = []
    left, top, plot_w, base = f.left, f.top, f.plot_w, f.base
    for v, label in f.y_axis.ticks:
        ty = f.py(v)
        grid.append(f'<line x1="{left:.1f}" x2="{left + plot_w:.1f}" y1="{ty:.1f}" y2="{ty:.1f}"/>')
        labels.append(f'<text x="{left - 6:.1f}" y="{ty + 3.5:.1f}" text-anchor="end">{esc(label)}</text>')
    for i, ((v, _), label) in enumerate(zip(f.x_axis.ticks, f.x_labels, strict=True)):
        tx = f.px(v)
        if fig.x_kind != "category":
            grid.append(f'<line x1="{tx:.1f}" x2="{tx:.1f}" y1="{top:.1f}" y2="{base:.1f}"/>')
        if i % f.show_every:
            continue
        full = esc(f.x_axis.ticks[i][1])
        hint = f"<title>{full}</title>" if label != f.x_axis.ticks[i][1] else ""
        if f.rotate:
            labels.append(
                f'<text x="{tx:.1f}" y="{base + 12:.1f}" text-anchor="end" '
                f'transform="rotate(-45 {tx:.1f} {base + 12:.1f})">{hint}{esc(label)}</text>'
            )
        else:
            labels.append(
                f'<text x="{tx:.1f}" y="{base + 15:.1f}" text-anchor="middle">{hint}{esc(label)}</text>'
            )
    cx, cy = max(14.0, left - f.y_label_w - 18), top + f.plot_h / 2
    return [
        f'<g class="grid" stroke="#e3e6ea" stroke-width="1">{"".join(grid)}</g>',
        f'<path class="axis" d="M{left:.1f} {top:.1f}V{base:.1f}H{left + plot_w:.1f}" '
        'fill="none" stroke="#6b7280" stroke-width="1"/>',
        f'<g class="ticks" fill="#4b5563">{"".join(labels)}</g>',
        f'<text class="axis-label" x="{left + plot_w / 2:.1f}" y="{f.height - 6:.1f}" text-anchor="middle" '
        f'fill="#1f2937">{esc(x_label)}</text>',
        f'<text class="axis-label" x="{cx:.1f}" y="{cy:.1f}" text-anchor="middle" fill="#1f2937" '
        f'transform="rotate(-90 {cx:.1f} {cy:.1f})">{esc(fig.y_label)}</text>',
    ]


def _data_svg(
    fig: Figure, f: _Frame, series: list[_Prepared], bars: list[_Prepared], gap: float
) -> list[str]:
    """One ``<g class="series">`` per series: polylines, points or bars (grouped side by side)."""
    bar_w = (
        min(max(f.plot_w * gap / (f.x_axis.hi - f.x_axis.lo) * 0.8 / max(len(bars), 1), 1.0), 48.0)
        if bars
        else 0
    )
    y_base = f.py(max(f.y_axis.lo, min(0.0, f.y_axis.hi))) if not fig.log_y else f.base
    out: list[str] = []
    bar_index = 0
    for s in series:
        out.append(f'<g class="series" data-series="{esc(s.name)}">')
        if s.style == "line":
            out.extend(_line(s, f.px, f.py))
        elif s.style == "points":
            r = 2.8 if len(s.points) <= 2000 else 1.8
            out.extend(
                f'<circle class="mark point" cx="{f.px(x):.1f}" cy="{f.py(y):.1f}" r="{r}" fill="{s.color}" '
                'fill-opacity="0.75"/>'
                for x, y in s.points
                if y is not None
            )
        else:
            offset = (bar_index - (len(bars) - 1) / 2) * bar_w
            bar_index += 1
            out.extend(_bars(fig, f, s, offset, bar_w, y_base))
        out.append("</g>")
    return out


def _bars(fig: Figure, f: _Frame, s: _Prepared, offset: float, bar_w: float, y_base: float) -> list[str]:
    """The bars of ``s``, each titled with its x (category label or number) and its value."""
    out: list[str] = []
    for x, y in s.points:
        if y is None:
            continue
        cx, top_y = f.px(x) + offset, f.py(y)
        y0, y1 = sorted((top_y, y_base))
        name = f.x_axis.ticks[int(x)][1] if fig.x_kind == "category" else fmt_number(_unlog(x, fig.log_x))
        value = fmt_number(_unlog(y, fig.log_y))
        out.append(
            f'<rect class="mark bar" x="{cx - bar_w / 2:.1f}" y="{y0:.1f}" width="{bar_w:.1f}" '
            f'height="{y1 - y0:.1f}" fill="{s.color}"><title>{esc(name)}: {esc(value)}</title></rect>'
        )
    return out


def _dash(s: _Prepared) -> str:
    return f' stroke-dasharray="{s.dash}"' if s.dash else ""


def _unlog(v: float, log: bool) -> float:
    return 10.0**v if log else v


def _line(s: _Prepared, px: Callable[[float], float], py: Callable[[float], float]) -> list[str]:
    """Polylines of ``s``, broken where y is missing; a point alone becomes a dot."""
    out: list[str] = []
    run: list[tuple[float, float]] = []

    def flush() -> None:
        if len(run) == 1:
            x, y = run[0]
            out.append(f'<circle class="mark dot" cx="{x:.1f}" cy="{y:.1f}" r="2.2" fill="{s.color}"/>')
        elif run:
            pts = " ".join(f"{x:.1f},{y:.1f}" for x, y in run)
            out.append(
                f'<polyline class="mark line" points="{pts}" fill="none" stroke="{s.color}" '
                f'stroke-width="1.8" stroke-linejoin="round" stroke-linecap="round"{_dash(s)}/>'
            )
        run.clear()

    for x, y in s.points:
        if y is None:
            flush()
        else:
            run.append((px(x), py(y)))
    flush()
    return out


def _legend(items: list[_Prepared]) -> tuple[int, str]:
    """Legend laid out in rows across the top: (rows, svg)."""
    if not items:
        return 0, ""
    parts: list[str] = []
    x, row = 12.0, 0
    for s in items:
        name = shorten(s.name, 48)
        w = 18 + len(name) * CHAR_W + 16
        if x + w > WIDTH - 8 and x > 12:
            x, row = 12.0, row + 1
        y = 12 + row * 18
        if s.style == "line":
            swatch = (
                f'<line x1="{x:.1f}" x2="{x + 14:.1f}" y1="{y:.1f}" y2="{y:.1f}" '
                f'stroke="{s.color}" stroke-width="2.5"{_dash(s)}/>'
            )
        elif s.style == "points":
            swatch = f'<circle cx="{x + 7:.1f}" cy="{y:.1f}" r="3.5" fill="{s.color}"/>'
        else:
            swatch = f'<rect x="{x + 1:.1f}" y="{y - 5:.1f}" width="12" height="10" fill="{s.color}"/>'
        hint = f"<title>{esc(s.name)}</title>" if name != s.name else ""
        parts.append(
            f'{swatch}<text x="{x + 18:.1f}" y="{y + 4:.1f}" fill="#1f2937">{hint}{esc(name)}</text>'
        )
        x += w
    return row + 1, f'<g class="legend">{"".join(parts)}</g>'
