"""What an experiment's result is computed from: its societies, their streaming metrics and event diagnostics.

Read from ClickHouse through any object with ``query(sql) -> Result`` (``warehouse.open_reader``'s reader,
a report ``Warehouse``, the dashboard's source), after the fork only.

Values never enter SQL as text. The readers take SQL text alone (the read-only gate checks the statement
with ``EXPLAIN AST``, which refuses unset ``{name:Type}`` parameters), so ``bind`` fills each placeholder
here: a string as ``unhex('<hex digits>')``, an integer as its digits, an array as a list of those. Whatever
a society, arm or experiment name contains, only ``[0-9a-f]`` reaches the statement for it. Should the
readers take server-side parameters one day, ``bind`` is the one place to change.

Streaming metrics (``metrics``, see ``streams.aggregate``): every (metric, dim) with a scalar meaning that
some society of the experiment emitted, except per-thread, per-leader and histogram metrics (``SKIPPED``),
the power-law fit's diagnostics (only ``alpha`` is kept) and ``topk_jaccard`` (1 - ``topk_churn``). A
society's windows are those that end after its fork (``window_end > fork_at``) and for which it emitted
any metric: the window holding the fork counts whole, so what an intervention did at the fork tick (a ban,
a removal) is counted however the windows are aligned; that window's part before the fork is the base's
history, the same in every arm, so it moves no effect (a difference from the control). Counts
(``COUNTS``: events, active agents, graph size, removals, bans) are 0 in a window of the society without a
row; the others are undefined there. A society's value is the mean over its
windows where the metric is defined; its series is the value per window, at the window's offset from the
fork (seconds; negative for a window that started before the fork).

Diagnostics from the society's own events after the fork (``occurred_at >= fork_at``), see ``DIAGNOSTICS``.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from molt_society.warehouse import Result

SKIPPED = (
    "thread_comments",
    "thread_participants",
    "thread_depth",
    "pagerank_leader",
    "cascade_size_hist",
    "cascade_participants_hist",
    "depth_hist",
    "topk_jaccard",
)
"""Streaming metrics left out: one value per thread, per leader or per histogram bin, or redundant."""
POWERLAW_KEPT_DIM = "alpha"
COUNTS = frozenset(
    {
        "events",
        "events_total",
        "removed",
        "banned",
        "active_agents",
        "new_agents",
        "graph_nodes",
        "graph_edges",
    }
)
"""Streaming metrics that count: a window of the society without their row counts 0."""
ACTION_TYPES = (
    "post_created",
    "comment_created",
    "vote_cast",
    "agent_followed",
    "agent_subscribed",
    "submolt_created",
)
"""What an agent does: the events counted as its actions."""
NOT_AGENTS = ("experiment", "moderator")
"""Actors of intervention events: not agents."""
TOP_AGENTS = 10

DIAGNOSTICS: dict[str, str] = {
    "top1pct_posts_comment_share": (
        "Share of the post-fork comments that went to the top 1% of posts. Posts are ranked by the comments "
        "they received after the fork, among the P posts (of any age) that received at least one; the top "
        "1% are the ceil(P/100) first (at least 1), and ties do not change the sum. Undefined without "
        "post-fork comments."
    ),
    "top10_agents_action_share": (
        f"Share of the post-fork actions ({', '.join(ACTION_TYPES)}) made by the {TOP_AGENTS} most active "
        "agents (by their post-fork actions; the experiment and moderator actors are not agents). "
        "Undefined without post-fork actions."
    ),
    "comments_per_post": (
        "Comments created after the fork divided by posts created after the fork (whatever post the "
        "comments answer). Undefined without post-fork posts."
    ),
    "fork_top10_pagerank_share": (
        f"PageRank share, on the interaction graph of the comments made after the fork (interaction_edges: "
        f"commenter -> replied-to author, weighted by comments; damping 0.85), of the {TOP_AGENTS} agents "
        "of highest PageRank on the base's interaction graph before the fork (ties by agent id: the agents "
        "a ban_top_pagerank rule of k = 10 bans). How much of the influence the fork's elite keeps. "
        "Undefined without post-fork comments between agents."
    ),
    "removed_posts": "Distinct posts removed (content_removed with target_type post) after the fork.",
    "removed_comments": (
        "Distinct comments removed (content_removed with target_type comment) after the fork."
    ),
}
"""The report's own diagnostics, computed by SQL from each society's post-fork events: key -> definition."""


class Source(Protocol):
    def query(self, sql: str) -> Result: ...


_PLACEHOLDER = re.compile(r"\{([A-Za-z_][A-Za-z0-9_]*):(String|Int64|Array\(String\))\}")


def _string(value: object) -> str:
    if not isinstance(value, str):
        raise TypeError(f"a String parameter must be a str, not {type(value).__name__}")
    return f"unhex('{value.encode('utf-8').hex()}')"


def bind(sql: str, params: Mapping[str, object]) -> str:
    """``sql`` with each ``{name:Type}`` (String, Int64, Array(String)) replaced by its value as a literal
    of hex digits or decimal digits only (see the module docstring). Raises on a missing or mistyped value."""

    def literal(m: re.Match[str]) -> str:
        name, kind = m.group(1), m.group(2)
        if name not in params:
            raise KeyError(f"no value for the parameter {name!r}")
        value = params[name]
        if kind == "String":
            return _string(value)
        if kind == "Int64":
            if not isinstance(value, int) or isinstance(value, bool):
                raise TypeError(f"the Int64 parameter {name!r} must be an int")
            return f"toInt64({int(value)})"
        if not isinstance(value, list | tuple):
            raise TypeError(f"the Array(String) parameter {name!r} must be a list")
        return "CAST([" + ", ".join(_string(v) for v in value) + "] AS Array(String))"

    return _PLACEHOLDER.sub(literal, sql)


def run(source: Source, sql: str, **params: object) -> list[dict[str, Any]]:
    """The rows of ``sql`` with ``params`` bound, as dicts."""
    res = source.query(bind(sql, params))
    return [dict(zip(res.columns, row, strict=True)) for row in res.rows]


@dataclass(frozen=True)
class Run:
    """One arm x seed society of the experiment (a ``done`` row of the ``experiments`` table)."""

    arm: str
    seed: int
    society: str
    control: bool
    run_seed: int
    base_society: str
    fork_tick: int
    fork_at_us: int
    fork_at: str
    ticks: int
    history_events: int
    history_verified: bool
    spec_sha256: str
    wall_seconds: float


RUNS_SQL = """
SELECT arm, seed, society, control, run_seed, base_society, fork_tick,
       toUnixTimestamp64Micro(fork_at) AS fork_at_us, toString(fork_at) AS fork_at_text, ticks,
       history_events, history_verified, spec_sha256, wall_seconds
FROM experiments FINAL
WHERE experiment = {experiment:String} AND status = {done:String}
ORDER BY arm, seed
"""


def load_runs(source: Source, experiment: str) -> list[Run]:
    """The experiment's finished arm x seed societies, by arm then seed."""
    return [
        Run(
            arm=str(r["arm"]),
            seed=int(r["seed"]),
            society=str(r["society"]),
            control=bool(int(r["control"])),
            run_seed=int(r["run_seed"]),
            base_society=str(r["base_society"]),
            fork_tick=int(r["fork_tick"]),
            fork_at_us=int(r["fork_at_us"]),
            fork_at=str(r["fork_at_text"]),
            ticks=int(r["ticks"]),
            history_events=int(r["history_events"]),
            history_verified=bool(int(r["history_verified"])),
            spec_sha256=str(r["spec_sha256"]),
            wall_seconds=float(r["wall_seconds"]),
        )
        for r in run(source, RUNS_SQL, experiment=experiment, done="done")
    ]


METRICS_SQL = """
SELECT metric, dim, toUnixTimestamp64Micro(window_start) - {fork_us:Int64} AS offset_us, value
FROM metrics FINAL
WHERE society = {society:String}
  AND window_end > fromUnixTimestamp64Micro({fork_us:Int64}, 'UTC')
  AND NOT has({skipped:Array(String)}, metric)
ORDER BY metric, dim, offset_us
"""


@dataclass
class SocietyMetrics:
    """One society's post-fork streaming metrics: its windows and, per metric key, value per window."""

    windows: set[int] = field(default_factory=set)  # offsets from the fork, microseconds
    values: dict[str, dict[int, float]] = field(default_factory=dict)

    def value_at(self, key: str, offset: int) -> float | None:
        """The metric in the window at ``offset``: its row, else 0 for a count (``is_count``) in one of the
        society's windows, else None."""
        got = self.values.get(key, {}).get(offset)
        if got is not None:
            return got
        return 0.0 if is_count(key) and offset in self.windows else None

    def mean(self, key: str) -> float | None:
        """The mean over the society's windows where the metric is defined (None if there is none)."""
        vals = [v for o in sorted(self.windows) if (v := self.value_at(key, o)) is not None]
        return math.fsum(vals) / len(vals) if vals else None


def is_count(key: str) -> bool:
    """Whether the metric of ``key`` (``metric`` or ``metric{dim}``) counts (``COUNTS``)."""
    return key.split("{", 1)[0] in COUNTS


def metric_key(metric: str, dim: str) -> str:
    """``metric`` or ``metric{dim}``: how a streaming metric is named in the result."""
    return f"{metric}{{{dim}}}" if dim else metric


def _kept(metric: str, dim: str) -> bool:
    return not (metric.endswith("_powerlaw") and dim != POWERLAW_KEPT_DIM)


def load_metrics(source: Source, society: str, fork_at_us: int) -> SocietyMetrics:
    """The post-fork streaming metrics of ``society`` (see the module docstring)."""
    out = SocietyMetrics()
    rows = run(source, METRICS_SQL, society=society, fork_us=fork_at_us, skipped=list(SKIPPED))
    for r in rows:
        metric, dim, offset, value = str(r["metric"]), str(r["dim"]), int(r["offset_us"]), r["value"]
        out.windows.add(offset)
        if not _kept(metric, dim) or value is None or not math.isfinite(float(value)):
            continue
        key = metric_key(metric, dim)
        out.values.setdefault(key, {})[offset] = float(value)
    return out


THREADS_SQL = """
SELECT count() AS posts, sum(n) AS comments,
       arraySum(arraySlice(arrayReverseSort(groupArray(n)), 1, toUInt64(ceil(count() / 100)))) AS top
FROM (
    SELECT post_id, count() AS n FROM events FINAL
    WHERE society = {society:String} AND type = {comment:String}
      AND occurred_at >= fromUnixTimestamp64Micro({fork_us:Int64}, 'UTC')
    GROUP BY post_id
)
"""

ACTORS_SQL = """
SELECT count() AS agents, sum(n) AS actions,
       arraySum(arraySlice(arrayReverseSort(groupArray(n)), 1, {top:Int64})) AS top
FROM (
    SELECT actor, count() AS n FROM events FINAL
    WHERE society = {society:String} AND has({actions:Array(String)}, type)
      AND NOT has({not_agents:Array(String)}, actor)
      AND occurred_at >= fromUnixTimestamp64Micro({fork_us:Int64}, 'UTC')
    GROUP BY actor
)
"""

COUNTS_SQL = """
SELECT countIf(type = {post_created:String}) AS posts, countIf(type = {comment_created:String}) AS comments,
       uniqExactIf(target_id, type = {removed:String} AND target_type = {post:String}) AS removed_posts,
       uniqExactIf(target_id, type = {removed:String} AND target_type = {comment:String}) AS removed_comments
FROM events FINAL
WHERE society = {society:String}
  AND has([{post_created:String}, {comment_created:String}, {removed:String}], type)
  AND occurred_at >= fromUnixTimestamp64Micro({fork_us:Int64}, 'UTC')
"""


def _ratio(num: int, den: int) -> float | None:
    return num / den if den > 0 else None


EDGES_SQL = """
SELECT src, dst, count() AS n FROM interaction_edges
WHERE society = {society:String} AND dst != '' AND src != dst
  AND occurred_at {op} fromUnixTimestamp64Micro({fork_us:Int64}, 'UTC')
GROUP BY src, dst ORDER BY src, dst
"""


def _edges(source: Source, society: str, fork_at_us: int, after: bool) -> list[tuple[str, str, float]]:
    sql = EDGES_SQL.replace("{op}", ">=" if after else "<")  # an operator of ours, never data
    rows = run(source, sql, society=society, fork_us=fork_at_us)
    return [(str(r["src"]), str(r["dst"]), float(r["n"])) for r in rows]


def fork_elite(source: Source, base_society: str, fork_at_us: int, k: int = TOP_AGENTS) -> frozenset[str]:
    """The ``k`` agents of highest PageRank on the base's interaction graph before the fork."""
    from molt_society.algorithms.pagerank import pagerank, top_k_set

    return top_k_set(pagerank(_edges(source, base_society, fork_at_us, after=False)), k)


def elite_share(source: Source, society: str, fork_at_us: int, elite: frozenset[str]) -> float | None:
    """The PageRank share of ``elite`` on ``society``'s post-fork interaction graph (None without edges)."""
    from molt_society.algorithms.pagerank import pagerank

    pr = pagerank(_edges(source, society, fork_at_us, after=True))
    total = sum(pr.values())
    return sum(pr.get(a, 0.0) for a in sorted(elite)) / total if total > 0 else None


def load_diagnostics(
    source: Source, society: str, fork_at_us: int, elite: frozenset[str] = frozenset()
) -> dict[str, float | None]:
    """The ``DIAGNOSTICS`` of ``society`` from its post-fork events (integer counts from SQL, the ratios
    here, so the same events always give the same floats); ``elite``: the fork's top agents
    (``fork_elite``)."""
    at = {"society": society, "fork_us": fork_at_us}
    threads = run(source, THREADS_SQL, comment="comment_created", **at)[0]
    actors = run(
        source, ACTORS_SQL, top=TOP_AGENTS, actions=list(ACTION_TYPES), not_agents=list(NOT_AGENTS), **at
    )[0]
    counts = run(
        source,
        COUNTS_SQL,
        post_created="post_created",
        comment_created="comment_created",
        removed="content_removed",
        post="post",
        comment="comment",
        **at,
    )[0]
    return {
        "top1pct_posts_comment_share": _ratio(int(threads["top"] or 0), int(threads["comments"] or 0)),
        "top10_agents_action_share": _ratio(int(actors["top"] or 0), int(actors["actions"] or 0)),
        "comments_per_post": _ratio(int(counts["comments"]), int(counts["posts"])),
        "fork_top10_pagerank_share": elite_share(source, society, fork_at_us, elite) if elite else None,
        "removed_posts": float(counts["removed_posts"]),
        "removed_comments": float(counts["removed_comments"]),
    }


def series_offsets(per_society: Sequence[SocietyMetrics]) -> list[int]:
    """Every window offset (microseconds from the fork) of any society, in order."""
    return sorted(set().union(*(m.windows for m in per_society))) if per_society else []
