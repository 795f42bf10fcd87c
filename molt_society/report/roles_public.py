"""Structural roles under the public code's full feature set (a labelled variant of ``report.roles``).

The public Molt Dynamics code (YCRG-Labs/molt-dynamics, ``src/molt_dynamics/features.py``,
``FeatureExtractor.extract_all_features``; ``rq1_roles.RoleAnalyzer`` with ``feature_set='full'``) clusters
42 numeric columns per agent, not only the five network features the paper describes:

* activity: ``total_posts``, ``total_comments``, ``post_comment_ratio`` (posts / comments; posts when
  there is no comment), ``active_lifespan_days`` (first to last post or comment, 0 below two),
  ``posts_per_day`` (posts / lifespan; posts when the lifespan is 0);
* topic diversity: Shannon entropy (bits) of the agent's posts over submolts, and that entropy over
  log2(distinct submolts) (over 1 when there is one);
* the five network features (``report.roles.FEATURES``, 0 off the graph);
* temporal: ``autocorrelation`` (Pearson correlation of consecutive inter-event times, three or more
  events, 0 when undefined) and ``burst_coefficient`` (standard deviation / mean of inter-event times);
* content: mean text length in characters (every non-empty post title, post body and comment body is
  one text), vocabulary diversity (distinct / all lower-cased whitespace-separated words), mean VADER
  compound sentiment, and technical density (share of words in the code's 58-keyword list);
* ``hour_0`` .. ``hour_23``: the share of the agent's posts and comments in each UTC hour.

Then, as ``RoleAnalyzer``: columns whose variance is at most 1e-10 are dropped, the rest z-scored
(``StandardScaler``), reduced by PCA to 10 components (``random_state`` 42) when more than 10 remain, and
clustered by ``report.roles.cluster`` (k-means, k = 3..8, best silhouette).

Departures, each said in the report: the sentiment is the mean over at most ``SENTIMENT_TEXTS`` texts per
agent (a hash sample of its posts and comments, each cut to ``SENTIMENT_CHARS`` characters), as VADER on
every text of a large society would dominate the report's time; words are split on ClickHouse's
whitespace (``splitByWhitespace``: ASCII whitespace) where Python's ``str.split`` splits on any Unicode
whitespace. On a society whose texts are synthetic the four content columns describe the word model,
and the variant is computed without them (the report says so). Above ``report.roles.FIT_SAMPLE`` active
agents the variant is computed on that many of them, the first by ``cityHash64`` of the id (a fixed
pseudo-random order; ``features(hash_cut=...)``), said in its labels: its columns, VADER on every agent's
texts above all, would otherwise grow with the society.
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from molt_society.report.warehouse_source import Warehouse, quoted

FloatArray = npt.NDArray[np.float64]

ACTIVITY = ("total_posts", "total_comments", "post_comment_ratio", "active_lifespan_days", "posts_per_day")
TOPIC = ("topic_entropy", "normalized_entropy")
NETWORK = ("in_degree", "out_degree", "betweenness", "clustering_coefficient", "pagerank")
TEMPORAL = ("autocorrelation", "burst_coefficient")
CONTENT = ("avg_post_length", "vocabulary_diversity", "avg_sentiment", "technical_density")
HOURS = tuple(f"hour_{h}" for h in range(24))
COLUMNS = (*ACTIVITY, *TOPIC, *NETWORK, *TEMPORAL, *CONTENT, *HOURS)
"""The public code's numeric columns, in its order (``extract_all_features``)."""

PCA_COMPONENTS = 10
RANDOM_SEED = 42  # config/default.yaml random_seed
MIN_VARIANCE = 1e-10  # RoleAnalyzer._filter_zero_variance_columns
SENTIMENT_TEXTS = 10
SENTIMENT_CHARS = 2_000

TECHNICAL_KEYWORDS = (
    "function", "class", "method", "variable", "parameter", "return",
    "import", "module", "package", "library", "api", "endpoint",
    "database", "query", "schema", "table", "index", "key",
    "algorithm", "data", "structure", "array", "list", "dict",
    "loop", "condition", "if", "else", "for", "while", "try",
    "error", "exception", "debug", "test", "unit", "integration",
    "deploy", "server", "client", "request", "response", "http",
    "json", "xml", "html", "css", "javascript", "python", "java",
    "code", "script", "compile", "runtime", "memory", "cpu",
)  # fmt: skip
"""``features._compute_content_from_data``'s technical keywords, verbatim."""

_TEXT = "if(type = 'post_created', concat(title, ' ', content), content)"


@dataclass(frozen=True)
class Behaviour:
    """The public code's columns for ``agents`` (rows in that order), and which columns were kept."""

    agents: list[str]
    matrix: FloatArray  # len(agents) x len(COLUMNS)
    columns: tuple[str, ...]


def features(
    wh: Warehouse,
    society: str,
    agents: list[str],
    network: FloatArray,
    *,
    with_content: bool = True,
    hash_cut: int | None = None,
) -> Behaviour:
    """Every column of ``COLUMNS`` for ``agents`` (``network``: their five network features, same order);
    without the content columns when ``with_content`` is False. ``hash_cut``: only agents with
    ``cityHash64(actor) <= hash_cut`` are read (``agents`` must be among them)."""
    where = _agents_up_to(hash_cut)
    index = {a: i for i, a in enumerate(agents)}
    m = np.zeros((len(agents), len(COLUMNS)), dtype=np.float64)
    col = {c: j for j, c in enumerate(COLUMNS)}
    m[:, col["in_degree"] : col["pagerank"] + 1] = network
    keywords = "[" + ", ".join(f"'{w}'" for w in TECHNICAL_KEYWORDS) + "]"
    res = wh.query(
        "SELECT actor, countIf(type = 'post_created'), countIf(type = 'comment_created'), "
        "arraySort(groupArray(toUnixTimestamp64Micro(occurred_at))), "
        "groupArrayIf(submolt, type = 'post_created' AND submolt != ''), "
        "countIf(type = 'post_created' AND title != '') + countIf(content != ''), "
        "sumIf(lengthUTF8(title), type = 'post_created') + sum(lengthUTF8(content)), "
        f"sum(length(splitByWhitespace(lowerUTF8({_TEXT})))), "
        f"uniqExactArray(splitByWhitespace(lowerUTF8({_TEXT}))), "
        f"sum(arrayCount(w -> has({keywords}, w), splitByWhitespace(lowerUTF8({_TEXT})))) "
        f"FROM events FINAL WHERE society = {quoted(society)} "
        f"AND type IN ('post_created', 'comment_created') AND actor != '' AND {where} GROUP BY actor"
    )
    for actor, posts, comments, micros, submolts, texts, chars, words, distinct, technical in res.rows:
        i = index.get(str(actor))
        if i is None:
            continue
        row = m[i]
        ts = np.asarray(micros, dtype=np.float64) / 1e6
        row[col["total_posts"]], row[col["total_comments"]] = posts, comments
        row[col["post_comment_ratio"]] = posts / comments if comments else float(posts)
        life = (ts[-1] - ts[0]) / 86_400 if ts.size >= 2 else 0.0
        row[col["active_lifespan_days"]] = life
        row[col["posts_per_day"]] = posts / life if life > 0 else float(posts)
        row[col["topic_entropy"]], row[col["normalized_entropy"]] = topic_entropy(list(submolts))
        row[col["autocorrelation"]], row[col["burst_coefficient"]] = rhythm(ts)
        if ts.size:
            hours = np.bincount((np.floor(ts / 3600) % 24).astype(np.int64), minlength=24)
            row[col["hour_0"] :] = hours / hours.sum()
        if with_content and texts:
            row[col["avg_post_length"]] = chars / texts
            row[col["vocabulary_diversity"]] = distinct / words if words else 0.0
            row[col["technical_density"]] = technical / words if words else 0.0
    if with_content:
        for actor, score in sentiment(wh, society, hash_cut).items():
            if (i := index.get(actor)) is not None:
                m[i, col["avg_sentiment"]] = score
    columns = COLUMNS if with_content else tuple(c for c in COLUMNS if c not in CONTENT)
    keep = [col[c] for c in columns]
    return Behaviour(agents, m[:, keep], columns)


def topic_entropy(submolts: list[str]) -> tuple[float, float]:
    """(entropy in bits of the posts over submolts, entropy / log2(distinct) or / 1 for one submolt)."""
    counts = Counter(submolts)
    if not counts:
        return 0.0, 0.0
    total = sum(counts.values())
    h = -sum(n / total * math.log2(n / total) for n in counts.values())
    top = math.log2(len(counts)) if len(counts) > 1 else 1.0
    return h, h / top


def rhythm(ts: FloatArray) -> tuple[float, float]:
    """(lag-1 autocorrelation of inter-event times, their CoV) as ``_compute_temporal_from_data``."""
    if ts.size < 2:
        return 0.0, 0.0
    gaps = np.diff(ts)
    auto = 0.0
    if gaps.size >= 3 and np.std(gaps) > 0:  # two gaps: one pair, no correlation (the code's NaN -> 0)
        with np.errstate(invalid="ignore", divide="ignore"):
            r = float(np.corrcoef(gaps[:-1], gaps[1:])[0, 1])
        auto = 0.0 if math.isnan(r) else r
    mean = float(np.mean(gaps))
    return auto, float(np.std(gaps)) / mean if mean > 0 else 0.0


def _agents_up_to(hash_cut: int | None) -> str:
    """The SQL condition keeping agents whose ``cityHash64(actor)`` is at most ``hash_cut`` (all: None)."""
    return "1" if hash_cut is None else f"cityHash64(actor) <= {int(hash_cut)}"


def sentiment(wh: Warehouse, society: str, hash_cut: int | None = None) -> dict[str, float]:
    """Mean VADER compound score of each agent's texts (a hash sample, see the module docstring), of the
    agents up to ``hash_cut`` (``features``)."""
    where = _agents_up_to(hash_cut)
    from vaderSentiment.vaderSentiment import SentimentIntensityAnalyzer

    analyzer = SentimentIntensityAnalyzer()
    res = wh.query(
        f"SELECT actor, substring(title, 1, {SENTIMENT_CHARS}), substring(content, 1, {SENTIMENT_CHARS}) "
        f"FROM events FINAL WHERE society = {quoted(society)} "
        f"AND type IN ('post_created', 'comment_created') AND actor != '' AND {where} "
        f"ORDER BY actor, cityHash64(event_id) LIMIT {SENTIMENT_TEXTS} BY actor"
    )
    scores: dict[str, list[float]] = {}
    for actor, title, content in res.rows:
        for text in (title, content):
            if text:
                scores.setdefault(str(actor), []).append(analyzer.polarity_scores(str(text))["compound"])
    return {a: float(np.mean(v)) for a, v in scores.items()}


def reduced(b: Behaviour) -> tuple[FloatArray, list[str]]:
    """``RoleAnalyzer``'s matrix: near-constant columns dropped, z-scored, PCA to 10 components when more
    than 10 remain; and the names of the columns kept."""
    from sklearn.decomposition import PCA

    if b.matrix.shape[0] < 2:
        return b.matrix, list(b.columns)
    var = b.matrix.var(axis=0, ddof=1)
    keep = var > MIN_VARIANCE
    x = b.matrix[:, keep]
    z = (x - x.mean(axis=0)) / x.std(axis=0)
    kept = [c for c, k in zip(b.columns, keep, strict=True) if k]
    if z.shape[1] > PCA_COMPONENTS and z.shape[0] > PCA_COMPONENTS:
        z = PCA(n_components=PCA_COMPONENTS, random_state=RANDOM_SEED).fit_transform(z)
    return np.asarray(z, dtype=np.float64), kept
