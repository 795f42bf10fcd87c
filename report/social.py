"""Social layer of the socialization study, and the thread shape: activity, lexical turnover, semantic
stability (``../shared/notes/metrics.md``).

Activity, thread shape and turnover are the views ``activity_daily``, ``threads`` and
``lexical_turnover_daily``; semantic stability is ``semantic_daily`` plus the 10-nearest-neighbour
similarity, which needs every pair of a day's texts and is computed here with numpy.
"""

from __future__ import annotations

from collections import defaultdict

import numpy as np
import numpy.typing as npt

from molt_society.report.common import epoch, missing, num, records
from molt_society.report.embeddings import MODEL, vectors_for
from molt_society.report.model import Figure, Item, Scalar, Series, Style, Table
from molt_society.report.source import Warehouse, quoted

KNN = 10
KNN_QUERIES = 2_000  # per day at most this many texts (seeded sample) look for their 10 nearest neighbours
HEAVY_COPIES = 1_000  # texts with more copies than this are left out of semantic stability
SEMANTIC_KEYS = [
    ("semantic.texts", "texts embedded (after removing texts with > 1,000 copies)"),
    ("semantic.centroid_similarity", "mean centroid similarity between consecutive days"),
    ("semantic.mean_pairwise", "mean pairwise similarity (mean over days)"),
    (
        "semantic.knn10",
        f"mean similarity to the {KNN} nearest neighbours (mean over days; at most {KNN_QUERIES:,} "
        "sampled texts of a day search among all of its texts)",
    ),
]
ACTIVITY_KEYS = [
    ("activity.days", "days with activity"),
    ("activity.posts", "posts"),
    ("activity.comments", "comments"),
    ("activity.votes", "votes cast"),
    ("activity.agents", "active agents (ever)"),
    ("activity.posts_per_day", "posts per day (mean)"),
]


def activity(wh: Warehouse, society: str) -> list[Item]:
    rows = records(
        wh,
        f"SELECT day, posts, comments, votes, active_agents, new_agents FROM activity_daily "
        f"WHERE society = {quoted(society)} ORDER BY day",
    )
    if not rows:
        reason = "the society has no post, comment or vote with a time"
        return [missing(k, label, reason) for k, label in ACTIVITY_KEYS]
    xs = [epoch(r["day"]) for r in rows]
    fig = Figure(
        key="activity.daily",
        title="Activity per day",
        x_label="day (UTC)",
        y_label="count",
        x_kind="time",
        series=[
            Series(name=col.replace("_", " "), x=xs, y=[float(r[col]) for r in rows], style="line")
            for col in ("posts", "comments", "votes", "new_agents")
        ],
    )
    if len(rows) == 1:
        fig.series = [Series(name=s.name, x=s.x, y=s.y, style="points") for s in fig.series]
    table = Table(
        key="activity.table",
        title="Activity per day",
        columns=["day", "posts", "comments", "votes", "active agents", "new agents"],
        rows=[
            [str(r["day"]), r["posts"], r["comments"], r["votes"], r["active_agents"], r["new_agents"]]
            for r in rows
        ],
    )
    total = {c: sum(int(r[c]) for r in rows) for c in ("posts", "comments", "votes", "new_agents")}
    values: list[float] = [len(rows), total["posts"], total["comments"], total["votes"], total["new_agents"]]
    values.append(total["posts"] / len(rows))
    return [
        *(Scalar(k, label, v) for (k, label), v in zip(ACTIVITY_KEYS, values, strict=True)),
        fig,
        table,
    ]


def threads(wh: Warehouse, society: str) -> list[Item]:
    """Reply depth and thread size (``threads`` view; top-level comment = depth 1)."""
    q = quoted(society)
    post_rows = records(
        wh,
        f"SELECT max_depth AS depth, count() AS posts, sum(comments) AS comments FROM threads "
        f"WHERE society = {q} GROUP BY depth ORDER BY depth",
    )
    comment_rows = records(
        wh,
        f"SELECT depth, count() AS comments FROM events FINAL WHERE society = {q} "
        f"AND type = 'comment_created' GROUP BY depth ORDER BY depth",
    )
    posts = sum(int(r["posts"]) for r in post_rows)
    comments = sum(int(r["comments"]) for r in comment_rows)
    out: list[Item] = [
        Scalar("threads.posts", "posts", posts),
        Scalar("threads.comments", "comments", comments),
    ]
    if posts == 0:
        why = "the society has no post"
        out += [
            missing("threads.share_posts_without_comment", "share of posts without a comment", why),
            missing("threads.comments_per_post", "comments per post", why),
            missing("threads.mean_depth_all", "mean thread depth (all posts)", why),
            missing("threads.mean_depth_commented", "mean thread depth (posts with a comment)", why),
        ]
    else:
        zero = sum(int(r["posts"]) for r in post_rows if int(r["depth"]) == 0)
        with_c = [r for r in post_rows if int(r["depth"]) > 0]
        out += [
            Scalar("threads.share_posts_without_comment", "share of posts without a comment", zero / posts),
            Scalar("threads.comments_per_post", "comments per post", comments / posts),
            Scalar(
                "threads.mean_depth_all",
                "mean thread depth (all posts)",
                sum(int(r["depth"]) * int(r["posts"]) for r in post_rows) / posts,
            ),
            Scalar(
                "threads.mean_depth_commented",
                "mean thread depth (posts with a comment)",
                sum(int(r["depth"]) * int(r["posts"]) for r in with_c) / sum(int(r["posts"]) for r in with_c),
            )
            if with_c
            else missing(
                "threads.mean_depth_commented",
                "mean thread depth (posts with a comment)",
                "no post has a comment",
            ),
        ]
    if comments == 0:
        why = "the society has no comment"
        out += [
            missing(
                "threads.share_top_level_comments", "share of comments that are top-level (depth 1)", why
            ),
            missing("threads.share_reply_comments", "share of comments that are replies (depth >= 2)", why),
            missing("threads.share_depth_3_plus_comments", "share of comments at depth >= 3", why),
            missing("threads.max_depth", "deepest comment", why),
        ]
    else:
        by_depth = {int(r["depth"]): int(r["comments"]) for r in comment_rows}
        out += [
            Scalar(
                "threads.share_top_level_comments",
                "share of comments that are top-level (depth 1)",
                by_depth.get(1, 0) / comments,
            ),
            Scalar(
                "threads.share_reply_comments",
                "share of comments that are replies (depth >= 2)",
                sum(v for d, v in by_depth.items() if d >= 2) / comments,
            ),
            Scalar(
                "threads.share_depth_3_plus_comments",
                "share of comments at depth >= 3",
                sum(v for d, v in by_depth.items() if d >= 3) / comments,
            ),
            Scalar("threads.max_depth", "deepest comment", max(by_depth)),
        ]
    if post_rows:
        out.append(
            Figure(
                key="threads.depth_hist",
                title="Thread depth (deepest comment; 0 = no comment)",
                x_label="depth",
                y_label="posts",
                log_y=True,
                series=[
                    Series(
                        "posts",
                        [float(r["depth"]) for r in post_rows],
                        [float(r["posts"]) for r in post_rows],
                        style="bars",
                    )
                ],
            )
        )
    return out


def lexical_turnover(wh: Warehouse, society: str) -> list[Item]:
    """Births and deaths of 1- to 5-grams per day (view ``lexical_turnover_daily``).

    Symmetric, as in the socialization study: among n-grams used at least twice, an n-gram is born on the
    day of its first use and dies on the day after its last use; the first day of the observation period
    censors births (the n-gram may be older) and its last day censors deaths (it may be used again), so
    neither end inflates a rate. The means are over the days that have a rate (a rate is NULL on the
    first day and when its denominator, the n-grams active that day or the day before, is 0).
    """
    rows = records(
        wh,
        f"SELECT n, day, active, births, birth_rate, deaths, death_rate FROM lexical_turnover_daily "
        f"WHERE society = {quoted(society)} ORDER BY n, day",
    )
    if not rows:
        reason = "the society has no post or comment"
        return [
            missing(f"lexical.birth_rate_n{n}", f"mean birth rate, {n}-grams", reason) for n in range(1, 6)
        ]
    days = len({r["day"] for r in rows})
    out: list[Item] = []
    births: list[Series] = []
    deaths: list[Series] = []
    for n in range(1, 6):
        mine = [r for r in rows if int(r["n"]) == n]
        xs = [epoch(r["day"]) for r in mine]
        b = [num(r["birth_rate"]) for r in mine]
        d = [num(r["death_rate"]) for r in mine]
        label_b = f"mean birth rate, {n}-grams (first used that day / active that day)"
        label_d = f"mean death rate, {n}-grams (last used the day before / active the day before)"
        if days < 2:
            why = "the observation period is one day: the first day censors births and deaths"
            out += [
                missing(f"lexical.birth_rate_n{n}", label_b, why),
                missing(f"lexical.death_rate_n{n}", label_d, why),
            ]
        else:
            bv = [x for x in b if x is not None]
            dv = [x for x in d if x is not None]
            out.append(
                Scalar(f"lexical.birth_rate_n{n}", label_b, float(np.mean(bv)))
                if bv
                else missing(
                    f"lexical.birth_rate_n{n}",
                    label_b,
                    f"no day after the first uses a {n}-gram that occurs at least twice",
                )
            )
            out.append(
                Scalar(f"lexical.death_rate_n{n}", label_d, float(np.mean(dv)))
                if dv
                else missing(
                    f"lexical.death_rate_n{n}",
                    label_d,
                    f"no day before the last uses a {n}-gram that occurs at least twice",
                )
            )
        births.append(Series(f"n={n}", xs, b))
        deaths.append(Series(f"n={n}", xs, d))
    style = "points" if days == 1 else "line"
    for s in births + deaths:
        s.style = style  # type: ignore[assignment]
    one_day = (
        None if days > 1 else "the observation period is one day: the first day censors births and deaths"
    )
    out.append(
        Figure(
            "lexical.birth",
            "Lexical births per day (n-grams first used that day / active that day)",
            "day (UTC)",
            "birth rate",
            births,
            x_kind="time",
            reason=one_day,
        )
    )
    out.append(
        Figure(
            "lexical.death",
            "Lexical deaths per day (n-grams last used the day before / active the day before)",
            "day (UTC)",
            "death rate",
            deaths,
            x_kind="time",
            reason=one_day,
        )
    )
    out.append(
        Table(
            "lexical.table",
            "Lexical turnover per n and day (first day: births and deaths censored)",
            ["n", "day", "active", "births", "birth rate", "deaths", "death rate"],
            [
                [
                    r["n"],
                    str(r["day"]),
                    r["active"],
                    r["births"],
                    num(r["birth_rate"]),
                    r["deaths"],
                    num(r["death_rate"]),
                ]
                for r in rows
            ],
        )
    )
    return out


def knn_similarity(
    vectors: npt.NDArray[np.float32], k: int = KNN, queries: int | None = None, seed: int = 0
) -> float | None:
    """Mean over texts of the mean cosine similarity to their ``k`` nearest other texts (unit vectors).

    With ``queries`` set and fewer than the day's texts, that many texts (a seeded sample) are the queries;
    their neighbours are searched among all texts. None with fewer than k + 1 texts.
    """
    n = len(vectors)
    if n < k + 1:
        return None
    idx = np.arange(n)
    if queries is not None and queries < n:
        idx = np.sort(np.random.default_rng(seed).choice(n, size=queries, replace=False))
    means = []
    for start in range(0, len(idx), 1024):
        rows = idx[start : start + 1024]
        sims = vectors[rows] @ vectors.T
        sims[np.arange(len(rows)), rows] = -np.inf  # not its own neighbour
        top = np.partition(sims, n - k, axis=1)[:, n - k :]
        means.append(top.mean(axis=1, dtype=np.float64))
    return float(np.concatenate(means).mean())


def semantic(wh: Warehouse, society: str) -> list[Item]:
    q = quoted(society)
    daily = records(
        wh,
        f"SELECT day, texts, mean_pairwise_similarity AS pairwise, centroid_similarity_prev_day AS centroid "
        f"FROM semantic_daily WHERE society = {q} ORDER BY day",
    )
    if not daily:
        reason = "the society has no text (posts or comments) with an embedding"
        return [missing(k, label, reason) for k, label in SEMANTIC_KEYS]
    heavy = (
        f"SELECT society, text_hash FROM texts WHERE society = {q} GROUP BY society, text_hash "
        f"HAVING count() > {HEAVY_COPIES}"
    )
    # the day of every kept text, and each distinct text's vector fetched once
    by_day: dict[str, list[int]] = defaultdict(list)
    for day, h in wh.query(
        f"SELECT toString(toDate(occurred_at)), text_hash FROM texts WHERE society = {q} "
        f"AND (society, text_hash) NOT IN ({heavy})"
    ).rows:
        by_day[str(day)].append(int(h))
    vecs = vectors_for(wh, f"SELECT DISTINCT text_hash FROM texts WHERE society = {q}")
    knn: list[float | None] = []
    for r in daily:
        hashes = [h for h in by_day.get(str(r["day"]), []) if h in vecs]
        mat = np.stack([vecs[h] for h in hashes]) if hashes else np.zeros((0, 1), np.float32)
        knn.append(knn_similarity(mat, queries=KNN_QUERIES))
    xs = [epoch(r["day"]) for r in daily]
    style: Style = "points" if len(daily) == 1 else "line"
    fig = Figure(
        "semantic.daily",
        f"Semantic stability per day ({MODEL}, cosine)",
        "day (UTC)",
        "similarity",
        [
            Series("centroid vs previous day", xs, [num(r["centroid"]) for r in daily], style=style),
            Series("mean pairwise", xs, [num(r["pairwise"]) for r in daily], style=style),
            Series(f"mean of {KNN} nearest", xs, knn, style=style),
        ],
        x_kind="time",
    )

    def mean_of(values: list[float | None], key: str, label: str, why: str) -> Scalar:
        vals = [v for v in values if v is not None]
        return Scalar(key, label, float(np.mean(vals))) if vals else missing(key, label, why)

    return [
        Scalar(
            "semantic.texts",
            "texts embedded (after removing texts with > 1,000 copies)",
            sum(int(r["texts"]) for r in daily),
        ),
        mean_of(
            [num(r["centroid"]) for r in daily],
            "semantic.centroid_similarity",
            "mean centroid similarity between consecutive days",
            "no two consecutive days have text",
        ),
        mean_of(
            [num(r["pairwise"]) for r in daily],
            "semantic.mean_pairwise",
            "mean pairwise similarity (mean over days)",
            "no day has two texts",
        ),
        mean_of(
            knn,
            "semantic.knn10",
            f"mean similarity to the {KNN} nearest neighbours (mean over days)",
            f"no day has more than {KNN} texts",
        ),
        fig,
        Table(
            "semantic.table",
            "Semantic stability per day",
            ["day", "texts", "centroid vs previous day", "mean pairwise", f"mean of {KNN} nearest"],
            [
                [str(r["day"]), r["texts"], num(r["centroid"]), num(r["pairwise"]), k]
                for r, k in zip(daily, knn, strict=True)
            ],
        ),
    ]
