"""The Grafana dashboard equivalent to the web dashboard, generated from the same panel SQL.

``python -m molt_society.dashboard.grafana`` writes ``docker/grafana/dashboards/society.json`` (``--check``
verifies the
committed file is current; a unit test does the same). The docker compose stack provisions it together
with the ClickHouse data source (``docker/grafana/provisioning``). The society is a dashboard variable:
each query's ``{society}`` becomes ``'${society}'``.

Grafana draws what Grafana can: time series for per-window and per-second series (long-format rows turned
into one series per label with the ``prepareTimeSeries`` transformation), a bar chart for the depth
distribution, an XY chart with log-log axes for the cascade CCDF, and tables for the rest. Consumer lag
and the sink's insert latency come from Kafka and the sink, not ClickHouse, and have no Grafana panel.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from molt_society.dashboard.panels import PANELS, Query

DATASOURCE = {"type": "grafana-clickhouse-datasource", "uid": "society-clickhouse"}
OUT = Path(__file__).resolve().parents[2] / "docker" / "grafana" / "dashboards" / "society.json"

LAYOUT_TABLE = """
activity   totals        table       24  4  Totals
activity   rate          timeseries  12  8  Events stored per second by type
activity   windows       timeseries  12  8  Active and new agents per window
threads    depth         barchart    12  8  Reply-depth distribution (newest window)
threads    series        timeseries  12  8  Share with no comment, mean depth
cascades   ccdf          xychart     12  9  Cascade-size CCDF (log-log)
cascades   fit           table       12  9  Power-law fit of cascade sizes
influence  series        timeseries  12  8  PageRank top-k share and top-k churn
influence  leaders       table       12  8  PageRank leaders (newest window)
content    hot           table       24 10  Hot posts (thread: their first 25 comments)
health     dead_letters  table        8  6  Dead letters by code
health     dead_recent   table       10  6  Newest dead letters
health     freshness     table        6  6  Sink freshness
"""
"""The Grafana panels in order, one a line: panel id, query name, Grafana panel type, width, height, title
(the rest of the line). Panels fill rows of 24 columns from the left."""


def _layout(table: str) -> list[tuple[str, str, str, str, int, int]]:
    """``LAYOUT_TABLE`` as (panel id, query name, Grafana panel type, title, width, height)."""
    rows = []
    for line in table.strip().splitlines():
        panel_id, query_name, kind, width, height, title = line.split(maxsplit=5)
        rows.append((panel_id, query_name, kind, title, int(width), int(height)))
    return rows


LAYOUT = _layout(LAYOUT_TABLE)


def grafana_sql(q: Query) -> str:
    return q.sql.replace("{society}", "'${society}'").strip()


def _panel(
    pid: int, kind: str, title: str, description: str, sql: str, grid: dict[str, int]
) -> dict[str, Any]:
    panel: dict[str, Any] = {
        "id": pid,
        "type": kind,
        "title": title,
        "description": description,
        "datasource": DATASOURCE,
        "gridPos": grid,
        "targets": [
            {
                "refId": "A",
                "datasource": DATASOURCE,
                "editorType": "sql",
                "queryType": "table",
                "format": 1,
                "rawSql": sql,
            }
        ],
        "fieldConfig": {"defaults": {}, "overrides": []},
        "options": {},
    }
    if kind == "timeseries":
        panel["transformations"] = [{"id": "prepareTimeSeries", "options": {"format": "multi"}}]
    elif kind == "barchart":
        panel["options"] = {"xField": "depth", "showValue": "auto", "legend": {"showLegend": False}}
    elif kind == "xychart":
        log_axis = {"scaleDistribution": {"type": "log", "log": 10}}
        panel["options"] = {
            "seriesMapping": "manual",
            "series": [{"x": {"matcher": {"id": "byName", "options": "size"}},
                        "y": {"matcher": {"id": "byName", "options": "ccdf"}}}],
        }  # fmt: skip
        panel["fieldConfig"] = {"defaults": {"custom": {"show": "points", **log_axis}}, "overrides": []}
    elif kind == "table":
        panel["options"] = {"showHeader": True, "cellHeight": "sm"}
    return panel


def build() -> dict[str, Any]:
    by_id = {p.id: p for p in PANELS}
    panels: list[dict[str, Any]] = []
    x = y = row_h = 0
    for i, (panel_id, query_name, kind, title, w, h) in enumerate(LAYOUT, start=1):
        if x + w > 24:
            x, y, row_h = 0, y + row_h, 0
        p = by_id[panel_id]
        grid = {"x": x, "y": y, "w": w, "h": h}
        panels.append(_panel(i, kind, title, p.description, grafana_sql(p.query(query_name)), grid))
        x += w
        row_h = max(row_h, h)
    return {
        "uid": "molt-society",
        "title": "molt-society",
        "description": "Generated by `python -m molt_society.dashboard.grafana` from dashboard/panels.py: "
        "the same SQL as the web dashboard (`society dashboard`).",
        "tags": ["molt-society"],
        "timezone": "utc",
        "schemaVersion": 39,
        "version": 1,
        "editable": True,
        "refresh": "5s",
        "time": {"from": "now-15m", "to": "now"},
        "templating": {
            "list": [
                {
                    "name": "society",
                    "label": "society",
                    "type": "query",
                    "datasource": DATASOURCE,
                    "query": "SELECT DISTINCT society FROM events ORDER BY society",
                    "refresh": 2,
                    "current": {},
                    "includeAll": False,
                    "multi": False,
                }
            ]
        },
        "panels": panels,
    }


def render() -> str:
    return json.dumps(build(), indent=2, ensure_ascii=False) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m molt_society.dashboard.grafana", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("--out", type=Path, default=OUT)
    parser.add_argument("--check", action="store_true", help="exit 1 if --out is not what would be written")
    args = parser.parse_args(argv)
    text = render()
    if args.check:
        current = args.out.read_text(encoding="utf-8") if args.out.exists() else ""
        if current != text:
            print(f"{args.out} is out of date: run python -m molt_society.dashboard.grafana", file=sys.stderr)
            return 1
        return 0
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(text, encoding="utf-8")
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
