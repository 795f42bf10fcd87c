"""The moments a society is compared with MoltBook on, each with the band it must lie in.

One accumulator (``Moments``) takes posts, comments and vote counts one at a time, from any source (a
dump's events, the events of an offline simulation, rows of the ``events`` table), and computes every
moment at the end. The moments are over commented posts, comments and authors, so that a crawl's
selection of posts (a crawl keeps what it found; a simulated society keeps everything) matters little.

Definitions (``MOMENTS`` lists them with their bands):

- depth: a top-level comment has depth 1; the shares are over every comment;
- per commented post: comments present and distinct commenters (the median, the mean, and the mean
  over the decile of posts with the most comments: attention by popularity);
- Gini of posts per author, over authors of at least one post; mean posts per author;
- posting rhythm: per author with at least 3 posts, the coefficient of variation (population standard
  deviation over mean) of the gaps between consecutive posts; the median over authors, and the share of
  those authors below 0.5 (the "autonomous", regular posters of the Moltbook Illusion study);
- the daily cycle: the coefficient of variation of the posts and comments over the 24 hours of the day
  (UTC);
- growth: the share of posts and comments in the second half of the observed period, and the share of
  agents first seen (posting or commenting) in its first half;
- concentration: the share of comments written by the top 1% of commenters (at least one commenter);
- the reply graph: an edge from a commenter to the author of the parent comment, or of the post for a
  top-level comment; self-edges dropped; reciprocity = share of distinct directed edges whose reverse is
  an edge too (networkx's ``reciprocity``);
- timing: per commented post, seconds from the post to its first comment (median), and seconds from a
  post to each of its comments (median);
- influence: PageRank (damping 0.85) on each UTC day's reply graph, share of the top node, the mean
  over the days with at least 20 edges;
- votes: upvotes / (upvotes + downvotes) over posts.

A band is absolute (``|sim - real| <= width``) or relative (``<= width * |real|``); ``distance`` is
``|sim - real|`` over the band's width, so a moment lies in its band when its distance is at most 1, and the
fit minimises the sum of squared distances.
"""

from __future__ import annotations

import math
from collections import Counter, defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Literal

import numpy as np

from molt_society.agents.offline import gini


@dataclass(frozen=True)
class Band:
    kind: Literal["abs", "rel"]
    width: float

    def half_width(self, real: float) -> float:
        w = self.width if self.kind == "abs" else self.width * abs(real)
        return max(w, 1e-9)

    def describe(self) -> str:
        return f"± {self.width:g}" if self.kind == "abs" else f"± {100 * self.width:g}%"


@dataclass(frozen=True)
class Moment:
    key: str
    label: str
    band: Band
    core: bool = False  # one of the nine moments the acceptance names


MOMENTS: tuple[Moment, ...] = (
    Moment("top_level_share", "share of comments that are top-level", Band("abs", 0.03), core=True),
    Moment("depth_2_share", "share of comments at depth 2", Band("abs", 0.03)),
    Moment("depth_3_plus_share", "share of comments at depth 3 or more", Band("abs", 0.015)),
    Moment(
        "comments_per_commented_post_median",
        "comments per commented post, median",
        Band("rel", 0.35),
        core=True,
    ),
    Moment("comments_per_commented_post_mean", "comments per commented post, mean", Band("rel", 0.35)),
    Moment(
        "commenters_per_commented_post_mean",
        "distinct commenters per commented post, mean",
        Band("rel", 0.25),
        core=True,
    ),
    Moment(
        "commenters_top_decile_mean",
        "distinct commenters per post, mean over the 10% most commented",
        Band("rel", 0.35),
    ),
    Moment("posts_per_author_gini", "Gini of posts per author", Band("abs", 0.08), core=True),
    Moment("posts_per_author_mean", "posts per author, mean", Band("rel", 0.25)),
    Moment(
        "post_gap_cov_median",
        "median over authors (>= 3 posts) of the CoV of their gaps between posts",
        Band("abs", 0.12),
        core=True,
    ),
    Moment("regular_poster_share", "share of those authors with a gap CoV under 0.5", Band("abs", 0.1)),
    Moment("hourly_cv", "CV of activity over the 24 hours of the day", Band("rel", 0.25), core=True),
    Moment("second_half_share", "share of activity in the second half of the period", Band("abs", 0.08)),
    Moment("agents_new_first_half", "share of agents first seen in the first half", Band("abs", 0.08)),
    Moment(
        "top1pct_comment_share",
        "share of comments by the top 1% of commenters",
        Band("abs", 0.07),
        core=True,
    ),
    Moment("reciprocity", "reciprocity of the reply graph", Band("abs", 0.05), core=True),
    Moment(
        "first_comment_median_s",
        "median seconds from a post to its first comment",
        Band("rel", 0.5),
        core=True,
    ),
    Moment("comment_delay_median_s", "median seconds from a post to each comment", Band("rel", 0.5)),
    Moment("pagerank_top1_daily", "PageRank share of the top agent per day, mean", Band("abs", 0.05)),
    Moment("upvote_share", "upvotes / all votes on posts", Band("abs", 0.05)),
)
BY_KEY = {m.key: m for m in MOMENTS}
CORE = tuple(m.key for m in MOMENTS if m.core)


def distance(key: str, sim: float | None, real: float | None) -> float | None:
    """``|sim - real|`` over the moment's band half-width (None when either is missing)."""
    if sim is None or real is None or not (math.isfinite(sim) and math.isfinite(real)):
        return None
    return abs(sim - real) / BY_KEY[key].band.half_width(real)


class Moments:
    """Accumulates posts, comments and votes; ``result()`` computes every moment (see module docstring)."""

    def __init__(self) -> None:
        self.post_author: dict[str, str] = {}
        self.post_time: dict[str, float] = {}
        self.comment_author: dict[str, str] = {}
        self.comments: list[tuple[str, str | None, str, float, int]] = []  # post, parent, author, t, depth
        self.up = 0
        self.down = 0

    def add_post(self, post_id: str, author: str, t: float) -> None:
        self.post_author[post_id] = author
        self.post_time[post_id] = t

    def add_comment(
        self, comment_id: str, post_id: str, parent_id: str | None, author: str, t: float, depth: int
    ) -> None:
        self.comment_author[comment_id] = author
        self.comments.append((post_id, parent_id, author, t, depth))

    def add_post_votes(self, up: int, down: int) -> None:
        self.up += up
        self.down += down

    # ------------------------------------------------------------------ result
    def result(self) -> dict[str, float | None]:
        out: dict[str, float | None] = dict.fromkeys(BY_KEY)
        out |= self._threads()
        out |= self._authors()
        out |= self._time()
        out |= self._graph()
        total = self.up + self.down
        out["upvote_share"] = self.up / total if total else None
        return out

    def _threads(self) -> dict[str, float | None]:
        n = len(self.comments)
        if not n:
            return {}
        depths = Counter(min(c[4], 3) for c in self.comments)
        per_post = Counter(c[0] for c in self.comments)
        who: dict[str, set[str]] = defaultdict(set)
        for post, _parent, author, _t, _d in self.comments:
            who[post].add(author)
        counts = np.array(list(per_post.values()), dtype=float)
        people = np.array([len(who[p]) for p in per_post], dtype=float)
        top = np.argsort(-counts, kind="stable")[: max(1, len(counts) // 10)]
        by_commenter = np.sort(np.array(list(Counter(c[2] for c in self.comments).values()), float))[::-1]
        k = max(1, math.ceil(0.01 * len(by_commenter)))
        return {
            "top_level_share": depths[1] / n,
            "depth_2_share": depths[2] / n,
            "depth_3_plus_share": depths[3] / n,
            "comments_per_commented_post_median": float(np.median(counts)),
            "comments_per_commented_post_mean": float(counts.mean()),
            "commenters_per_commented_post_mean": float(people.mean()),
            "commenters_top_decile_mean": float(people[top].mean()),
            "top1pct_comment_share": float(by_commenter[:k].sum() / n),
        }

    def _authors(self) -> dict[str, float | None]:
        if not self.post_author:
            return {}
        per_author = Counter(self.post_author.values())
        times: dict[str, list[float]] = defaultdict(list)
        for post, author in self.post_author.items():
            times[author].append(self.post_time[post])
        covs = []
        for ts in times.values():
            if len(ts) >= 3:
                gaps = np.diff(np.sort(np.array(ts)))
                if gaps.mean() > 0:
                    covs.append(float(gaps.std() / gaps.mean()))
        return {
            "posts_per_author_gini": gini(np.array(list(per_author.values()), dtype=float)),
            "posts_per_author_mean": len(self.post_author) / len(per_author),
            "post_gap_cov_median": float(np.median(covs)) if covs else None,
            "regular_poster_share": float(np.mean(np.array(covs) < 0.5)) if covs else None,
        }

    def _time(self) -> dict[str, float | None]:
        stamps = np.array(list(self.post_time.values()) + [c[3] for c in self.comments], dtype=float)
        if len(stamps) < 2:
            return {}
        hours = np.bincount(((stamps // 3600) % 24).astype(np.int64), minlength=24).astype(float)
        lo, hi = float(stamps.min()), float(stamps.max())
        mid = (lo + hi) / 2
        first_seen: dict[str, float] = {}
        for post, author in self.post_author.items():
            t = self.post_time[post]
            first_seen[author] = min(t, first_seen.get(author, t))
        for _p, _q, author, t, _d in self.comments:
            first_seen[author] = min(t, first_seen.get(author, t))
        seen = np.array(list(first_seen.values()))
        out: dict[str, float | None] = {
            "hourly_cv": float(hours.std() / hours.mean()),
            "second_half_share": float(np.mean(stamps > mid)),
            "agents_new_first_half": float(np.mean(seen <= mid)),
        }
        first: dict[str, float] = {}
        delays = []
        for post, _parent, _a, t, _d in self.comments:
            posted = self.post_time.get(post)
            if posted is None:
                continue
            delays.append(t - posted)
            first[post] = min(t, first.get(post, t))
        if delays:
            out["comment_delay_median_s"] = float(np.median(delays))
            out["first_comment_median_s"] = float(
                np.median([t - self.post_time[p] for p, t in first.items()])
            )
        return out

    def _edges(self) -> Iterable[tuple[str, str, float]]:
        for post, parent, author, t, _d in self.comments:
            target = self.comment_author.get(parent) if parent else self.post_author.get(post)
            if target is not None and target != author:
                yield author, target, t

    def _graph(self) -> dict[str, float | None]:
        import networkx as nx

        edges = set()
        by_day: dict[int, Counter[tuple[str, str]]] = defaultdict(Counter)
        for src, dst, t in self._edges():
            edges.add((src, dst))
            by_day[int(t // 86400)][(src, dst)] += 1
        if not edges:
            return {}
        mutual = sum(1 for s, d in edges if (d, s) in edges)
        shares = []
        for day in sorted(by_day):
            pairs = by_day[day]
            if len(pairs) < 20:
                continue
            g = nx.DiGraph()
            g.add_weighted_edges_from((s, d, w) for (s, d), w in pairs.items())
            shares.append(max(nx.pagerank(g, alpha=0.85, weight="weight").values()))
        return {
            "reciprocity": mutual / len(edges),
            "pagerank_top1_daily": float(np.mean(shares)) if shares else None,
        }


def utc_seconds(at: datetime) -> float:
    """Seconds since the epoch of an aware (or UTC-naive) datetime."""
    return (at if at.tzinfo else at.replace(tzinfo=UTC)).timestamp()
