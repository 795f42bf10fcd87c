"""Write a report (or two side by side) as an offline HTML page and a JSON document of every number."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import orjson

from report.model import Report
from report.published import PUBLISHED


def _finite(value: Any) -> Any:
    """The JSON-safe copy of ``value``: NaN and infinities become null (the report explains them)."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_finite(v) for v in value]
    return value


def report_json(reports: list[Report]) -> bytes:
    doc = {
        "reports": [r.to_json() for r in reports],
        "published": {k: {"value": v, "source": src} for k, (v, src) in sorted(PUBLISHED.items())},
    }
    return orjson.dumps(_finite(doc), option=orjson.OPT_INDENT_2 | orjson.OPT_SERIALIZE_NUMPY)


def write_report(reports: list[Report], html_path: Path) -> tuple[Path, Path]:
    """Write ``html_path`` and the JSON beside it (same name, ``.json``); return both paths."""
    from report.render import render_html

    html_path.parent.mkdir(parents=True, exist_ok=True)
    json_path = html_path.with_suffix(".json")
    html_path.write_text(render_html(reports), encoding="utf-8")
    json_path.write_bytes(report_json(reports))
    return html_path, json_path
