"""Social layer of the socialization study, and the thread shape: activity, lexical turnover, semantic
stability (``../shared/notes/metrics.md``).

Activity, thread shape and turnover are the views ``activity_daily``, ``threads`` and
``lexical_turnover_daily``; semantic stability is ``semantic_daily`` plus the 10-nearest-neighbour
similarity, which needs every pair of a day's texts and is computed here with numpy.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

import numpy as np
import numpy.typing as npt

from molt_society.report.common import epoch, missing, num, records
from molt_society.report.embeddings import MODEL, vectors_for
from molt_society.report.model import Figure, Item, Scalar, Series, Style, Table
from molt_society.report.sample import AgentSample, agent_sample
from molt_society.report.semantic_sample import heavy_texts, sampled_days
from molt_society.report.verdicts import bootstrap_values, ci_scalars
from molt_society.report.warehouse_source import Warehouse, quoted

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
    ("activity.agents", "active agents (ever: posted, commented or voted)"),
    ("activity.posts_per_day", "posts per day (mean)"),
]
THREAD_POST_KEYS = [
    ("threads.share_posts_without_comment", "share of posts without a comment"),
    ("threads.comments_per_post", "comments per post"),
    ("threads.mean_depth_all", "mean thread depth (all posts)"),
    ("threads.mean_depth_commented", "mean thread depth (posts with a comment)"),
]
THREAD_COMMENT_KEYS = [
    ("threads.share_top_level_comments", "share of comments that are top-level (depth 1)"),
    ("threads.share_reply_comments", "share of comments that are replies (depth >= 2)"),
    ("threads.share_depth_3_plus_comments", "share of comments at depth >= 3"),
    ("threads.max_depth", "deepest comment"),
]


def _daily_rows(
    wh: Warehouse, view: str, columns: str, society: str, order: str = "day"
) -> list[dict[str, Any]]:
    """The society's rows of a per-day ``view``, in ``order``."""
    return records(wh, f"SELECT {columns} FROM {view} WHERE society = {quoted(society)} ORDER BY {order}")


def _all_missing(keys: list[tuple[str, str]], reason: str) -> list[Item]:
    return [missing(k, label, reason) for k, label in keys]


def activity(wh: Warehouse, society: str) -> list[Item]:
    rows = _daily_rows(
        wh, "activity_daily", "day, posts, comments, votes, active_agents, new_agents", society
    )
    if not rows:
        return _all_missing(ACTIVITY_KEYS, "the society has no post, comment or vote with a time")
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
    out += _post_shape(post_rows, posts, comments)
    per_post = records(
        wh, f"SELECT comments AS v, count() AS n FROM threads WHERE society = {q} GROUP BY v ORDER BY v"
    )
    counts = np.repeat([float(r["v"]) for r in per_post], [int(r["n"]) for r in per_post])
    out += ci_scalars(
        "threads.comments_per_post", "comments per post (posts resampled)", bootstrap_values(counts)
    )
    out += _comment_shape(comment_rows, comments)
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


def _post_shape(post_rows: list[dict[str, Any]], posts: int, comments: int) -> list[Item]:
    """Posts without a comment, comments per post and the mean thread depth (rows by deepest comment)."""
    if posts == 0:
        return _all_missing(THREAD_POST_KEYS, "the society has no post")
    zero = sum(int(r["posts"]) for r in post_rows if int(r["depth"]) == 0)
    with_c = [r for r in post_rows if int(r["depth"]) > 0]
    (k_zero, l_zero), (k_per, l_per), (k_all, l_all), (k_com, l_com) = THREAD_POST_KEYS
    return [
        Scalar(k_zero, l_zero, zero / posts),
        Scalar(k_per, l_per, comments / posts),
        Scalar(k_all, l_all, sum(int(r["depth"]) * int(r["posts"]) for r in post_rows) / posts),
        Scalar(
            k_com,
            l_com,
            sum(int(r["depth"]) * int(r["posts"]) for r in with_c) / sum(int(r["posts"]) for r in with_c),
        )
        if with_c
        else missing(k_com, l_com, "no post has a comment"),
    ]


def _comment_shape(comment_rows: list[dict[str, Any]], comments: int) -> list[Item]:
    """Shares of top-level, reply and deep comments, and the deepest comment (rows by comment depth)."""
    if comments == 0:
        return _all_missing(THREAD_COMMENT_KEYS, "the society has no comment")
    by_depth = {int(r["depth"]): int(r["comments"]) for r in comment_rows}
    values: list[float] = [
        by_depth.get(1, 0) / comments,
        sum(v for d, v in by_depth.items() if d >= 2) / comments,
        sum(v for d, v in by_depth.items() if d >= 3) / comments,
        max(by_depth),
    ]
    return [Scalar(k, label, v) for (k, label), v in zip(THREAD_COMMENT_KEYS, values, strict=True)]


def lexical_turnover(wh: Warehouse, society: str) -> list[Item]:
    """Births and deaths of 1- to 5-grams per day (view ``lexical_turnover_daily``).

    Symmetric, as in the socialization study: among n-grams used at least twice, an n-gram is born on the
    day of its first use and dies on the day after its last use; the first day of the observation period
    censors births (the n-gram may be older) and its last day censors deaths (it may be used again), so
    neither end inflates a rate. The means are over the days that have a rate (a rate is NULL on the
    first day and when its denominator, the n-grams active that day or the day before, is 0).
    """
    rows = _daily_rows(
        wh,
        "lexical_turnover_daily",
        "n, day, active, births, birth_rate, deaths, death_rate",
        society,
        order="n, day",
    )
    if not rows:
        keys = [(f"lexical.birth_rate_n{n}", f"mean birth rate, {n}-grams") for n in range(1, 6)]
        return _all_missing(keys, "the society has no post or comment")
    days = len({r["day"] for r in rows})
    out: list[Item] = []
    births: list[Series] = []
    deaths: list[Series] = []
    for n in range(1, 6):
        mine = [r for r in rows if int(r["n"]) == n]
        xs = [epoch(r["day"]) for r in mine]
        b = [num(r["birth_rate"]) for r in mine]
        d = [num(r["death_rate"]) for r in mine]
        out += _turnover_means(n, b, d, days)
        births.append(Series(f"n={n}", xs, b))
        deaths.append(Series(f"n={n}", xs, d))
    style = "points" if days == 1 else "line"
    for s in births + deaths:
        s.style = style  # type: ignore[assignment]
    return [*out, *_turnover_figures(births, deaths, days), _turnover_table(rows)]


def _turnover_means(n: int, b: list[float | None], d: list[float | None], days: int) -> list[Item]:
    """Mean birth and death rates of ``n``-grams over the days that have one."""
    label_b = f"mean birth rate, {n}-grams (first used that day / active that day)"
    label_d = f"mean death rate, {n}-grams (last used the day before / active the day before)"
    if days < 2:
        why = "the observation period is one day: the first day censors births and deaths"
        return [
            missing(f"lexical.birth_rate_n{n}", label_b, why),
            missing(f"lexical.death_rate_n{n}", label_d, why),
        ]
    return [
        _mean_of(
            b,
            f"lexical.birth_rate_n{n}",
            label_b,
            f"no day after the first uses a {n}-gram that occurs at least twice",
        ),
        _mean_of(
            d,
            f"lexical.death_rate_n{n}",
            label_d,
            f"no day before the last uses a {n}-gram that occurs at least twice",
        ),
    ]


def _turnover_figures(births: list[Series], deaths: list[Series], days: int) -> list[Item]:
    one_day = (
        None if days > 1 else "the observation period is one day: the first day censors births and deaths"
    )
    return [
        Figure(
            "lexical.birth",
            "Lexical births per day (n-grams first used that day / active that day)",
            "day (UTC)",
            "birth rate",
            births,
            x_kind="time",
            reason=one_day,
        ),
        Figure(
            "lexical.death",
            "Lexical deaths per day (n-grams last used the day before / active the day before)",
            "day (UTC)",
            "death rate",
            deaths,
            x_kind="time",
            reason=one_day,
        ),
    ]


def _turnover_table(rows: list[dict[str, Any]]) -> Table:
    return Table(
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


def _mean_of(values: list[float | None], key: str, label: str, why: str) -> Scalar:
    """The mean of the values that are there, or ``why`` when none is."""
    vals = [v for v in values if v is not None]
    return Scalar(key, label, float(np.mean(vals))) if vals else missing(key, label, why)


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
    """Per day: centroid similarity to the previous day, mean pairwise and 10-nearest-neighbour similarity
    (on the report's sample of agents when the society is large: ``report.sample``)."""
    sample = agent_sample(wh, society)
    if sample.sampled:
        return semantic_of_sample(wh, society, sample)
    daily = _daily_rows(
        wh,
        "semantic_daily",
        "day, texts, mean_pairwise_similarity AS pairwise, centroid_similarity_prev_day AS centroid",
        society,
    )
    if not daily:
        return _all_missing(SEMANTIC_KEYS, "the society has no text (posts or comments) with an embedding")
    return _semantic_items(daily, _knn_per_day(wh, quoted(society), daily))


def semantic_of_sample(wh: Warehouse, society: str, sample: AgentSample) -> list[Item]:
    """Semantic stability on the texts of ``sample``'s agents (``report.semantic_sample``), with the
    sample's size and bootstrap intervals over its agents."""
    got = sampled_days(wh, society, sample, HEAVY_COPIES)
    head: list[Item] = [
        Scalar("semantic.sample_agents", f"agents read: {sample.describe()}", sample.agents),
    ]
    if not got.days:
        why = "the sampled agents have no text with an embedding"
        return head + _all_missing(SEMANTIC_KEYS, why)
    daily = [
        {"day": d, "texts": n, "pairwise": p, "centroid": c}
        for d, n, p, c in zip(got.days, got.texts, got.pairwise, got.centroid, strict=True)
    ]
    knn = [knn_similarity(m, queries=KNN_QUERIES) for m in got.matrices]
    for key, name in (("semantic.centroid_similarity", "centroid"), ("semantic.mean_pairwise", "pairwise")):
        why = "too few sampled agents with text on consecutive days"
        head += ci_scalars(key, f"{key} over the sampled agents", got.ci.get(name), why)
    return head + _semantic_items(daily, knn, among="the day's sampled texts (fewer candidates than all)")


def _semantic_items(
    daily: list[dict[str, Any]], knn: list[float | None], among: str = "all of its texts"
) -> list[Item]:
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
    return [
        Scalar(
            "semantic.texts",
            "texts embedded (after removing texts with > 1,000 copies)",
            sum(int(r["texts"]) for r in daily),
        ),
        _mean_of(
            [num(r["centroid"]) for r in daily],
            "semantic.centroid_similarity",
            "mean centroid similarity between consecutive days",
            "no two consecutive days have text",
        ),
        _mean_of(
            [num(r["pairwise"]) for r in daily],
            "semantic.mean_pairwise",
            "mean pairwise similarity (mean over days)",
            "no day has two texts",
        ),
        _mean_of(
            knn,
            "semantic.knn10",
            f"mean similarity to the {KNN} nearest neighbours (mean over days; searched among {among})",
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


def _knn_per_day(wh: Warehouse, q: str, daily: list[dict[str, Any]]) -> list[float | None]:
    """The 10-nearest-neighbour similarity of each day in ``daily``, texts with many copies left out."""
    heavy = heavy_texts(q, HEAVY_COPIES)
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
    return knn
