"""Write a report (or two side by side) as an offline HTML page and a JSON document of every number."""

from __future__ import annotations

from pathlib import Path

import orjson

from molt_society.report.model import Report
from molt_society.report.published import PUBLISHED


def report_json(reports: list[Report]) -> bytes:
    doc = {
        "reports": [r.to_json() for r in reports],
        "published": {k: {"value": v, "source": src} for k, (v, src) in sorted(PUBLISHED.items())},
    }
    # orjson writes NaN and infinities as null: the JSON stays strict (the report explains the gaps)
    return orjson.dumps(doc, option=orjson.OPT_INDENT_2 | orjson.OPT_SERIALIZE_NUMPY)


def write_report(reports: list[Report], html_path: Path) -> tuple[Path, Path]:
    """Write ``html_path`` and the JSON beside it (same name, ``.json``); return both paths."""
    from molt_society.report.render import render_html

    html_path.parent.mkdir(parents=True, exist_ok=True)
    json_path = html_path.with_suffix(".json")
    html_path.write_text(render_html(reports), encoding="utf-8")
    json_path.write_bytes(report_json(reports))
    return html_path, json_path
