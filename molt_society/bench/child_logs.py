"""Reading the structured (JSON line) logs of the processes a benchmark started: when something happened.

The children log through ``runtime.logs`` with ``SOCIETY_LOG_JSON=true``: one JSON object a line, with
``event`` and an ISO ``timestamp`` (the supervisor's journal also has ``ts``, epoch seconds).
"""

from __future__ import annotations

import contextlib
import json
from datetime import datetime
from pathlib import Path
from typing import Any

import orjson


def parse_ts(value: str) -> float:
    """Epoch seconds of an ISO timestamp (``Z`` accepted)."""
    return datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()


def json_records(path: Path) -> list[dict[str, Any]]:
    """Every JSON log record (a dict with an ``event``) of a log; other lines are skipped."""
    out: list[dict[str, Any]] = []
    with contextlib.suppress(OSError):
        for line in path.read_text(errors="replace").splitlines():
            if line.startswith("{"):
                with contextlib.suppress(ValueError):
                    doc = json.loads(line)
                    if isinstance(doc, dict) and "event" in doc:
                        out.append(doc)
    return out


def record_time(doc: dict[str, Any]) -> float:
    """Epoch seconds of a log record: its ``ts`` if it has one, else its ``timestamp``."""
    return float(doc["ts"]) if "ts" in doc else parse_ts(str(doc["timestamp"]))


def log_times(path: Path, event: str) -> list[float]:
    """Timestamps of the JSON log lines of ``event`` in a child's log."""
    needle = f'"event": "{event}"'
    out: list[float] = []
    if not path.exists():
        return out
    for line in path.read_text(errors="replace").splitlines():
        if needle in line:
            with contextlib.suppress(orjson.JSONDecodeError, KeyError, ValueError):
                out.append(parse_ts(orjson.loads(line)["timestamp"]))
    return out


def sink_flushes(path: Path) -> list[tuple[float, float, int]]:
    """``(timestamp, latency_s, rows)`` of every events-table ``sink.flushed`` line of a sink log."""
    out: list[tuple[float, float, int]] = []
    if not path.exists():
        return out
    for line in path.read_text(errors="replace").splitlines():
        if '"sink.flushed"' not in line:
            continue
        try:
            doc = orjson.loads(line)
        except orjson.JSONDecodeError:
            continue
        if doc.get("table") != "events":
            continue
        out.append((parse_ts(doc["timestamp"]), float(doc["latency_ms"]) / 1000, int(doc["rows"])))
    return out


def flush_span(flushes: list[tuple[float, float, int]], want: int) -> tuple[float | None, float | None]:
    """Start of the first insert and end of the insert that brought the rows to ``want``."""
    inserts = [f for f in flushes if f[2] > 0]
    if not inserts:
        return None, None
    start = inserts[0][0] - inserts[0][1]
    total = 0
    for ts, _, rows in inserts:
        total += rows
        if total >= want:
            return start, ts
    return start, None
