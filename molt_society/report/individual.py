"""Individual layer of the socialization study: semantic drift, feedback adaptation, interaction impact.

All three work on the stored all-MiniLM-L6-v2 embeddings of an agent's posts (title and body), in time
order. Cosine similarity throughout; a distance is 1 - cosine. Choices the study left open are ours:

- drift: agents with at least ``MIN_POSTS`` posts; early half = the first floor(n/2) posts, late = the rest;
  drift vector = late centroid - early centroid; the global centroid is the mean of all the society's posts.
- feedback adaptation: an agent's posts in consecutive windows of 10; a post's feedback is its vote score;
  in window w the top and bottom 30% (3 posts each) by score give centroids T and B; with P_w and P_{w+1}
  the centroids of windows w and w+1, net progress = [d(P_{w+1}, B) - d(P_w, B)] - [d(P_{w+1}, T) - d(P_w, T)]
  (positive: moved away from what was received badly, towards what was received well). Windows whose
  posts all have the same score carry no feedback and are skipped.
- interaction impact: for each comment of an agent on another agent's text, with posts of the commenter
  both before and after it: cos(centroid of later posts, the text commented on) - cos(centroid of earlier
  posts, that text).
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from itertools import pairwise
from typing import Any

import numpy as np
import numpy.typing as npt

from molt_society.report.common import missing, records
from molt_society.report.embeddings import vectors_for
from molt_society.report.model import Figure, Item, Scalar, Series
from molt_society.report.sample import AgentSample, agent_bootstrap, agent_sample
from molt_society.report.verdicts import ci_scalars
from molt_society.report.warehouse_source import Warehouse, quoted

MIN_POSTS = 4
WINDOW = 10
SHARE = 0.3

Vec = npt.NDArray[np.floating[Any]]


def _cos(a: Vec, b: Vec) -> float:
    na, nb = float(np.linalg.norm(a)), float(np.linalg.norm(b))
    return float(a @ b / (na * nb)) if na > 0 and nb > 0 else 0.0


@dataclass
class Post:
    at: float
    score: float
    vec: Vec


def drift(posts_by_agent: dict[str, list[Post]], global_centroid: Vec) -> dict[str, list[float]]:
    """Per qualifying agent: drift magnitude, consistency and societal pull (lists in agent order)."""
    early_late: list[tuple[Vec, Vec]] = []
    for posts in posts_by_agent.values():
        if len(posts) < MIN_POSTS:
            continue
        half = len(posts) // 2
        early = np.mean([p.vec for p in posts[:half]], axis=0)
        late = np.mean([p.vec for p in posts[half:]], axis=0)
        early_late.append((early, late))
    if not early_late:
        return {"drift": [], "consistency": [], "pull": []}
    mean_drift = np.mean([late - early for early, late in early_late], axis=0)
    return {
        "drift": [1.0 - _cos(e, late) for e, late in early_late],
        "consistency": [_cos(late - e, mean_drift) for e, late in early_late],
        "pull": [_cos(late, global_centroid) - _cos(e, global_centroid) for e, late in early_late],
    }


def feedback_progress(posts_by_agent: dict[str, list[Post]]) -> list[float]:
    """Net progress of every (agent, window) pair that has a next window and a spread of scores."""
    out: list[float] = []
    k = max(1, round(WINDOW * SHARE))
    for posts in posts_by_agent.values():
        windows = [posts[i : i + WINDOW] for i in range(0, len(posts) - WINDOW + 1, WINDOW)]
        for cur, nxt in pairwise(windows):
            scores = [p.score for p in cur]
            if max(scores) == min(scores):
                continue
            ranked = sorted(cur, key=lambda p: (p.score, p.at))
            bottom = np.mean([p.vec for p in ranked[:k]], axis=0)
            top = np.mean([p.vec for p in ranked[-k:]], axis=0)
            p_now = np.mean([p.vec for p in cur], axis=0)
            p_next = np.mean([p.vec for p in nxt], axis=0)

            def d(a: Vec, b: Vec) -> float:
                return 1.0 - _cos(a, b)

            out.append((d(p_next, bottom) - d(p_now, bottom)) - (d(p_next, top) - d(p_now, top)))
    return out


def interaction_impact(
    posts_by_agent: dict[str, list[Post]], comments: list[tuple[str, float, Vec]]
) -> list[float]:
    """Impact of each (commenter, time, vector of the text commented on) with posts before and after.

    Per agent, prefix sums of its time-ordered post vectors give the centroids of the posts strictly before
    and strictly after each comment (vectorised over the agent's comments).
    """
    by_actor: dict[str, list[tuple[float, Vec]]] = defaultdict(list)
    for actor, at, target in comments:
        by_actor[actor].append((at, target))
    out: list[float] = []
    for actor, mine in by_actor.items():
        posts = posts_by_agent.get(actor, [])
        if len(posts) < 2:
            continue
        times = np.fromiter((p.at for p in posts), dtype=np.float64, count=len(posts))
        order = np.argsort(times, kind="stable")
        times = times[order]
        vecs = np.stack([posts[k].vec for k in order])
        prefix = np.vstack([np.zeros(vecs.shape[1]), np.cumsum(vecs, axis=0)])
        when = np.fromiter((c[0] for c in mine), dtype=np.float64, count=len(mine))
        before: npt.NDArray[np.int64] = np.searchsorted(times, when, side="left")  # posts strictly earlier
        after_start: npt.NDArray[np.int64] = np.searchsorted(times, when, side="right")  # first one later
        n_after = len(times) - after_start
        ok = (before > 0) & (n_after > 0)
        if not ok.any():
            continue
        idx = np.flatnonzero(ok)
        early = prefix[before[idx]] / before[idx, None]
        late = (prefix[-1] - prefix[after_start[idx]]) / n_after[idx, None]
        target = np.stack([mine[k][1] for k in idx])
        out.extend((_rowcos(late, target) - _rowcos(early, target)).tolist())
    return out


def _rowcos(a: Vec, b: Vec) -> npt.NDArray[np.float64]:
    """Row-wise cosine similarity (0 where a row is zero)."""
    na = np.linalg.norm(a, axis=1)
    nb = np.linalg.norm(b, axis=1)
    den = na * nb
    out: npt.NDArray[np.float64] = np.divide(
        np.einsum("ij,ij->i", a, b), den, out=np.zeros_like(den, dtype=np.float64), where=den > 0
    )
    return out


def load(
    wh: Warehouse, society: str, sample: AgentSample | None = None
) -> tuple[dict[str, list[Post]], list[tuple[str, float, Vec]], Vec | None]:
    """Posts per agent in time order, comments on other agents' texts, and the global post centroid: of
    the agents of ``sample`` (comments whose commenter and commented author are both in it), else all."""
    q = quoted(society)
    mine = sample.where("actor") if sample is not None else "1"
    mine_t = sample.where("t.actor") if sample is not None else "1"
    vecs = vectors_for(wh, f"SELECT text_hash FROM texts WHERE society = {q} AND {mine}")
    post_rows = records(
        wh,
        f"""SELECT t.actor AS actor, toUnixTimestamp64Micro(t.occurred_at) AS at, t.text_hash AS h,
                   ifNull(s.score, 0) AS score
            FROM texts AS t
            LEFT JOIN (SELECT post_id, score FROM threads WHERE society = {q}) AS s ON t.post_id = s.post_id
            WHERE t.society = {q} AND t.kind = 'post' AND {mine_t}
            ORDER BY actor, at, t.text_id""",
    )
    by_agent: dict[str, list[Post]] = defaultdict(list)
    for r in post_rows:
        v = vecs.get(int(r["h"]))
        if v is not None:
            by_agent[str(r["actor"])].append(
                Post(int(r["at"]) / 1e6, float(r["score"]), v.astype(np.float64))
            )
    comment_rows = records(
        wh,
        f"""SELECT c.actor AS actor, toUnixTimestamp64Micro(c.occurred_at) AS at, x.text_hash AS h
            FROM (SELECT actor, occurred_at, depth, post_id, parent_id FROM texts
                  WHERE society = {q} AND kind = 'comment' AND {mine}) AS c
            INNER JOIN (SELECT kind, text_id, actor, text_hash FROM texts WHERE society = {q} AND {mine}) AS x
                ON x.text_id = if(c.depth = 1, c.post_id, c.parent_id)
               AND x.kind = if(c.depth = 1, 'post', 'comment')
            WHERE x.actor != c.actor""",
    )
    comments = [
        (str(r["actor"]), int(r["at"]) / 1e6, vecs[int(r["h"])]) for r in comment_rows if int(r["h"]) in vecs
    ]
    all_posts = [p.vec for ps in by_agent.values() for p in ps]
    centroid = np.mean(all_posts, axis=0) if all_posts else None
    return dict(by_agent), comments, centroid


def items(wh: Warehouse, society: str) -> list[Item]:
    sample = agent_sample(wh, society)
    by_agent, comments, centroid = load(wh, society, sample)
    out: list[Item] = [Scalar("individual.sample_agents", f"agents read: {sample.describe()}", sample.agents)]
    if centroid is None:
        why = "the society has no post with an embedding"
        return [
            missing(k, label, why)
            for k, label in (
                ("individual.drift", "mean semantic drift"),
                ("individual.feedback_net_progress", "mean net progress"),
                ("individual.interaction_impact", "mean interaction impact"),
            )
        ]
    d = drift(by_agent, centroid)
    n = len(d["drift"])
    out.append(Scalar("individual.drift_agents", f"agents with at least {MIN_POSTS} posts", n))
    if n == 0:
        why = f"no agent has {MIN_POSTS} posts or more (largest: {max(len(p) for p in by_agent.values())})"
        out += [
            missing("individual.drift", "mean semantic drift (1 - cos early/late)", why),
            missing("individual.drift_consistency", "mean drift consistency", why),
            missing("individual.societal_pull", "mean societal pull", why),
        ]
    else:
        out += [
            Scalar(
                "individual.drift", "mean semantic drift (1 - cos early/late)", float(np.mean(d["drift"]))
            ),
            Scalar(
                "individual.drift_consistency",
                "mean drift consistency (cos to mean drift)",
                float(np.mean(d["consistency"])),
            ),
            Scalar(
                "individual.societal_pull",
                "mean societal pull (towards the global centroid)",
                float(np.mean(d["pull"])),
            ),
            _hist("individual.drift_hist", "Semantic drift per agent", "drift (1 - cosine)", d["drift"]),
        ]
    if sample.sampled and n:
        out += _cis("individual.drift", "mean semantic drift", [np.array([v]) for v in d["drift"]])
        out += _cis("individual.societal_pull", "mean societal pull", [np.array([v]) for v in d["pull"]])
    out += _feedback_items(by_agent, sample.sampled)
    out += _impact_items(by_agent, comments, sample.sampled)
    return out


def _feedback_items(by_agent: dict[str, list[Post]], sampled: bool) -> list[Item]:
    """Feedback adaptation: its windows, its mean net progress (with the sample's interval)."""
    out: list[Item] = []
    fb_groups = [np.asarray(feedback_progress({a: ps}), dtype=np.float64) for a, ps in by_agent.items()]
    fb = [float(v) for g in fb_groups for v in g]
    out.append(
        Scalar("individual.feedback_windows", "agent windows with feedback (pairs of 10 posts)", len(fb))
    )
    if fb:
        out.append(Scalar("individual.feedback_net_progress", "mean net progress", float(np.mean(fb))))
        if sampled:
            out += _cis("individual.feedback_net_progress", "mean net progress", fb_groups)
    else:
        most = max(len(p) for p in by_agent.values())
        out.append(
            missing(
                "individual.feedback_net_progress",
                "mean net progress",
                f"needs an agent with {2 * WINDOW} posts whose scores differ within a window of "
                f"{WINDOW} (most posts by one agent: {most})",
            )
        )
    return out


def _impact_items(
    by_agent: dict[str, list[Post]], comments: list[tuple[str, float, Vec]], sampled: bool
) -> list[Item]:
    """Interaction impact: its pairs, its mean (with the sample's interval)."""
    out: list[Item] = []
    by_commenter: dict[str, list[tuple[str, float, Vec]]] = defaultdict(list)
    for c in comments:
        by_commenter[c[0]].append(c)
    imp_groups = [
        np.asarray(interaction_impact(by_agent, cs), dtype=np.float64) for cs in by_commenter.values()
    ]
    imp = [float(v) for g in imp_groups for v in g]
    out.append(
        Scalar("individual.impact_pairs", "comments with the commenter's posts before and after", len(imp))
    )
    if imp:
        out.append(Scalar("individual.interaction_impact", "mean interaction impact", float(np.mean(imp))))
        if sampled:
            out += _cis("individual.interaction_impact", "mean interaction impact", imp_groups)
    else:
        out.append(
            missing(
                "individual.interaction_impact",
                "mean interaction impact",
                "no agent commented on another's text between two of its own posts",
            )
        )
    return out


def _cis(key: str, label: str, groups: list[npt.NDArray[np.float64]]) -> list[Scalar]:
    """The 95% bootstrap interval of a mean over the sampled agents (``report.sample.agent_bootstrap``)."""
    why = "fewer than two sampled agents have a value"
    return ci_scalars(key, f"{label} over the sampled agents", agent_bootstrap(groups), why)


def _hist(key: str, title: str, x_label: str, values: list[float], bins: int = 20) -> Figure:
    counts, edges = np.histogram(np.asarray(values, dtype=np.float64), bins=bins)
    mids = ((edges[:-1] + edges[1:]) / 2).tolist()
    return Figure(key, title, x_label, "agents", [Series("agents", mids, [float(c) for c in counts], "bars")])
