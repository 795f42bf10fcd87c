"""The live figures of ``society run``: read from the running sink, shown as a table or as one log line."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from rich.console import Group
from rich.progress import Progress
from rich.table import Table
from rich.text import Text

from molt_society.society.drive import query_or_none

# "metric|dim" of the streaming metrics shown, with their labels (the first four also in the log line)
LIVE_METRICS: dict[str, str] = {
    "share_no_comment|": "posts without a comment",
    "mean_depth|commented": "mean thread depth (commented posts)",
    "thread_comments_powerlaw|alpha": "thread size (comments) power-law alpha",
    "pagerank_top_share|top10": "PageRank share of the top 10",
    "topk_churn|": "top-10 churn vs previous window",
    "active_agents|": "active agents (last window)",
}
# only the metrics shown are read: the per-thread ones (a row per thread and window) made each refresh of
# the display cost more as the society aged (bench.aging: the driver's CPU per tick 1.8 -> 3.4 ms)
_LIVE_NAMES = ", ".join(f"'{m}'" for m in sorted({k.split("|")[0] for k in LIVE_METRICS} | {"events_total"}))
STYLES = {"error": "bold red", "warning": "yellow", "info": "green"}


@dataclass
class Figures:
    """What the sink has stored of the society so far (``rate``: events/s, set by the caller)."""

    by_type: dict[str, int] = field(default_factory=dict)  # events per type
    metrics: dict[str, float] = field(default_factory=dict)  # "metric|dim": its newest value
    events: int = 0
    dead_letters: int = 0
    windows: int = 0
    rate: float = 0.0


def collect(url: str, society: str) -> Figures:
    """The figures of ``society`` from the sink at ``url`` (what does not answer stays zero)."""
    f = Figures()
    s = society.replace("'", "")
    r = query_or_none(
        url, f"SELECT type, count() FROM events WHERE society = '{s}' GROUP BY type ORDER BY type"
    )
    if r:
        f.by_type = {str(t): int(n) for t, n in r.rows}
        f.events = sum(f.by_type.values())
    r = query_or_none(url, f"SELECT count() FROM dead_letters WHERE society = '{s}'")
    if r and r.rows:
        f.dead_letters = int(r.rows[0][0])
    r = query_or_none(
        url,
        "SELECT metric, dim, argMax(value, window_start), uniqExact(window_start) FROM metrics "
        f"WHERE society = '{s}' AND metric IN ({_LIVE_NAMES}) GROUP BY metric, dim",
    )
    if r:
        for metric, dim, value, windows in r.rows:
            f.metrics[f"{metric}|{dim}"] = float(value)
            if metric == "events_total":
                f.windows = int(windows)
    return f


def line(fig: Figures, task: Any, notices: list[tuple[str, str]] | None = None) -> str:
    """One-line progress for logs, with what is wrong right now."""
    parts = [f"{task.description} {task.completed:,.0f}/{task.total:,.0f}", f"events {fig.events:,}"]
    parts.append(f"{fig.rate:,.0f}/s")
    parts.append(f"dead letters {fig.dead_letters:,}")
    parts.append(f"windows {fig.windows}")
    for key, label in list(LIVE_METRICS.items())[:4]:
        v = fig.metrics.get(key)
        if v is not None:
            parts.append(f"{label} {v:.3f}")
    parts.extend(f"{level.upper()}: {text}" for level, text in notices or ())
    return " | ".join(parts)


def render(
    fig: Figures, progress: Progress, society: str, notices: list[tuple[str, str]] | None = None
) -> Group:
    """The live display: progress, what is wrong right now (restarts, a silent broker, a waiting barrier,
    a failing sink), then the figures."""
    t = Table(title=f"society {society}", show_header=True, header_style="bold")
    t.add_column("figure")
    t.add_column("value", justify="right")
    t.add_row("events in ClickHouse", f"{fig.events:,}")
    t.add_row("events/s (into ClickHouse)", f"{fig.rate:,.0f}")
    for etype, n in sorted(fig.by_type.items()):
        t.add_row(f"  {etype}", f"{n:,}")
    t.add_row("dead letters", f"{fig.dead_letters:,}")
    t.add_row("closed metric windows", f"{fig.windows:,}")
    for key, label in LIVE_METRICS.items():
        v = fig.metrics.get(key)
        t.add_row(label, "-" if v is None else f"{v:.3f}")
    alerts = [Text(f"! {text}", style=STYLES.get(level, "")) for level, text in notices or ()]
    return Group(progress, *alerts, t)
