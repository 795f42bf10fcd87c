"""Collective layer: influence per window (PageRank shares, top-k churn, super-nodes and their
persistence), and the agreement of these batch figures with the streaming metrics of the pipeline.

The study's windows: one UTC day, as the socialization study analysed "daily interaction graphs" (its
"top-1-3 share drops rapidly" shows at that resolution only). Keys ``collective.*`` are per day; when the
society's streaming metrics use another window (``SOCIETY_WINDOW_SECONDS``, e.g. hourly on a replayed
crawl), the same means over those windows are a labelled variant (``collective.variant_stream_window.*``).
Every window from the one of the society's first event to the one of its last is visited, empty ones
included, exactly as the stream processor closes them, so the churn and persistence of window w compare it
with window w-1. The per-window graph is the ``interaction_edges`` view restricted to comments made in the
window; PageRank, top-k and super-nodes are ``algorithms.pagerank``'s, the functions the stream processor
uses. Whether the daily top-1 share falls is measured, not read off the chart: Kendall's tau of the daily
share against the day (``collective.top1_share_trend``, with its p-value), and the first and last day's
shares; beside it the same trend on null societies whose comments are re-addressed uniformly within each
day (``collective.null_top1_share_trend``: a share that falls only because the daily graph grows falls
there too).

Leaders are taken from the whole observation period, as the socialization study identifies its influential
accounts over its whole crawl: PageRank on the interaction graph of every comment of the period (edge
weight = comments), top k by rank (ties by agent id). The shared-memory probe scores its answers against
the same leaders (``probes.shared_memory``), computed from the record before the probes were posted. The
newest day's top k is shown only as a labelled variant (its overlap with the whole-period leaders).
"""

from __future__ import annotations

import math
from collections import defaultdict

import numpy as np
import numpy.typing as npt
from scipy.stats import kendalltau

from molt_society.algorithms.pagerank import (
    jaccard,
    pagerank,
    pagerank_indexed,
    super_nodes,
    top_k_set,
    top_k_share,
)
from molt_society.algorithms.powerlaw_fit import fit_discrete_power_law
from molt_society.report.common import missing, num, records
from molt_society.report.model import Cell, Figure, Item, Scalar, Series, Style, Table
from molt_society.report.warehouse_source import Warehouse, quoted

DAY_US = 86_400_000_000
LEADERS_TITLE = "Top-{k} influence leaders over the whole observation period (PageRank on every interaction)"


def window_us(wh: Warehouse, society: str) -> tuple[int, str]:
    """The streaming window of the society (µs) and where that figure comes from."""
    rows = wh.query(
        f"SELECT toUnixTimestamp64Micro(any(window_end)) - toUnixTimestamp64Micro(any(window_start)) "
        f"FROM metrics WHERE society = {quoted(society)} AND metric = 'events_total'"
    ).rows
    w = int(rows[0][0]) if rows and rows[0][0] is not None else 0
    if w > 0:
        return w, "the society's streaming metrics"
    return DAY_US, "one UTC day (the society has no streaming metrics)"


def whole_period_pagerank(wh: Warehouse, society: str, until_us: int | None = None) -> dict[str, float]:
    """PageRank on the interaction graph of the society's whole observation period (every comment that
    links two agents; weight = comments), or of the period before ``until_us`` (µs since the epoch)."""
    until = "" if until_us is None else f" AND toUnixTimestamp64Micro(occurred_at) < {int(until_us)}"
    rows = wh.query(
        f"SELECT src, dst, count() FROM interaction_edges WHERE society = {quoted(society)}{until} "
        "GROUP BY src, dst ORDER BY src, dst"
    ).rows
    return pagerank([(str(src), str(dst), float(n)) for src, dst, n in rows])


def ranked_leaders(pr: dict[str, float], k: int) -> list[tuple[str, float]]:
    """The ``k`` highest-ranked agents with their PageRank, ties by agent id (as ``top_k_set``)."""
    return sorted(pr.items(), key=lambda item: (-item[1], item[0]))[:k]


def influence_per_window(
    wh: Warehouse,
    society: str,
    w_us: int,
    top_k: int,
    tops: dict[int, frozenset[str]] | None = None,
) -> list[dict[str, float | int | None]]:
    """Per window: PageRank shares, top-k churn, super-nodes; ``tops`` (when given) receives each window's
    top-k set by window start."""
    q = quoted(society)
    span = wh.query(
        f"SELECT toUnixTimestamp64Micro(min(occurred_at)), toUnixTimestamp64Micro(max(occurred_at)), count() "
        f"FROM events FINAL WHERE society = {q}"
    ).rows[0]
    if not span[2]:
        return []
    first, last = int(span[0]) // w_us * w_us, int(span[1]) // w_us * w_us
    edges: dict[int, list[tuple[str, str, float]]] = defaultdict(list)
    for w, src, dst, n in wh.query(
        f"SELECT intDiv(toUnixTimestamp64Micro(occurred_at), {w_us}) * {w_us} AS w, src, dst, count() AS n "
        f"FROM interaction_edges WHERE society = {q} GROUP BY w, src, dst ORDER BY w, src, dst"
    ).rows:
        edges[int(w)].append((str(src), str(dst), float(n)))
    out: list[dict[str, float | int | None]] = []
    prev_top: frozenset[str] | None = None
    prev_supers: frozenset[str] | None = None
    for start in range(first, last + 1, w_us):
        pr = pagerank(edges.get(start, []))
        row: dict[str, float | int | None] = {"window_start_us": start, "nodes": len(pr)}
        if pr:
            row |= {f"top{k}": top_k_share(pr, k) for k in sorted({1, 3, top_k})}
            current, supers = top_k_set(pr, top_k), super_nodes(pr)
            if tops is not None:
                tops[start] = current
            row["super_nodes"] = len(supers)
            row["churn"] = 1.0 - jaccard(current, prev_top) if prev_top else None
            row["persisting"] = len(supers & prev_supers) if prev_supers is not None else None
            row["prev_super_nodes"] = len(prev_supers) if prev_supers is not None else None
            prev_top, prev_supers = current, supers
        else:
            prev_top, prev_supers = None, None
        out.append(row)
    return out


def items(wh: Warehouse, society: str, top_k: int = 10) -> list[Item]:
    """Per UTC day (the study's windows): PageRank shares, churn and super-nodes, their trend, the whole
    period's leaders; the same means over the streaming windows as a labelled variant."""
    tops: dict[int, frozenset[str]] = {}
    rows = influence_per_window(wh, society, DAY_US, top_k, tops)
    out: list[Item] = [
        Scalar(
            "collective.window_seconds",
            "window length (one UTC day: the socialization study's daily interaction graphs)",
            DAY_US / 1e6,
            unit="s",
        )
    ]
    ranked = [r for r in rows if r["nodes"]]
    if not ranked:
        return out + _no_interaction(top_k)
    out.append(Scalar("collective.windows", "days with an interaction graph", len(ranked)))
    out += leaders_items(wh, society, tops, top_k)
    out += _window_means(ranked, top_k)
    out += trend_items(ranked)
    out += null_trend_items(wh, society)
    out += _window_figures(rows, top_k)
    stream_us, origin = window_us(wh, society)
    if stream_us != DAY_US:
        variant = [r for r in influence_per_window(wh, society, stream_us, top_k) if r["nodes"]]
        label = f"variant: windows of {stream_us / 1e6:g} s ({origin}): "
        out.append(Scalar(f"{STREAM_VARIANT}.window_seconds", label + "window length", stream_us / 1e6))
        out += _window_means(variant, top_k, prefix=STREAM_VARIANT, label=label)
    return out


STREAM_VARIANT = "collective.variant_stream_window"


NULL_SHUFFLES = 40  # null societies for the trend (their median and 2.5-97.5% range are shown)
NULL_KEY = "collective.null_top1_share_trend"


def null_trend_items(wh: Warehouse, society: str, shuffles: int = NULL_SHUFFLES, seed: int = 0) -> list[Item]:
    """The trend of the daily top-1 share on null societies: each comment of a day re-addressed to an
    agent drawn uniformly from those active in the interaction graph that day (the day's comments, their
    authors and the day's agents are kept; the concentration of attention is not). A top share that
    falls only because the daily graph grows falls here too: the comparison then says "not
    distinguishable from the null"."""
    rows = wh.query(
        f"SELECT intDiv(toUnixTimestamp64Micro(occurred_at), {DAY_US}) AS d, src, dst "
        f"FROM interaction_edges WHERE society = {quoted(society)} ORDER BY d, occurred_at, src, dst"
    ).rows
    # agents as their rank among all names: sorting the ids sorts the names, so each day's pool, the draws
    # and PageRank's node order are those of the named graph
    names = {name: i for i, name in enumerate(sorted({str(a) for _d, src, dst in rows for a in (src, dst)}))}
    days: dict[int, list[int]] = defaultdict(list)
    agents: dict[int, set[int]] = defaultdict(set)
    for d, src, dst in rows:
        days[int(d)].append(names[str(src)])
        agents[int(d)] |= {names[str(src)], names[str(dst)]}
    label = (
        f"null ({shuffles} societies, each day's comments re-addressed uniformly): daily top-1 share trend"
    )
    order = sorted(days)
    if len(order) < 3:
        return [missing(NULL_KEY, label, "needs at least 3 days with interactions")]
    pools = {d: np.asarray(sorted(agents[d]), dtype=np.int64) for d in order}
    sources = {d: np.asarray(days[d], dtype=np.int64) for d in order}
    rng = np.random.default_rng(seed)
    taus: list[float] = []
    for _ in range(shuffles):
        shares = []
        for d in order:
            targets = rng.integers(0, len(pools[d]), len(sources[d]))
            shares.append(_top1_share(sources[d], pools[d][targets]))
        if len(set(shares)) > 1:
            taus.append(float(kendalltau(order, shares)[0]))
    if not taus:
        return [missing(NULL_KEY, label, "no null society had a varying share")]
    return [
        Scalar(NULL_KEY, label + ": median Kendall's tau", float(np.median(taus))),
        Scalar(f"{NULL_KEY}_ci_low", label + ": 2.5%", float(np.percentile(taus, 2.5))),
        Scalar(f"{NULL_KEY}_ci_high", label + ": 97.5%", float(np.percentile(taus, 97.5))),
    ]


def _top1_share(src: npt.NDArray[np.int64], dst: npt.NDArray[np.int64]) -> float:
    """``top_k_share(pagerank(edges), 1)`` of the unit-weight edges ``src -> dst`` (self-loops dropped),
    on the nodes' ids: the same nodes in the same order as the named graph, so the same ranks."""
    keep = src != dst
    if not keep.any():
        return 0.0
    m = int(keep.sum())
    nodes, inverse = np.unique(np.concatenate([src[keep], dst[keep]]), return_inverse=True)
    x = pagerank_indexed(inverse[:m], inverse[m:], np.ones(m), int(nodes.size))
    total = math.fsum(x.tolist())
    return float(x.max()) / total if total else 0.0


def trend_items(ranked: list[dict[str, float | int | None]]) -> list[Item]:
    """Whether the top-1 share falls from window to window: Kendall's tau against the window's start (the
    study: "drops rapidly"), its two-sided p-value, and the first and last window's shares."""
    xs = [float(r["window_start_us"] or 0) for r in ranked]
    ys = [float(r["top1"] or 0) for r in ranked]
    out: list[Item] = [
        Scalar(
            "collective.top1_share_first", "top-1 PageRank share on the first day with interactions", ys[0]
        ),
        Scalar(
            "collective.top1_share_last", "top-1 PageRank share on the last day with interactions", ys[-1]
        ),
    ]
    label = "trend of the daily top-1 share: Kendall's tau against the day (< 0: falls)"
    if len(set(ys)) < 2 or len(ys) < 3:
        why = "needs at least 3 days with interactions and a share that varies"
        return [
            *out,
            missing("collective.top1_share_trend", label, why),
            missing("collective.top1_share_trend_p", "trend: two-sided p-value", why),
        ]
    tau, p = kendalltau(xs, ys)
    return [
        *out,
        Scalar("collective.top1_share_trend", label, float(tau)),
        Scalar("collective.top1_share_trend_p", "trend: two-sided p-value (Kendall)", float(p)),
    ]


def _no_interaction(top_k: int) -> list[Item]:
    """Every collective figure missing, with the reason: no window has an interaction."""
    why = "no window has an interaction (a comment answering another agent)"
    keys = [("collective.windows", "windows with an interaction graph")]
    keys += [(f"collective.top{k}_share", f"mean top-{k} PageRank share") for k in sorted({1, 3, top_k})]
    keys += [
        ("collective.topk_churn", f"mean top-{top_k} churn (1 - Jaccard) between windows"),
        ("collective.super_nodes", "mean super-nodes per window (PageRank > mean + 3 sd)"),
        ("collective.super_node_persistence", "share of super-nodes still super-nodes next window"),
    ]
    keys += [
        ("collective.top1_share_trend", "trend of the daily top-1 share: Kendall's tau against the day"),
        (
            "collective.variant_newest_window_leaders_overlap",
            f"variant: overlap of the newest window's top {top_k} with the whole period's",
        ),
    ]
    leaders = Table("collective.leaders", LEADERS_TITLE.format(k=top_k), [], [], reason=why)
    return [*(missing(k, label, why) for k, label in keys), leaders]


def _window_means(
    ranked: list[dict[str, float | int | None]], top_k: int, prefix: str = "collective", label: str = ""
) -> list[Item]:
    """Means over the windows with an interaction graph: top shares, churn, super-nodes, persistence
    (keys ``<prefix>.*``, labels after ``label``)."""
    if not ranked:
        return [
            missing(
                f"{prefix}.top1_share", label + "mean top-1 PageRank share", "no window has an interaction"
            )
        ]
    out: list[Item] = [
        Scalar(
            f"{prefix}.top{k}_share",
            f"{label}mean top-{k} PageRank share",
            float(np.mean([float(r[f"top{k}"] or 0) for r in ranked])),
        )
        for k in sorted({1, 3, top_k})
    ]
    churn = [float(c) for r in ranked if (c := r.get("churn")) is not None]
    out.append(
        Scalar(
            f"{prefix}.topk_churn",
            f"{label}mean top-{top_k} churn (1 - Jaccard) between windows",
            float(np.mean(churn)),
        )
        if churn
        else missing(
            f"{prefix}.topk_churn",
            f"{label}mean top-{top_k} churn",
            "needs two consecutive windows with interactions",
        )
    )
    out.append(
        Scalar(
            f"{prefix}.super_nodes",
            f"{label}mean super-nodes per window (PageRank > mean + 3 sd)",
            float(np.mean([float(r["super_nodes"] or 0) for r in ranked])),
        )
    )
    prev = sum(int(r["prev_super_nodes"] or 0) for r in ranked if r.get("persisting") is not None)
    kept = sum(int(r["persisting"] or 0) for r in ranked if r.get("persisting") is not None)
    out.append(
        Scalar(
            f"{prefix}.super_node_persistence",
            f"{label}share of super-nodes still super-nodes next window",
            kept / prev,
        )
        if prev
        else missing(
            f"{prefix}.super_node_persistence",
            f"{label}share of super-nodes persisting",
            "no window followed a window with super-nodes",
        )
    )
    return out


def _window_figures(rows: list[dict[str, float | int | None]], top_k: int) -> list[Item]:
    """PageRank shares, churn and super-nodes over every window (empty ones included)."""
    xs = [int(r["window_start_us"] or 0) / 1e6 for r in rows]
    style: Style = "points" if len(rows) == 1 else "line"
    return [
        Figure(
            "collective.shares",
            "PageRank share of the top nodes per window",
            "window start",
            "share of PageRank",
            [
                Series(f"top-{k}", xs, [num(r.get(f"top{k}")) for r in rows], style)
                for k in sorted({1, 3, top_k})
            ],
            x_kind="time",
        ),
        Figure(
            "collective.churn",
            f"Top-{top_k} churn and super-nodes per window",
            "window start",
            "churn / count",
            [
                Series("churn", xs, [num(r.get("churn")) for r in rows], style),
                Series("super-nodes", xs, [num(r.get("super_nodes")) for r in rows], style),
                Series("persisting", xs, [num(r.get("persisting")) for r in rows], style),
            ],
            x_kind="time",
        ),
    ]


def leaders_items(wh: Warehouse, society: str, tops: dict[int, frozenset[str]], top_k: int) -> list[Item]:
    """The whole period's top-k leaders, how many windows each led (was in that window's top k), and, as
    a labelled variant, the Jaccard overlap of the newest window's top k with them."""
    leaders = ranked_leaders(whole_period_pagerank(wh, society), top_k)
    registered = wh.query(
        f"SELECT agent_id, any(name) FROM agents WHERE society = {quoted(society)} GROUP BY agent_id"
    ).rows
    names = {str(actor): str(name) for actor, name in registered}
    led = [frozenset(t) for _, t in sorted(tops.items())]
    table = Table(
        "collective.leaders",
        LEADERS_TITLE.format(k=top_k),
        ["rank", "agent", "name", "PageRank", f"windows in the top {top_k}", "of windows"],
        [
            [i, agent, names.get(agent, ""), score, sum(1 for t in led if agent in t), len(led)]
            for i, (agent, score) in enumerate(leaders, start=1)
        ],
    )
    newest = led[-1] if led else frozenset()
    return [
        table,
        Scalar(
            "collective.variant_newest_window_leaders_overlap",
            f"variant: Jaccard overlap of the newest window's top {top_k} with the whole period's",
            jaccard(newest, frozenset(a for a, _ in leaders)),
        ),
    ]


# --------------------------------------------------------------------- streaming vs batch


def agreement(wh: Warehouse, society: str, top_k: int = 10) -> list[Item]:
    """Streaming metrics (``metrics`` table) against the same figures computed here from the events."""
    q = quoted(society)
    stream = records(
        wh,
        f"SELECT toUnixTimestamp64Micro(window_start) AS w, metric, dim, value FROM metrics FINAL "
        f"WHERE society = {q} AND metric IN ('pagerank_top_share', 'topk_churn', 'super_nodes', 'events', "
        f"'depth_hist', 'thread_comments_powerlaw')",
    )
    if not stream:
        return [
            missing(
                "agreement.windows",
                "windows compared",
                "the society has no streaming metrics (imported or stored without the stream processor)",
            )
        ]
    w_us, _ = window_us(wh, society)
    batch = {int(r["window_start_us"] or 0): r for r in influence_per_window(wh, society, w_us, top_k)}
    pairs: dict[str, list[tuple[float, float]]] = defaultdict(list)
    by_type = {
        (int(w), str(t)): float(n)
        for w, t, n in wh.query(
            f"SELECT intDiv(toUnixTimestamp64Micro(occurred_at), {w_us}) * {w_us} AS w, type, count() "
            f"FROM events FINAL WHERE society = {q} AND type != 'model_called' GROUP BY w, type"
        ).rows
    }
    last_w = max(int(r["w"]) for r in stream)
    for r in stream:
        w, metric, dim, value = int(r["w"]), str(r["metric"]), str(r["dim"]), float(r["value"])
        b = batch.get(w, {})
        if metric == "pagerank_top_share":
            pairs[f"PageRank {dim} share"].append((value, float(b.get(dim) or 0.0)))
        elif metric == "topk_churn":
            pairs["top-k churn"].append((value, float(b.get("churn") or 0.0)))
        elif metric == "super_nodes" and dim == "count":
            pairs["super-nodes"].append((value, float(b.get("super_nodes") or 0.0)))
        elif metric == "events":
            pairs["events per window and type"].append((value, by_type.get((w, dim), 0.0)))
    # thread state at the end: the last window's cumulative figures against the threads view
    depth_rows = wh.query(
        f"SELECT max_depth, count() FROM threads WHERE society = {q} GROUP BY max_depth"
    ).rows
    batch_depth = {int(d): float(n) for d, n in depth_rows}
    last_depth = {
        int(r["dim"]): float(r["value"])
        for r in stream
        if r["metric"] == "depth_hist" and int(r["w"]) == last_w
    }
    for d in sorted(set(batch_depth) | set(last_depth)):
        pairs["depth histogram (last window)"].append((last_depth.get(d, 0.0), batch_depth.get(d, 0.0)))
    sizes = wh.query(
        f"SELECT comments, count() FROM threads WHERE society = {q} AND comments > 0 GROUP BY comments"
    ).rows
    fit = fit_discrete_power_law({int(s): int(n) for s, n in sizes})
    alpha = [
        float(r["value"])
        for r in stream
        if r["metric"] == "thread_comments_powerlaw" and r["dim"] == "alpha" and int(r["w"]) == last_w
    ]
    if fit is not None and alpha:
        pairs["thread-size power-law alpha (last window)"].append((alpha[0], fit.alpha))
    table_rows: list[list[Cell]] = []
    worst = 0.0
    for name, ps in sorted(pairs.items()):
        diff = max(abs(a - b) for a, b in ps)
        worst = max(worst, diff)
        table_rows.append([name, len(ps), diff])
    return [
        Scalar("agreement.windows", "streaming windows compared", len({int(r["w"]) for r in stream})),
        Scalar("agreement.max_abs_diff", "largest |streaming - batch| over every figure compared", worst),
        Table(
            "agreement.table",
            "Streaming metric vs batch recomputation from the stored events",
            ["figure", "values compared", "max |streaming - batch|"],
            table_rows,
        ),
    ]
