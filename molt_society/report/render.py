"""The offline HTML page of one report, or of two side by side (``society report A --vs B``).

One self-contained HTML5 document: inline CSS, inline SVG charts (``report.svg``), no script, no remote
reference, and a Content-Security-Policy that forbids both. Every string from the data is escaped.
Sections are matched across reports by ``Section.key`` and items within a section by their ``key``.
"""

from __future__ import annotations

import json
import math
import re
from typing import Any

from molt_society.report.model import Cell, Figure, Item, Report, Scalar, Section, Series, Table
from molt_society.report.svg import esc, figure_svg, fmt_number

MAX_ROWS = 200
CSP = "default-src 'none'; style-src 'unsafe-inline'; img-src data:"

CSS = """
:root { color-scheme: light; }
* { box-sizing: border-box; }
body { margin: 0; background: #f6f7f9; color: #1f2328; line-height: 1.45; font-size: 15px;
  font-family: system-ui, -apple-system, "Segoe UI", Roboto, "Helvetica Neue", Arial, "Noto Sans",
  "Liberation Sans", sans-serif; }
main { max-width: 1080px; margin: 0 auto; padding: 28px 28px 72px; }
h1 { font-size: 1.7rem; margin: 0 0 .4rem; }
h1 .vs { color: #6b7280; font-weight: 400; }
h2 { font-size: 1.3rem; margin: 0 0 .3rem; }
h3 { font-size: 1.02rem; margin: 1.4rem 0 .5rem; }
h4 { font-size: .92rem; margin: .9rem 0 .35rem; color: #374151; }
header.report { margin-bottom: 1.2rem; }
.facts { border-collapse: collapse; font-size: .9rem; }
.facts th, .facts td { padding: .15rem 1rem .15rem 0; text-align: left; }
.facts th { color: #6b7280; font-weight: 500; }
nav.toc, section.diag, details.settings { background: #fff; border: 1px solid #e1e4e8; border-radius: 8px;
  padding: 18px 22px; margin: 0 0 18px; }
nav.toc h2 { font-size: 1rem; }
nav.toc ol { margin: .3rem 0 0; padding-left: 1.4rem; columns: 2; column-gap: 2.5rem; }
nav.toc li { break-inside: avoid; }
a { color: #0b62a4; text-decoration: none; }
a:hover { text-decoration: underline; }
.desc { margin: .2rem 0 .4rem; color: #374151; white-space: pre-line; }
.meta, .note, small, .muted { color: #6b7280; font-size: .82rem; }
.meta { margin: 0 0 .6rem; }
.notice { border-radius: 6px; padding: .55rem .8rem; margin: .6rem 0; font-size: .9rem;
  white-space: pre-line; }
.notice.error { background: #fdecea; border: 1px solid #f5c2bc; color: #8a1c12; }
.notice.info { background: #f3f4f6; border: 1px solid #e5e7eb; color: #4b5563; }
.notice.caveat { background: #fff8e6; border: 1px solid #f3d48a; color: #7a4b00; }
.failed { color: #b42318; font-size: .8rem; }
.scroll { overflow-x: auto; }
table.scalars, table.data, table.settings { border-collapse: collapse; font-size: .88rem; margin: .3rem 0; }
table.scalars { width: 100%; }
table.scalars th, table.scalars td, table.data th, table.data td, table.settings th, table.settings td {
  border-bottom: 1px solid #eaecef; padding: .32rem .7rem; vertical-align: top; text-align: left; }
table.scalars thead th, table.data thead th, table.settings thead th { background: #f3f4f6;
  border-bottom: 1px solid #d0d7de; font-weight: 600; }
table.scalars tbody th { font-weight: 500; min-width: 15rem; }
table.scalars thead th { white-space: nowrap; }
table.data td.num { text-align: right; font-variant-numeric: tabular-nums; white-space: nowrap; }
table.scalars td { text-align: right; font-variant-numeric: tabular-nums; }
table.scalars th:not(:first-child) { text-align: right; }
table.scalars .unit { color: #6b7280; margin-left: .25em; }
.nc { color: #9a3412; font-style: italic; }
small.reason, small.source { display: block; font-size: .76rem; color: #6b7280; text-align: right;
  white-space: normal; max-width: 22rem; margin-left: auto; }
table.data td { max-width: 28rem; overflow-wrap: anywhere; }
table.data td.null { color: #9ca3af; }
table.settings td { font-family: ui-monospace, SFMono-Regular, Menlo, Consolas, monospace; font-size: .8rem;
  overflow-wrap: anywhere; }
figure.fig { margin: 1rem 0 0; }
figure.fig figcaption { font-weight: 600; font-size: 1.02rem; margin: 0 0 .3rem; }
svg.figure { display: block; width: 100%; max-width: 880px; height: auto; background: #fff; }
svg.figure text { font-family: inherit; }
.nodata { color: #6b7280; font-style: italic; border: 1px dashed #d0d7de; border-radius: 6px;
  padding: 1.2rem; max-width: 880px; text-align: center; }
details.settings summary { cursor: default; font-weight: 600; }
footer { color: #6b7280; font-size: .8rem; text-align: center; }
"""


def render_html(reports: list[Report], published_label: str = "MoltBook (published)") -> str:
    """The complete HTML document for one report, or a comparison of several (``A --vs B``)."""
    if not reports:
        raise ValueError("render_html needs at least one report")
    names = _column_names(reports)
    title = "Society report: " + " vs ".join(r.society for r in reports)
    section_keys = _ordered_keys([[s.key for s in r.sections] for r in reports])
    anchors = _anchors(section_keys)
    sections = [[_find_section(r, key) for r in reports] for key in section_keys]

    body: list[str] = [
        '<main><header class="report">',
        _heading(reports),
        _facts(reports, names),
        "</header>",
    ]
    body.append(_toc(section_keys, sections, anchors, names))
    for key, per in zip(section_keys, sections, strict=True):
        body.append(_section(anchors[key], per, names, published_label))
    body.append(_settings(reports, names))
    body.append(
        "<footer>Generated offline by <code>society report</code>. Every value is also in the JSON.</footer>"
    )
    body.append("</main>")
    return "".join(
        [
            "<!DOCTYPE html>\n",
            '<html lang="en"><head><meta charset="utf-8">',
            f'<meta http-equiv="Content-Security-Policy" content="{esc(CSP)}">',
            '<meta name="viewport" content="width=device-width, initial-scale=1">',
            '<meta name="referrer" content="no-referrer">',
            f"<title>{esc(title)}</title>",
            f"<style>{CSS}</style></head>\n<body>",
            "\n".join(body),
            "</body></html>\n",
        ]
    )


# ---- document parts -------------------------------------------------------------------------------------


def _column_names(reports: list[Report]) -> list[str]:
    """Society names as column headers, made distinct when two reports share a name."""
    out: list[str] = []
    for i, r in enumerate(reports):
        name = str(r.society)
        out.append(name if name not in out else f"{name} (#{i + 1})")
    return out


def _heading(reports: list[Report]) -> str:
    vs = '<span class="vs"> vs </span>'
    return "<h1>Society report: " + vs.join(esc(r.society) for r in reports) + "</h1>"


def _facts(reports: list[Report], names: list[str]) -> str:
    rows = "".join(
        f"<tr><td>{esc(name)}</td><td>{esc(r.generated_at)}</td><td>{_events(r.events)}</td></tr>"
        for name, r in zip(names, reports, strict=True)
    )
    return (
        '<table class="facts"><thead><tr><th>society</th><th>generated at</th><th>events</th></tr></thead>'
        f"<tbody>{rows}</tbody></table>"
    )


def _events(n: object) -> str:
    return esc(fmt_number(n)) if isinstance(n, int | float) else esc(n)


def _toc(
    keys: list[str], sections: list[list[Section | None]], anchors: dict[str, str], names: list[str]
) -> str:
    items: list[str] = []
    for key, per in zip(keys, sections, strict=True):
        first = next(s for s in per if s is not None)
        failed = [name for name, s in zip(names, per, strict=True) if s is not None and s.error]
        mark = ""
        if failed:
            who = f" ({', '.join(failed)})" if len(names) > 1 else ""
            mark = f' <span class="failed">failed{esc(who)}</span>'
        items.append(f'<li><a href="#{anchors[key]}">{esc(first.title)}</a>{mark}</li>')
    return f'<nav class="toc" id="report-toc"><h2>Contents</h2><ol>{"".join(items)}</ol></nav>'


def _section(anchor: str, per: list[Section | None], names: list[str], published_label: str) -> str:
    first = next(s for s in per if s is not None)
    multi = len(names) > 1
    out = [f'<section class="diag" id="{anchor}">', f"<h2>{esc(first.title)}</h2>"]
    if first.description:
        out.append(f'<p class="desc">{esc(first.description)}</p>')
    times = [
        f"{name}: {_seconds(s.seconds)}" if multi else _seconds(s.seconds)
        for name, s in zip(names, per, strict=True)
        if s is not None
    ]
    out.append(f'<p class="meta">computed in {esc(" · ".join(times))}</p>')
    for name, s in zip(names, per, strict=True):
        if s is None:
            out.append(f'<p class="notice info">Not in the report of {esc(name)}.</p>')
        elif s.error:
            who = f"{name}: " if multi else ""
            out.append(
                f'<p class="notice error"><strong>{esc(who)}this section failed.</strong> {esc(s.error)}</p>'
            )
    for name, s in zip(names, per, strict=True):
        if s is not None and s.note:
            who = f"<strong>{esc(name)}:</strong> " if multi else ""
            out.append(f'<p class="notice caveat" data-note="{esc(s.key)}">{who}{esc(s.note)}</p>')

    item_keys = _ordered_keys([[i.key for i in s.items] if s else [] for s in per])
    scalars_done = False
    for key in item_keys:
        items = [_find_item(s, key) for s in per]
        kind = next(i for i in items if i is not None).kind
        if kind == "scalar":
            if not scalars_done:
                out.append(_scalars(per, item_keys, names, published_label))
                scalars_done = True
        elif kind == "table":
            out.append(_tables([i if isinstance(i, Table) else None for i in items], names))
        else:
            out.append(_figure([i if isinstance(i, Figure) else None for i in items], names))
    out.append("</section>")
    return "\n".join(out)


def _seconds(s: object) -> str:
    if not isinstance(s, int | float) or not math.isfinite(s):
        return "—"
    if s >= 60:
        return f"{int(s // 60)} min {s % 60:.0f} s"
    return f"{s:.2f} s" if s < 10 else f"{s:.1f} s"


def _scalars(per: list[Section | None], item_keys: list[str], names: list[str], published_label: str) -> str:
    """All scalars of a section in one table: quantity, one column per society, the published value."""
    head = "".join(f"<th>{esc(n)}</th>" for n in names)
    rows: list[str] = []
    for key in item_keys:
        found = [_find_item(s, key) for s in per]
        scalars = [i if isinstance(i, Scalar) else None for i in found]
        first = next((s for s in scalars if s is not None), None)
        if first is None:
            continue
        unit = f'<span class="unit">({esc(first.unit)})</span>' if first.unit else ""
        cells = [f'<th scope="row">{esc(first.label)}{unit}</th>']
        cells.extend(_scalar_cell(s) for s in scalars)
        cells.append(_published_cell(scalars))
        rows.append(f'<tr data-key="{esc(key)}">{"".join(cells)}</tr>')
    return (
        f'<div class="scroll"><table class="scalars"><thead><tr><th>quantity</th>{head}'
        f"<th>{esc(published_label)}</th></tr></thead><tbody>{''.join(rows)}</tbody></table></div>"
    )


def _scalar_cell(s: Scalar | None) -> str:
    if s is None:
        return '<td><span class="muted">—</span><small class="reason">not in this report</small></td>'
    reason = f'<small class="reason">{esc(s.reason)}</small>' if s.reason else ""
    if not _is_number(s.value):
        return f'<td class="missing"><span class="nc">not computed</span>{reason}</td>'
    assert s.value is not None
    return f"<td>{esc(fmt_number(s.value))}{reason}</td>"


def _published_cell(scalars: list[Scalar | None]) -> str:
    for s in scalars:
        if s is not None and _is_number(s.published):
            assert s.published is not None
            source = f'<small class="source">{esc(s.published_source)}</small>' if s.published_source else ""
            return f"<td>{esc(fmt_number(s.published))}{source}</td>"
    return '<td><span class="muted">—</span></td>'


def _is_number(v: object) -> bool:
    return isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v)


def _tables(tables: list[Table | None], names: list[str]) -> str:
    """One table, or each society's table one after another, labeled with the society name."""
    first = next(t for t in tables if t is not None)
    multi = len(names) > 1
    out = [f'<div class="table-item" data-key="{esc(first.key)}">', f"<h3>{esc(first.title)}</h3>"]
    for name, t in zip(names, tables, strict=True):
        if multi:
            out.append(f"<h4>{esc(name)}</h4>")
        if t is None:
            out.append('<p class="note">Not in this report.</p>')
            continue
        if t.rows:
            out.append(_data_table(t))
            if t.reason:
                out.append(f'<p class="note">{esc(t.reason)}</p>')
        else:
            out.append(f'<p class="nodata">{esc(t.reason or "no rows")}</p>')
    out.append("</div>")
    return "\n".join(out)


def _data_table(t: Table) -> str:
    head = "".join(f"<th>{esc(c)}</th>" for c in t.columns)
    body = "".join("<tr>" + "".join(_cell(c) for c in row) + "</tr>" for row in t.rows[:MAX_ROWS])
    note = ""
    if len(t.rows) > MAX_ROWS:
        note = f'<p class="note">first {MAX_ROWS} of {len(t.rows):,} rows (all in the JSON)</p>'
    return (
        f'<div class="scroll"><table class="data"><thead><tr>{head}</tr></thead><tbody>{body}</tbody>'
        f"</table></div>{note}"
    )


def _cell(c: Cell) -> str:
    if c is None:
        return '<td class="null">—</td>'
    if isinstance(c, int | float) and not isinstance(c, bool):
        return f'<td class="num">{esc(fmt_number(c))}</td>'
    return f"<td>{esc(c)}</td>"


def _figure(figures: list[Figure | None], names: list[str]) -> str:
    """One chart; in a comparison every society's series in the same chart, prefixed with its name."""
    first = next(f for f in figures if f is not None)
    merged = _merge_figures(figures, names)
    svg = figure_svg(merged)
    out = [
        f'<figure class="fig" data-key="{esc(first.key)}">',
        f"<figcaption>{esc(first.title)}</figcaption>",
    ]
    multi = len(names) > 1
    reasons = [
        (f"{name}: " if multi else "") + (f.reason if f is not None and f.reason else "not in this report")
        for name, f in zip(names, figures, strict=True)
        if f is None or f.reason
    ]
    if svg is None:
        text = "\n".join(reasons) if reasons else "no data"
        if (first.log_x or first.log_y) and not reasons:
            text = "no data (a log axis shows positive values only)"
        out.append(f'<p class="nodata" data-key="{esc(first.key)}">{esc(text)}</p>')
    else:
        out.append(svg)
        if reasons:
            out.append(f'<p class="note">{esc(" · ".join(reasons))}</p>')
    out.append("</figure>")
    return "\n".join(out)


def _merge_figures(figures: list[Figure | None], names: list[str]) -> Figure:
    """The first figure's axes with the series of all; category indexes remapped onto the union of labels."""
    first = next(f for f in figures if f is not None)
    multi = len(names) > 1
    categories: list[str] = []
    if first.x_kind == "category":
        categories = _ordered_keys([[str(c) for c in f.categories] if f else [] for f in figures])
    index = {c: i for i, c in enumerate(categories)}
    series: list[Series] = []
    for name, f in zip(names, figures, strict=True):
        if f is None:
            continue
        for s in f.series:
            label = f"{name}: {s.name}" if multi else str(s.name)
            x, y = list(s.x), list(s.y)
            if first.x_kind == "category" and f.categories:
                x, y = _remap(x, y, [str(c) for c in f.categories], index)
            series.append(Series(name=label, x=x, y=y, style=s.style))
    return Figure(
        key=first.key,
        title=first.title,
        x_label=first.x_label,
        y_label=first.y_label,
        series=series,
        reason=first.reason,
        log_x=first.log_x,
        log_y=first.log_y,
        x_kind=first.x_kind,
        categories=categories,
    )


def _remap(
    x: list[float], y: list[float | None], own: list[str], index: dict[str, int]
) -> tuple[list[float], list[float | None]]:
    """Category indexes into ``own`` labels as indexes into the merged labels; others dropped."""
    xs: list[float] = []
    ys: list[float | None] = []
    for xi, yi in zip(x, y, strict=False):
        if _is_number(xi) and xi == int(xi) and 0 <= xi < len(own):
            xs.append(float(index[own[int(xi)]]))
            ys.append(yi)
    return xs, ys


def _settings(reports: list[Report], names: list[str]) -> str:
    keys = _ordered_keys([[str(k) for k in r.settings] for r in reports])
    if not keys:
        return ""
    head = "".join(f"<th>{esc(n)}</th>" for n in names)
    rows = "".join(
        f"<tr><th>{esc(k)}</th>"
        + "".join(f"<td>{esc(_setting(r.settings, k))}</td>" for r in reports)
        + "</tr>"
        for k in keys
    )
    return (
        '<details class="settings" id="report-settings"><summary>Settings</summary><div class="scroll">'
        f'<table class="settings"><thead><tr><th>setting</th>{head}</tr></thead><tbody>{rows}</tbody>'
        "</table></div></details>"
    )


def _setting(settings: dict[str, Any], key: str) -> str:
    if key not in settings:
        return "—"
    v = settings[key]
    return v if isinstance(v, str) else json.dumps(v, default=str, sort_keys=True)


# ---- matching -------------------------------------------------------------------------------------------


def _ordered_keys(lists: list[list[str]]) -> list[str]:
    """Union of keys, in the order of the first list, then the new ones of the next, and so on."""
    seen: dict[str, None] = {}
    for keys in lists:
        for k in keys:
            seen.setdefault(k, None)
    return list(seen)


def _anchors(keys: list[str]) -> dict[str, str]:
    """An HTML id per section key: the key when it is made of [A-Za-z0-9_-], else a cleaned, unique one."""
    out: dict[str, str] = {}
    used = {"report-toc", "report-settings"}
    for k in keys:
        base = re.sub(r"[^A-Za-z0-9_-]+", "-", k).strip("-") or "section"
        anchor, n = base, 2
        while anchor in used:
            anchor, n = f"{base}-{n}", n + 1
        used.add(anchor)
        out[k] = anchor
    return out


def _find_section(r: Report, key: str) -> Section | None:
    return next((s for s in r.sections if s.key == key), None)


def _find_item(s: Section | None, key: str) -> Item | None:
    return next((i for i in s.items if i.key == key), None) if s is not None else None
