"""Summaries of measured figures: percentiles and rates over a run's samples."""

from __future__ import annotations

import math


def percentile(values: list[float], q: float) -> float | None:
    """Nearest-rank percentile (None without values)."""
    if not values:
        return None
    ordered = sorted(values)
    rank = max(1, math.ceil(q / 100 * len(ordered)))
    return ordered[min(len(ordered), rank) - 1]


def summary(values: list[float]) -> dict[str, float | None]:
    """p50, p95, max and count of ``values``."""
    return {
        "p50": percentile(values, 50),
        "p95": percentile(values, 95),
        "max": max(values) if values else None,
        "n": float(len(values)),
    }


def tenths(samples: list[tuple[float, int]], t0: float, total: int) -> str:
    """Rate over the first and the last tenth of ``total`` from ``(time, count)`` samples."""
    if not samples or total <= 0:
        return "no samples"

    def when(count: float) -> float | None:
        return next((t for t, c in samples if c >= count), None)

    t1, t9, t10 = when(total * 0.1), when(total * 0.9), when(total)
    if t1 is None or t9 is None or t10 is None or t1 <= t0 or t10 <= t9:
        return "rate by tenth: n/a"
    first = total * 0.1 / (t1 - t0)
    last = total * 0.1 / (t10 - t9)
    return f"first tenth of the events at {first:,.0f}/s, last tenth at {last:,.0f}/s"
