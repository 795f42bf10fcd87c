"""Turn the partials of one event-time window (one per partition) into metric events.

Pure and deterministic: the same partials give the same metric values, whatever worker computed them and
in whatever order the partials arrived. Definitions follow ``shared/notes/metrics.md``:

- cascades: comments per thread and distinct participants per thread, cumulative at the window's end;
  their distributions and a discrete power-law fit of the comment counts (``algorithms.powerlaw_fit``);
- reply depth: distribution over all posts (0 = no comment), mean depth over all posts and over posts with
  at least one comment, share of posts without a comment; per-thread depth of threads active in the window;
- influence: PageRank on the window's interaction graph (commenter -> replied-to author, self-edges
  dropped, weight = comments), summed share of the top 1, 3 and k, the top-k set's churn against the
  previous window (1 - Jaccard), super-nodes (score > mean + 3 sd) and how many persist;
- moderation (experiments' interventions): ``removed`` (dims ``post``, ``comment``: content a
  ``content_removed`` took out of the feeds in the window, first removals only) and ``banned`` (agents an
  ``agent_banned`` banned in the window), emitted for every window (0 when nothing happened).
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field

from molt_society.schemas.control import MetricEvent, WindowPartial, metric_id
from molt_society.streams.thread_stats import mean_depth, share_zero

LEADERS = 10


@dataclass
class InfluenceMemory:
    """What the next window needs from this one: the top-k set and the super-nodes."""

    top_k: frozenset[str] | None = None
    supers: frozenset[str] | None = None
    last_window_us: int | None = None
    extra: dict[str, float] = field(default_factory=dict)


def _merge(partials: Iterable[WindowPartial], key: str) -> Counter[int]:
    total: Counter[int] = Counter()
    for p in partials:
        for k, v in p[key].items():  # type: ignore[literal-required]
            total[int(k)] += int(v)
    return +total


class _Emitter:
    """Collects the metric events of one window: ``emit(metric, dim, value)`` appends one."""

    def __init__(self, society: str, start: int, end: int) -> None:
        self.society, self.start, self.end = society, start, end
        self.now = time.time()
        self.out: list[MetricEvent] = []

    def __call__(self, metric: str, dim: str, value: float) -> None:
        self.out.append(
            {
                "metric_id": metric_id(self.society, metric, self.start, dim),
                "society": self.society,
                "metric": metric,
                "window_start_us": self.start,
                "window_end_us": self.end,
                "dim": dim,
                "value": float(value),
                "emitted_at": self.now,
            }
        )


def window_metrics(
    society: str, partials: list[WindowPartial], memory: InfluenceMemory, *, top_k: int
) -> list[MetricEvent]:
    """All metric events of one window; ``memory`` is read and updated for the next window."""
    partials = sorted(partials, key=lambda p: p["partition"])
    start, end = partials[0]["window_start_us"], partials[0]["window_end_us"]
    emit = _Emitter(society, start, end)
    _activity(emit, partials)
    _moderation(emit, partials)
    _cascades(emit, partials)
    _influence(emit, partials, memory, top_k)
    memory.last_window_us = start
    return emit.out


def _activity(emit: _Emitter, partials: list[WindowPartial]) -> None:
    """Events per type, in total, active agents and new agents of the window."""
    counts: Counter[str] = Counter()
    active: set[str] = set()
    for p in partials:
        counts.update(p["counts"])
        active.update(p["active_agents"])
    for etype, n in sorted(counts.items()):
        emit("events", etype, n)
    emit("events_total", "", sum(counts.values()))
    emit("active_agents", "", len(active))
    joined = sum(int(p.get("joined_agents", 0)) for p in partials)  # cohorts of agents_joined
    emit("new_agents", "", counts.get("agent_registered", 0) + joined)


def _moderation(emit: _Emitter, partials: list[WindowPartial]) -> None:
    """Content removed and agents banned in the window (partials of older workers carry neither: 0)."""
    removed: Counter[str] = Counter()
    for p in partials:
        removed.update(p.get("removed", {}))
    emit("removed", "comment", removed["comment"])
    emit("removed", "post", removed["post"])
    emit("banned", "", sum(int(p.get("banned", 0)) for p in partials))


def _cascades(emit: _Emitter, partials: list[WindowPartial]) -> None:
    """Threads and cascades, cumulative at the window's end, and the threads active in it."""
    # Imported here, not at the top: scipy (sparse, special) took 0.2 s of the stream worker's start,
    # before its action processor could join its group; the first window closes much later.
    from molt_society.algorithms.powerlaw_fit import fit_discrete_power_law

    sizes = _merge(partials, "size_hist")
    parts = _merge(partials, "participants_hist")
    depths = _merge(partials, "depth_hist")
    posts = sum(depths.values())
    emit("posts_total", "", posts)
    for metric, hist in (
        ("cascade_size_hist", sizes),
        ("cascade_participants_hist", parts),
        ("depth_hist", depths),
    ):
        for size, n in sorted(hist.items()):
            emit(metric, str(size), n)
    if posts:
        emit("share_no_comment", "", share_zero(depths))
        emit("mean_depth", "all", mean_depth(depths))
        if posts - depths.get(0, 0) > 0:
            emit("mean_depth", "commented", mean_depth(depths, only_nonzero=True))
    for name, hist in (("thread_comments_powerlaw", sizes), ("thread_participants_powerlaw", parts)):
        fit = fit_discrete_power_law({k: v for k, v in hist.items() if k >= 1})
        if fit is not None:
            emit(name, "alpha", fit.alpha)
            emit(name, "sigma", fit.sigma)
            emit(name, "xmin", fit.xmin)
            emit(name, "n_tail", fit.n_tail)
            emit(name, "ks", fit.ks_distance)
    for p in partials:
        for post_id, n_comments, n_participants, depth in p["threads_touched"]:
            emit("thread_comments", post_id, n_comments)
            emit("thread_participants", post_id, n_participants)
            emit("thread_depth", post_id, depth)


def _influence(emit: _Emitter, partials: list[WindowPartial], memory: InfluenceMemory, top_k: int) -> None:
    """PageRank of the window's interaction graph: concentration, leaders, churn and super-nodes."""
    from molt_society.algorithms.pagerank import jaccard, pagerank, super_nodes, top_k_set, top_k_share

    weights: Counter[tuple[str, str]] = Counter()
    for p in partials:
        for src, dst, w in p["edges"]:
            weights[(src, dst)] += w
    edges = [(s, d, float(w)) for (s, d), w in sorted(weights.items())]
    pr = pagerank(edges)
    emit("graph_nodes", "", len(pr))
    emit("graph_edges", "", len(edges))
    if not pr:
        memory.top_k, memory.supers = None, None
        return
    for k in sorted({1, 3, top_k}):
        emit("pagerank_top_share", f"top{k}", top_k_share(pr, k))
    ranked = sorted(pr.items(), key=lambda kv: (-kv[1], kv[0]))[:LEADERS]
    for i, (agent, score) in enumerate(ranked, start=1):
        emit("pagerank_leader", f"{i:02d}:{agent}", score)
    current = top_k_set(pr, top_k)
    supers = super_nodes(pr)
    emit("super_nodes", "count", len(supers))
    if memory.top_k:
        overlap = jaccard(current, memory.top_k)
        emit("topk_jaccard", "", overlap)
        emit("topk_churn", "", 1.0 - overlap)
    if memory.supers is not None:
        emit("super_nodes", "persisting", len(supers & memory.supers))
    memory.top_k, memory.supers = current, supers
