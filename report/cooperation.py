"""Cooperation events (Molt Dynamics): technical threads worked on by several agents, and their quality.

The views ``cooperation_events`` and ``cooperation_baseline`` (sinks/molt_dynamics.sql, where the rule,
the keyword list and the quality flags are written down) do the work; this module reads their counts,
means and variances and computes Cohen's d of quality: cooperation events against the single-agent
baseline (technical posts that are not cooperation events, quality of the post text alone), with the
pooled sample standard deviation ``sqrt(((n1 - 1) s1^2 + (n2 - 1) s2^2) / (n1 + n2 - 2))``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from report.model import Item, Scalar, Table
from report.source import Warehouse, quoted

FLAGS = ("has_code", "has_comments", "has_tests", "balanced")


@dataclass(frozen=True)
class Summary:
    n: int
    successes: int
    mean: float | None  # of quality; None without rows
    var: float | None  # sample variance of quality; None with fewer than 2 rows
    flags: list[float | None]  # share of rows with each of FLAGS

    @property
    def success_rate(self) -> float | None:
        return self.successes / self.n if self.n else None


def summary(wh: Warehouse, view: str, society: str) -> Summary:
    """Count, successes, mean and sample variance of quality, and the share of each flag in ``view``."""
    flags = ", ".join(f"avg({f})" for f in FLAGS)
    res = wh.query(
        f"SELECT count(), countIf(success), avg(quality), varSamp(quality), {flags} "
        f"FROM {view} WHERE society = {quoted(society)}"
    )
    if not res.rows:
        return Summary(0, 0, None, None, [None for _ in FLAGS])
    row = res.rows[0]
    n = int(row[0])
    vals = [_finite(v) if n else None for v in row[2:]]
    return Summary(n, int(row[1]), vals[0], vals[1] if n >= 2 else None, vals[2:])


def _finite(v: object) -> float | None:
    if v is None:
        return None
    f = float(v)  # type: ignore[arg-type]
    return f if math.isfinite(f) else None


def cohens_d(n1: int, mean1: float, var1: float, n2: int, mean2: float, var2: float) -> float | str:
    """Cohen's d of group 1 against group 2 (pooled sample SD); a reason string when undefined."""
    if n1 < 2 or n2 < 2:
        return f"Cohen's d needs at least 2 values per group ({n1} cooperation events, {n2} baseline posts)"
    pooled = ((n1 - 1) * var1 + (n2 - 1) * var2) / (n1 + n2 - 2)
    # qualities are multiples of 0.1: any real spread is far above 1e-12; below it is float rounding
    if not pooled > 1e-12:
        return "quality is the same value in both groups: no spread, Cohen's d undefined"
    return (mean1 - mean2) / math.sqrt(pooled)


def items(wh: Warehouse, society: str) -> list[Item]:
    """Event count, success rate, mean qualities, Cohen's d, and the flags of both groups."""
    ev = summary(wh, "cooperation_events", society)
    base = summary(wh, "cooperation_baseline", society)
    no_events = "no cooperation events (threads with >= 5 comments, >= 3 agents, >= 30 minutes, technical)"
    no_base = "no technical post outside cooperation events"
    out: list[Item] = [
        Scalar("cooperation.events", "Cooperation events", ev.n),
        Scalar(
            "cooperation.success_rate",
            "Share of cooperation events with quality > 0.5",
            ev.success_rate,
            None if ev.n else no_events,
        ),
        Scalar(
            "cooperation.mean_quality",
            "Mean quality of cooperation events",
            ev.mean,
            None if ev.n else no_events,
        ),
        Scalar("cooperation.baseline_posts", "Single-agent baseline: technical posts", base.n),
        Scalar(
            "cooperation.baseline_mean_quality",
            "Mean quality of baseline posts",
            base.mean,
            None if base.n else no_base,
        ),
    ]
    if ev.mean is None or base.mean is None:
        d: float | str = no_events if not ev.n else no_base
    else:
        d = cohens_d(ev.n, ev.mean, ev.var or 0.0, base.n, base.mean, base.var or 0.0)
    out.append(
        Scalar(
            "cooperation.cohens_d",
            "Cohen's d of quality, cooperation events vs single-agent baseline",
            d if isinstance(d, float) else None,
            d if isinstance(d, str) else None,
        )
    )
    out.append(
        Table(
            "cooperation.flags",
            "Quality flags: share of cooperation events and of baseline posts",
            ["group", "n", "success rate", "mean quality", *FLAGS],
            [
                ["cooperation events", ev.n, ev.success_rate, ev.mean, *ev.flags],
                ["single-agent baseline", base.n, base.success_rate, base.mean, *base.flags],
            ],
        )
    )
    return out
