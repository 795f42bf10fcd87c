"""Small helpers shared by the diagnostics: rows as dicts, day/time conversions, item shortcuts."""

from __future__ import annotations

import calendar
import math
from datetime import date, datetime
from typing import Any

from molt_society.report.model import Scalar
from molt_society.report.warehouse_source import Warehouse


def records(wh: Warehouse, sql: str) -> list[dict[str, Any]]:
    res = wh.query(sql)
    return [dict(zip(res.columns, row, strict=True)) for row in res.rows]


def epoch(value: date | datetime | str) -> float:
    """Seconds since the epoch of a ClickHouse Date/DateTime (a datetime, a date or an ISO string)."""
    if isinstance(value, str):
        value = (
            datetime.fromisoformat(value.replace("Z", "+00:00"))
            if "T" in value or " " in value
            else date.fromisoformat(value)
        )
    if isinstance(value, datetime):
        return value.timestamp()
    return float(calendar.timegm(value.timetuple()))


def num(value: Any) -> float | None:
    """A finite float, or None (NULL, NaN, infinity)."""
    if value is None:
        return None
    f = float(value)
    return f if math.isfinite(f) else None


def missing(key: str, label: str, reason: str, **kw: Any) -> Scalar:
    return Scalar(key=key, label=label, value=None, reason=reason, **kw)
