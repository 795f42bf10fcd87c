"""Comparators from another published crawl: Li 2026's 91,792 posts and 405,707 comments (2026-01-27..02-05).

Source: ln9527/moltbook-research at 98514e1, ``results/a1_platform_stats.json`` and
``results/a4_thread_structure.json``, copied in ``../shared/data/moltbook/reference-stats/`` (MIT). Each
value of ours here is computed on the population that crawl used:

- posts without a comment and the mean comment count per post use the platform's ``comment_count`` of
  each post (a4 ``thread_length`` and ``posts_with_comments``: 37,402 posts with a count above 0, mean
  23.31, while only 405,707 comments were crawled). Ours: the count an imported post reported (the
  ``reported_comments`` of its vote tally), else the comments stored (a simulated society: the same);
- comment depth shares are over every crawled comment, top-level = their depth 0 = our depth 1;
- posts per author over the authors of at least one post (a1 ``posts_per_author``), agent ``unknown``
  (records without an author) left out as the crawl's groupby drops a missing author;
- upvote Gini over every post (every comment) with its ``upvotes`` (not the net score), zeros included.
  Gini as the repository's ``gini_coefficient`` (``analysis/descriptive_stats.py``): sorted x,
  sum((2i - n - 1) x_i) / (n sum x), 0 when the sum is 0.

Each value has a bootstrap 95% CI (``<key>_ci_low``/``_ci_high``; its posts, comments or authors
resampled, ``report.verdicts.bootstrap_values``), which ``report.comparisons`` shows beside the published.

Stored comments per post (405,707 / 91,792 = 4.42) and the depth shares carry their published values in
the thread section (``threads.*``); the table here repeats them beside the others.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import numpy.typing as npt

from molt_society.report.common import missing, records
from molt_society.report.model import Item, Scalar, Table
from molt_society.report.published import PUBLISHED
from molt_society.report.resample import gini, share_zero
from molt_society.report.verdicts import bootstrap_values, ci_scalars
from molt_society.report.warehouse_source import Warehouse, quoted

Histogram = list[tuple[int, int]]  # (value, how many)
FloatArray = npt.NDArray[np.float64]


def _expand(hist: Histogram) -> npt.NDArray[np.float64]:
    return np.repeat(np.array([v for v, _ in hist], dtype=float), [c for _, c in hist])


def _hist(wh: Warehouse, sql: str) -> Histogram:
    return [(int(r["v"]), int(r["n"])) for r in records(wh, sql)]


def _post_counts(wh: Warehouse, q: str) -> tuple[Histogram, Histogram]:
    """Histograms of each post's platform comment count and of its upvotes."""
    inner = (
        "SELECT post_id, "
        "countIf(type = 'comment_created') AS stored, "
        "countIf(type = 'vote_tallied' AND target_type = 'post' AND target_id = post_id "
        "AND JSONType(body, 'reported_comments') IN ('Int64', 'UInt64')) AS has_reported, "
        "maxIf(JSONExtractInt(body, 'reported_comments'), type = 'vote_tallied' AND target_type = 'post' "
        "AND target_id = post_id) AS reported, "
        "countIf(type = 'vote_cast' AND target_type = 'post' AND target_id = post_id AND vote = 1) "
        "+ sumIf(JSONExtractInt(body, 'upvotes'), type = 'vote_tallied' AND target_type = 'post' "
        "AND target_id = post_id) AS upvotes "
        f"FROM events FINAL WHERE society = {q} AND post_id != '' "
        "AND type IN ('post_created', 'comment_created', 'vote_cast', 'vote_tallied') "
        "GROUP BY post_id HAVING countIf(type = 'post_created') > 0"
    )
    counts = _hist(
        wh,
        "SELECT toInt64(if(has_reported > 0, reported, toInt64(stored))) AS v, count() AS n "
        f"FROM ({inner}) GROUP BY v",
    )
    upvotes = _hist(wh, f"SELECT toInt64(upvotes) AS v, count() AS n FROM ({inner}) GROUP BY v")
    return counts, upvotes


def _comment_upvotes(wh: Warehouse, q: str) -> Histogram:
    return _hist(
        wh,
        "SELECT toInt64(ifNull(v.up, 0)) AS v, count() AS n FROM "
        f"(SELECT DISTINCT comment_id FROM events FINAL WHERE society = {q} "
        "AND type = 'comment_created') AS c "
        "LEFT JOIN (SELECT target_id, countIf(type = 'vote_cast' AND vote = 1) "
        "+ sumIf(JSONExtractInt(body, 'upvotes'), type = 'vote_tallied') AS up "
        f"FROM events FINAL WHERE society = {q} AND target_type = 'comment' "
        "AND type IN ('vote_cast', 'vote_tallied') GROUP BY target_id) AS v ON c.comment_id = v.target_id "
        "GROUP BY v",
    )


def _posts_per_author(wh: Warehouse, q: str) -> Histogram:
    return _hist(
        wh,
        "SELECT posts AS v, count() AS n FROM (SELECT actor, count() AS posts FROM events FINAL "
        f"WHERE society = {q} AND type = 'post_created' AND actor NOT IN ('', 'unknown') GROUP BY actor) "
        "GROUP BY v",
    )


def _depths(wh: Warehouse, q: str) -> Histogram:
    return _hist(
        wh,
        f"SELECT depth AS v, count() AS n FROM events FINAL WHERE society = {q} AND type = 'comment_created' "
        "GROUP BY v",
    )


def items(wh: Warehouse, society: str) -> list[Item]:
    q = quoted(society)
    counts, post_up = _post_counts(wh, q)
    comment_up = _comment_upvotes(wh, q)
    per_author = _posts_per_author(wh, q)
    depths = dict(_depths(wh, q))
    out: list[Item] = []
    c = _expand(counts)
    if len(c):
        out += [
            Scalar(
                "reference.share_posts_without_comment",
                "share of posts whose platform comment count is 0 (imported: the count the post reported)",
                float(np.mean(c == 0)),
            ),
            Scalar("reference.mean_comment_count", "mean platform comment count per post", float(np.mean(c))),
            Scalar("reference.post_upvotes_gini", "Gini of upvotes per post", gini(_expand(post_up))),
        ]
    else:
        why = "the society has no post"
        out += [
            missing(
                "reference.share_posts_without_comment",
                "share of posts whose platform comment count is 0",
                why,
            ),
            missing("reference.mean_comment_count", "mean platform comment count per post", why),
            missing("reference.post_upvotes_gini", "Gini of upvotes per post", why),
        ]
    cu = _expand(comment_up)
    out.append(
        Scalar("reference.comment_upvotes_gini", "Gini of upvotes per comment", gini(cu))
        if len(cu)
        else missing(
            "reference.comment_upvotes_gini", "Gini of upvotes per comment", "the society has no comment"
        )
    )
    pa = _expand(per_author)
    labels = [
        ("reference.posts_per_author_mean", "posts per author (mean, authors of >= 1 post)"),
        ("reference.posts_per_author_median", "posts per author (median)"),
        ("reference.posts_per_author_gini", "Gini of posts per author"),
    ]
    if len(pa):
        values = [float(np.mean(pa)), float(np.median(pa)), gini(pa)]
        out += [Scalar(k, lab, v) for (k, lab), v in zip(labels, values, strict=True)]
    else:
        out += [missing(k, lab, "no post has a known author") for k, lab in labels]
    out.append(_table(out, depths, sum(n for _, n in counts)))
    return out + _cis(c, _expand(post_up), cu, pa)


def _cis(counts: FloatArray, post_up: FloatArray, comment_up: FloatArray, authors: FloatArray) -> list[Item]:
    """Bootstrap 95% CIs (posts, comments or authors resampled) of every value above."""
    readings: list[tuple[str, str, FloatArray, Callable[[FloatArray], float]]] = [
        ("reference.share_posts_without_comment", "share of posts without a comment", counts, share_zero),
        ("reference.mean_comment_count", "mean platform comment count", counts, np.mean),
        ("reference.post_upvotes_gini", "Gini of upvotes per post", post_up, gini),
        ("reference.comment_upvotes_gini", "Gini of upvotes per comment", comment_up, gini),
        ("reference.posts_per_author_mean", "posts per author, mean", authors, np.mean),
        ("reference.posts_per_author_median", "posts per author, median", authors, np.median),
        ("reference.posts_per_author_gini", "Gini of posts per author", authors, gini),
    ]
    out: list[Item] = []
    for seed, (key, label, values, statistic) in enumerate(readings):
        out += ci_scalars(key, label, bootstrap_values(values, statistic, seed=seed))
    return out


def _table(scalars: list[Item], depths: dict[int, int], posts: int) -> Table:
    """Every comparator of the Li crawl beside ours, with the population each is computed on."""
    n_comments = sum(depths.values())

    def share(low: int, high: int) -> float | None:
        """Share of comments with low <= depth <= high."""
        if not n_comments:
            return None
        return sum(n for d, n in depths.items() if low <= d <= high) / n_comments

    ours: dict[str, float | int | None] = {s.key: s.value for s in scalars if isinstance(s, Scalar)}
    ours["threads.share_top_level_comments"] = share(1, 1)
    ours["threads.share_reply_comments"] = share(2, 1 << 32)
    ours["threads.share_depth_3_plus_comments"] = share(3, 1 << 32)
    ours["threads.max_depth"] = max(depths) if depths else None
    ours["threads.comments_per_post"] = n_comments / posts if posts else None
    rows = [
        ("comments that are top-level (their depth 0)", "threads.share_top_level_comments", "all comments"),
        ("comments that are replies (their depth >= 1)", "threads.share_reply_comments", "all comments"),
        ("comments at depth >= 3 (their depth >= 2)", "threads.share_depth_3_plus_comments", "all comments"),
        ("deepest comment (top-level = 1)", "threads.max_depth", "all comments"),
        ("stored comments per post", "threads.comments_per_post", "comments present / posts"),
        (
            "posts without a comment",
            "reference.share_posts_without_comment",
            "platform comment_count per post",
        ),
        ("mean comment count per post", "reference.mean_comment_count", "platform comment_count per post"),
        ("posts per author, mean", "reference.posts_per_author_mean", "authors of >= 1 post"),
        ("posts per author, median", "reference.posts_per_author_median", "authors of >= 1 post"),
        ("Gini of posts per author", "reference.posts_per_author_gini", "authors of >= 1 post"),
        ("Gini of upvotes per post", "reference.post_upvotes_gini", "all posts, upvotes"),
        ("Gini of upvotes per comment", "reference.comment_upvotes_gini", "all comments, upvotes"),
    ]
    return Table(
        key="reference.li_crawl",
        title="Beside Li 2026's crawl (91,792 posts, 405,707 comments; ln9527/moltbook-research results/)",
        columns=["quantity", "ours", "Li 2026", "population", "source"],
        rows=[[label, ours.get(key), PUBLISHED[key][0], pop, PUBLISHED[key][1]] for label, key, pop in rows],
    )
