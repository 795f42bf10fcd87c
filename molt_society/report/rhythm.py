"""Posting rhythm: how regular each agent's gaps between posts are, and how bursty activity is.

Published definition (the keys that carry Li 2026's values), as "The Moltbook Illusion" computed it
(ln9527/moltbook-research, ``paper/supplementary_information.md`` S4.1 ``compute_temporal_cov`` and
``results/b1_temporal_signal_v2.json``):

- population: authors with at least 3 posts (posts only, comments not counted); 7,807 of 22,020;
- CoV of an author's inter-post intervals = sample standard deviation (pandas ``std``, ddof 1) / mean of
  the intervals between consecutive posts in time order; undefined (left out) when the mean is 0;
- classes: CoV < 0.3 very regular, 0.3-0.5 regular, 0.5-1.0 mixed, 1.0-2.0 irregular, >= 2.0 very
  irregular; "autonomous" (a periodic heartbeat) = very regular + regular = CoV < 0.5: 16.15% + 10.35%
  = 26.5% of the 7,807; median CoV 0.860, mean 1.019.

Null society (keys ``rhythm.null_autonomous_share``, ``rhythm.null_cv_median``, with their 95% range, beside
the published figures): each agent's posts, as many as it wrote, at random times (``poisson_covs``). An
author with three posts has two gaps, and two random gaps are "regular" (CoV < 0.5) surprisingly often.

Variant (labelled, no published value): the same CoV over an agent's posts and comments together
(scope ``activity`` of the view), as the repository's earlier, deprecated phase_01_temporal combined them.

Burstiness (Goh & Barabasi 2008, EPL 81 48002): B = (sigma - mu) / (sigma + mu) of inter-event gaps,
sigma the population standard deviation: -1 for a metronome, about 0 for a Poisson process, towards 1
for bursts. Per agent over its posts and comments (agents with at least 3 such events), and for the
society's whole event sequence. No study published it for MoltBook.

The per-agent gaps and statistics are the views ``rhythm_agents`` / ``rhythm_platform``
(warehouse/patterns.sql); this module only counts and summarises their rows.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from molt_society.report.common import missing, num, records
from molt_society.report.model import Figure, Item, Scalar, Series
from molt_society.report.verdicts import bootstrap_values, ci_scalars
from molt_society.report.warehouse_source import Warehouse, quoted

MIN_POSTS = 3  # "For each author with three or more posts" (S4.1)
AUTONOMOUS_BELOW = 0.5  # very regular (< 0.3) + regular (0.3-0.5)
CLASSES: list[tuple[str, float, float, str]] = [
    ("very regular", 0.0, 0.3, "rhythm.share_very_regular"),
    ("regular", 0.3, 0.5, "rhythm.share_regular"),
    ("mixed", 0.5, 1.0, "rhythm.share_mixed"),
    ("irregular", 1.0, 2.0, "rhythm.share_irregular"),
    ("very irregular", 2.0, float("inf"), "rhythm.share_very_irregular"),
]
MIN_EVENTS_B = 3  # two gaps at least: one gap has no spread
HIST_BINS = np.append(np.arange(0.0, 3.01, 0.1), np.inf)
NULL_DRAWS = 200
NULL_SEED = 20260316
FloatArray = npt.NDArray[np.float64]


def classify(cv: float) -> str:
    """Li 2026's class of one CoV (lower bound inclusive, as the thresholds' "below" reads)."""
    for name, low, high, _ in CLASSES:
        if low <= cv < high:
            return name
    raise ValueError(f"CoV must be >= 0, not {cv}")


def _cv_items(rows: list[tuple[int, float | None]], prefix: str, label: str, published: bool) -> list[Item]:
    """Shares and summaries of the CoV of agents with >= ``MIN_POSTS`` events of the scope."""
    eligible = [(n, cv) for n, cv in rows if n >= MIN_POSTS]
    covs = np.array([cv for _, cv in eligible if cv is not None], dtype=float)
    undefined = len(eligible) - len(covs)
    out: list[Item] = [
        Scalar(
            f"{prefix}.agents", f"{label}: agents with >= {MIN_POSTS} events and a defined CoV", len(covs)
        ),
        Scalar(
            f"{prefix}.cv_undefined",
            f"{label}: agents with >= {MIN_POSTS} events, all at one instant",
            undefined,
        ),
    ]
    keys = [
        (f"{prefix}.autonomous_share", f"{label}: share with CoV < {AUTONOMOUS_BELOW} ('autonomous')"),
        (f"{prefix}.cv_median", f"{label}: median CoV"),
        (f"{prefix}.cv_mean", f"{label}: mean CoV"),
    ]
    if len(covs) == 0:
        why = f"no agent has {MIN_POSTS} or more events of this kind at distinct times"
        return out + [missing(k, lab, why) for k, lab in keys]
    out += [
        Scalar(keys[0][0], keys[0][1], float(np.mean(covs < AUTONOMOUS_BELOW))),
        Scalar(keys[1][0], keys[1][1], float(np.median(covs))),
        *ci_scalars(keys[1][0], keys[1][1], bootstrap_values(covs, np.median)),
        Scalar(keys[2][0], keys[2][1], float(np.mean(covs))),
        *ci_scalars(keys[2][0], keys[2][1], bootstrap_values(covs)),
    ]
    if published:
        out += _null_items([n for n, cv in eligible if cv is not None], prefix)
        counts = {name: 0 for name, *_ in CLASSES}
        for cv in covs:
            counts[classify(float(cv))] += 1
        out += [
            Scalar(key, f"{label}: share {name} (CoV {lo:g}-{hi:g})", counts[name] / len(covs))
            for name, lo, hi, key in CLASSES
        ]
        hist, _ = np.histogram(np.minimum(covs, 3.05), bins=HIST_BINS)
        out.append(
            Figure(
                key=f"{prefix}.cv_hist",
                title="CoV of inter-post gaps per agent (last bar: 3 and above)",
                x_label="coefficient of variation",
                y_label="agents",
                series=[
                    Series(
                        "agents", [float(b) + 0.05 for b in HIST_BINS[:-1]], [float(h) for h in hist], "bars"
                    )
                ],
            )
        )
    return out


def poisson_covs(counts: list[int], rng: np.random.Generator) -> FloatArray:
    """One null draw: for each agent, the CoV (sample sd / mean) of the gaps between ``n`` events at random
    times (a Poisson process given its count: the first and last fixed, the others uniform between; the
    CoV does not depend on the span)."""
    out = np.empty(len(counts))
    n_arr = np.asarray(counts)
    for n in np.unique(n_arr):
        idx = np.flatnonzero(n_arr == n)
        inner = np.sort(rng.random((idx.size, int(n) - 2)), axis=1)
        t = np.concatenate([np.zeros((idx.size, 1)), inner, np.ones((idx.size, 1))], axis=1)
        gaps = np.diff(t, axis=1)
        out[idx] = gaps.std(axis=1, ddof=1) / gaps.mean(axis=1)
    return out


def _null_items(counts: list[int], prefix: str) -> list[Item]:
    """The 'autonomous' share and the median CoV of a null society: every agent's posts, as many as it
    wrote, at random times (``poisson_covs``, ``NULL_DRAWS`` seeded draws; median and 95% range). Two or
    three gaps often look regular by chance: this is what the share is without any heartbeat."""
    rng = np.random.default_rng(NULL_SEED)
    draws = [poisson_covs(counts, rng) for _ in range(NULL_DRAWS)] if counts else []
    label = f"null (each agent's posts at random times, same count; {NULL_DRAWS} seeded draws)"
    out: list[Item] = []
    for key, what in (
        ("autonomous_share", f"share with CoV < {AUTONOMOUS_BELOW}"),
        ("cv_median", "median CoV"),
    ):
        values = [
            float(np.mean(c < AUTONOMOUS_BELOW)) if key == "autonomous_share" else float(np.median(c))
            for c in draws
        ]
        q = [float(v) for v in np.percentile(values, [2.5, 50, 97.5])] if values else [None, None, None]
        why = None if values else "no agent to simulate"
        out += [
            Scalar(f"{prefix}.null_{key}", f"{label}: {what}, median", q[1], why),
            Scalar(f"{prefix}.null_{key}_ci_low", f"{label}: {what}, 2.5%", q[0], why),
            Scalar(f"{prefix}.null_{key}_ci_high", f"{label}: {what}, 97.5%", q[2], why),
        ]
    return out


def _burstiness_items(agent_b: list[float], platform: dict[str, dict[str, object]]) -> list[Item]:
    out: list[Item] = []
    b = np.array(agent_b, dtype=float)
    label = f"burstiness B per agent (posts and comments, agents with >= {MIN_EVENTS_B} events)"
    if len(b) == 0:
        why = f"no agent has {MIN_EVENTS_B} or more posts and comments with some spread in their gaps"
        out += [
            missing("burstiness.agent_median", f"median {label}", why),
            missing("burstiness.agent_mean", f"mean {label}", why),
        ]
    else:
        out += [
            Scalar("burstiness.agents", f"agents with a burstiness (>= {MIN_EVENTS_B} events)", len(b)),
            Scalar("burstiness.agent_median", f"median {label}", float(np.median(b))),
            Scalar("burstiness.agent_mean", f"mean {label}", float(np.mean(b))),
        ]
    for scope, what in (("activity", "posts and comments"), ("posts", "posts")):
        key = f"burstiness.platform_{scope}"
        lab = f"burstiness B of the society's whole sequence of {what}"
        value = num(platform.get(scope, {}).get("burstiness"))
        out.append(
            Scalar(key, lab, value)
            if value is not None
            else missing(key, lab, f"fewer than 3 {what} at distinct times")
        )
    return out


def items(wh: Warehouse, society: str) -> list[Item]:
    q = quoted(society)
    rows = records(wh, f"SELECT scope, events, cv, burstiness FROM rhythm_agents WHERE society = {q}")
    posts = [(int(r["events"]), num(r["cv"])) for r in rows if r["scope"] == "posts"]
    activity = [(int(r["events"]), num(r["cv"])) for r in rows if r["scope"] == "activity"]
    agent_b = [
        b
        for r in rows
        if r["scope"] == "activity"
        and int(r["events"]) >= MIN_EVENTS_B
        and (b := num(r["burstiness"])) is not None
    ]
    platform = {
        str(r["scope"]): r
        for r in records(wh, f"SELECT scope, burstiness FROM rhythm_platform WHERE society = {q}")
    }
    out = _cv_items(posts, "rhythm", f"inter-post CoV, agents with >= {MIN_POSTS} posts", True)
    out += _cv_items(
        activity, "rhythm.variant_activity", "variant: CoV over posts and comments together", False
    )
    out += _burstiness_items(agent_b, platform)
    return out
