"""The offline HTML page of an experiment's result (``report.experiments.outcome``'s document).

Self-contained like ``society report``'s page (``report.render``: its CSS and Content-Security-Policy, no
script, no remote reference): the experiment's facts, the multiple-comparison correction, then per metric a
table (arm, seeds, mean [95% CI], difference from control [95% CI], family-wise interval, Hedges' g,
significant) and, for streaming metrics, a chart over the windows since the fork with one band (95% CI)
and one line (mean) per arm. Every string from the data (experiment, arm, society names) is escaped.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from typing import Any

from molt_society.report.model import Figure, Series
from molt_society.report.render import CSP, CSS
from molt_society.report.svg import Band, esc, figure_svg, fmt_number

EXTRA_CSS = """
table.effects td.sig { color: #065f46; font-weight: 600; }
table.effects td.ctl { color: #6b7280; }
table.effects td { white-space: nowrap; }
table.effects small.ci { display: block; color: #4b5563; }
"""


def _num(v: Any) -> str:
    """A number for the page ("inf"/"-inf" strings as infinity signs, None as a dash)."""
    if v == "inf":
        return "∞"
    if v == "-inf":
        return "-∞"
    if isinstance(v, bool) or not isinstance(v, int | float) or not math.isfinite(v):
        return "—"
    return fmt_number(v)


def _interval(value: Any, low: Any, high: Any) -> str:
    """``value`` with its interval below it (either may be absent)."""
    ci = f'<small class="ci">[{esc(_num(low))}, {esc(_num(high))}]</small>' if low is not None else ""
    shown = esc(_num(value)) if value is not None or not ci else ""
    return shown + ci


def _anchor(key: str, used: set[str]) -> str:
    base = "m-" + (re.sub(r"[^A-Za-z0-9_-]+", "-", key).strip("-") or "metric")
    anchor, n = base, 2
    while anchor in used:
        anchor, n = f"{base}-{n}", n + 1
    used.add(anchor)
    return anchor


def _facts(doc: Mapping[str, Any]) -> str:
    base = doc.get("base", {})
    rows = [
        ("base society", base.get("society")),
        ("fork tick", base.get("fork_tick")),
        ("fork at (UTC)", base.get("fork_at")),
        ("ticks after the fork", base.get("ticks")),
        ("spec sha256", base.get("spec_sha256")),
        ("control arm", doc.get("control")),
    ]
    body = "".join(f"<tr><th>{esc(k)}</th><td>{esc(_text(v))}</td></tr>" for k, v in rows)
    arms = "".join(
        f"<tr><td>{esc(a['arm'])}{' (control)' if a['control'] else ''}</td>"
        f"<td>{esc(', '.join(str(s) for s in a['seeds']))}</td>"
        f"<td>{esc(', '.join(a['societies']))}</td></tr>"
        for a in doc.get("arms", [])
    )
    return (
        f'<table class="facts"><tbody>{body}</tbody></table>'
        '<h3>Arms</h3><div class="scroll"><table class="data"><thead><tr><th>arm</th><th>seeds</th>'
        f"<th>societies</th></tr></thead><tbody>{arms}</tbody></table></div>"
    )


def _text(v: Any) -> str:
    if isinstance(v, list):
        return ", ".join(str(x) for x in v)
    return "—" if v is None else str(v)


def _correction(doc: Mapping[str, Any]) -> str:
    c = doc.get("correction", {})
    fw = c.get("familywise_confidence")
    fw_text = f"{fw:.6g}" if isinstance(fw, float) else "—"
    return (
        '<section class="diag" id="correction"><h2>Multiple comparisons</h2><p class="desc">'
        f"{esc(c.get('metrics'))} metrics x {esc(c.get('treated_arms'))} treated arms: m = {esc(c.get('m'))} "
        "comparisons with the control. Every difference has its 95% CI and a family-wise interval "
        f"(Bonferroni: the same bootstrap at confidence 1 - 0.05/m = {esc(fw_text)}). "
        "<strong>significant</strong> means the family-wise interval excludes 0; the column "
        "<em>unadjusted</em> says whether the 95% CI does.\n"
        f"{esc(c.get('note', ''))}</p>"
        f'<p class="desc">Design: {esc(doc.get("bootstrap", {}).get("design", "—"))}.</p></section>'
    )


def _effects_table(entry: Mapping[str, Any]) -> str:
    effects = {e["arm"]: e for e in entry.get("effects", [])}
    rows: list[str] = []
    for a in entry.get("arms", []):
        e = effects.get(a["arm"])
        cells = [
            f"<td>{esc(a['arm'])}</td>",
            f'<td class="num">{esc(a["n"])}</td>',
            f'<td class="num">{_interval(a["mean"], a["ci_low"], a["ci_high"])}</td>',
        ]
        if e is None:
            cells.append('<td class="ctl" colspan="5">control</td>')
        else:
            sig = "yes" if e["significant"] else "no"
            cells += [
                f'<td class="num">{_interval(e["difference"], e["ci_low"], e["ci_high"])}</td>',
                f'<td class="num">{_interval(None, e["familywise_ci_low"], e["familywise_ci_high"])}</td>',
                f'<td class="num">{esc(_num(e["hedges_g"]))}</td>',
                f'<td class="{"sig" if e["significant"] else ""}">{sig}</td>',
                f"<td>{'yes' if e['significant_unadjusted'] else 'no'}</td>",
            ]
        rows.append("<tr>" + "".join(cells) + "</tr>")
    head = (
        "<th>arm</th><th>seeds</th><th>mean [95% CI]</th><th>difference vs control [95% CI]</th>"
        "<th>family-wise CI</th><th>Hedges' g</th><th>significant</th><th>unadjusted</th>"
    )
    return (
        f'<div class="scroll"><table class="data effects"><thead><tr>{head}</tr></thead>'
        f"<tbody>{''.join(rows)}</tbody></table></div>"
    )


def _hours(offsets: Sequence[float]) -> tuple[list[float], str]:
    """The offsets in hours (minutes when they span under 2 hours) and the axis label."""
    span = max(offsets) - min(offsets) if offsets else 0.0
    if span < 7200:
        return [o / 60 for o in offsets], "time since the fork (min, window start)"
    return [o / 3600 for o in offsets], "time since the fork (h, window start)"


def _chart(entry: Mapping[str, Any]) -> str:
    series = entry.get("series")
    if not series:
        return ""
    xs, label = _hours(series.get("offsets_s", []))
    lines: list[Series] = []
    bands: dict[str, Band] = {}
    for arm, band in series.get("bands", {}).items():
        mean = [v if isinstance(v, int | float) else None for v in band["mean"]]
        lines.append(Series(name=str(arm), x=list(xs), y=mean, style="line"))
        low = [v if isinstance(v, int | float) else None for v in band["ci_low"]]
        high = [v if isinstance(v, int | float) else None for v in band["ci_high"]]
        bands[str(arm)] = (xs, low, high)
    key = str(entry["key"])
    fig = Figure(key=key, title=key, x_label=label, y_label=key, series=lines)
    svg = figure_svg(fig, bands)
    if svg is None:
        return f'<p class="nodata">{esc("no value in any window since the fork")}</p>'
    return (
        f'<figure class="fig" data-key="{esc(key)}"><figcaption>{esc(key)} per window since the fork: '
        f"mean across seeds (line) and its 95% CI (band) per arm</figcaption>{svg}</figure>"
    )


def _metric(entry: Mapping[str, Any], anchor: str) -> str:
    out = [
        f'<section class="diag" id="{anchor}" data-key="{esc(entry["key"])}">',
        f"<h2>{esc(entry['key'])}</h2>",
    ]
    out.append(f'<p class="meta">{esc(entry.get("source", ""))}</p>')
    if entry.get("definition"):
        out.append(f'<p class="desc">{esc(entry["definition"])}</p>')
    out.append(_effects_table(entry))
    out.append(_chart(entry))
    out.append("</section>")
    return "\n".join(out)


def render_result_html(doc: Mapping[str, Any]) -> str:
    """The complete HTML document of an experiment's result."""
    name = str(doc.get("experiment", ""))
    used = {"correction", "toc"}
    metrics = list(doc.get("metrics", []))
    anchors = [_anchor(str(m["key"]), used) for m in metrics]
    toc = "".join(
        f'<li><a href="#{a}">{esc(m["key"])}</a>{" ★" if any(e["significant"] for e in m["effects"]) else ""}'
        "</li>"
        for m, a in zip(metrics, anchors, strict=True)
    )
    body = [
        '<main><header class="report">',
        f"<h1>Experiment: {esc(name)}</h1>",
        _facts(doc),
        "</header>",
        _correction(doc),
        f'<nav class="toc" id="toc"><h2>Metrics</h2><p class="note">★: a significant difference (family-wise)'
        f"</p><ol>{toc}</ol></nav>",
        *(_metric(m, a) for m, a in zip(metrics, anchors, strict=True)),
        "<footer>Generated offline by the experiment result (report.experiments.outcome). "
        "Every value is also in result.json.</footer></main>",
    ]
    return "".join(
        [
            "<!DOCTYPE html>\n",
            '<html lang="en"><head><meta charset="utf-8">',
            f'<meta http-equiv="Content-Security-Policy" content="{esc(CSP)}">',
            '<meta name="viewport" content="width=device-width, initial-scale=1">',
            '<meta name="referrer" content="no-referrer">',
            f"<title>{esc('Experiment: ' + name)}</title>",
            f"<style>{CSS}{EXTRA_CSS}</style></head>\n<body>",
            "\n".join(body),
            "</body></html>\n",
        ]
    )
