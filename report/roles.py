"""Structural roles (Molt Dynamics): k-means on per-agent features of the interaction graph.

The graph is the whole history's interaction graph (view ``interaction_edges``: commenter -> author of
what it answers, self-edges dropped, weight = number of comments). Its nodes are the agents with at least
one edge; agents that never commented on another agent and were never answered are not in it.

Per agent, five features (choices the paper left open are ours):

* in-degree and out-degree: number of distinct neighbours (the simple directed graph), not comments;
  the comment counts are in the weighted PageRank already;
* betweenness: directed, unweighted, normalised by ``(n - 1)(n - 2)`` as ``networkx`` does; above
  ``EXACT_BETWEENNESS_MAX`` nodes it is estimated from ``SAMPLED_SOURCES`` shortest-path sources drawn
  with a fixed seed, scaled by ``n / sources`` (Brandes-Pich), and the report says how many were used;
* clustering coefficient: on the undirected simple graph (direction and multiplicity dropped), 0 for
  an agent with fewer than two neighbours (``networkx.clustering``);
* PageRank: weighted, ``streams.pagerank`` (equals ``networkx.pagerank``).

Features are z-scored (population standard deviation; a constant feature becomes 0), then k-means
(scikit-learn, ``n_init=10``, ``random_state=0``) for k = 3..8 where the data has at least k + 1 distinct
points; the k with the highest silhouette wins (ties: the smaller k). Above ``SILHOUETTE_SAMPLE`` agents
the silhouette is computed on a seeded sample of that many. The largest cluster is the "peripheral" one.
"""

from __future__ import annotations

from dataclasses import dataclass

import igraph as ig
import numpy as np
import numpy.typing as npt
from sklearn.cluster import KMeans
from sklearn.metrics import silhouette_score

from report.model import Figure, Item, Scalar, Series, Table
from report.source import Warehouse, quoted
from streams.pagerank import pagerank

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]

FEATURES = ("in_degree", "out_degree", "betweenness", "clustering", "pagerank")
K_RANGE = range(3, 9)
EXACT_BETWEENNESS_MAX = 5_000
SAMPLED_SOURCES = 500
SILHOUETTE_SAMPLE = 10_000
SEED = 0


@dataclass(frozen=True)
class AgentFeatures:
    """Raw features, one row per agent (``agents`` sorted), columns in ``FEATURES`` order."""

    agents: list[str]
    matrix: FloatArray
    betweenness_sources: int  # shortest-path sources used (all nodes when exact)


@dataclass(frozen=True)
class Clustering:
    k: int
    labels: IntArray
    silhouette: float
    silhouettes: dict[int, float]  # every k tried


def interaction_graph(wh: Warehouse, society: str) -> list[tuple[str, str, float]]:
    """Weighted edges ``(src, dst, comments)`` of the society's whole-history interaction graph."""
    res = wh.query(
        "SELECT src, dst, count() AS w FROM interaction_edges "
        f"WHERE society = {quoted(society)} GROUP BY src, dst ORDER BY src, dst"
    )
    return [(str(s), str(d), float(w)) for s, d, w in res.rows]


def agent_features(edges: list[tuple[str, str, float]]) -> AgentFeatures:
    """The five features of every node of the graph ``edges`` (see the module docstring)."""
    pairs = sorted({(s, d) for s, d, _ in edges if s != d})
    agents = sorted({a for pair in pairs for a in pair})
    n = len(agents)
    if n == 0:
        return AgentFeatures([], np.zeros((0, len(FEATURES))), 0)
    index = {a: i for i, a in enumerate(agents)}
    g = ig.Graph(n=n, edges=[(index[s], index[d]) for s, d in pairs], directed=True)

    if n > EXACT_BETWEENNESS_MAX:
        rng = np.random.default_rng(SEED)
        sources = sorted(int(i) for i in rng.choice(n, size=SAMPLED_SOURCES, replace=False))
        raw = np.asarray(g.betweenness(directed=True, sources=sources), dtype=np.float64) * (n / len(sources))
        used = len(sources)
    else:
        raw = np.asarray(g.betweenness(directed=True), dtype=np.float64)
        used = n
    betweenness = raw / ((n - 1) * (n - 2)) if n > 2 else raw

    undirected = g.as_undirected(mode="collapse")
    clustering = np.asarray(undirected.transitivity_local_undirected(mode="zero"), dtype=np.float64)
    pr = pagerank(edges)
    matrix = np.column_stack(
        [
            np.asarray(g.indegree(), dtype=np.float64),
            np.asarray(g.outdegree(), dtype=np.float64),
            betweenness,
            clustering,
            np.asarray([pr[a] for a in agents], dtype=np.float64),
        ]
    )
    return AgentFeatures(agents, matrix, used)


def standardise(matrix: FloatArray) -> FloatArray:
    """Column z-scores (population standard deviation); a constant column becomes all zeros."""
    mean = matrix.mean(axis=0)
    std = matrix.std(axis=0)
    safe = np.where(std > 0, std, 1.0)
    return np.asarray((matrix - mean) / safe, dtype=np.float64)


def cluster(z: FloatArray) -> Clustering | None:
    """k-means for each allowed k in ``K_RANGE``, the one with the best silhouette; None if none allowed."""
    n = z.shape[0]
    distinct = np.unique(z, axis=0).shape[0] if n else 0
    best: Clustering | None = None
    scores: dict[int, float] = {}
    for k in K_RANGE:
        if distinct < k + 1:
            break
        labels = np.asarray(KMeans(n_clusters=k, n_init=10, random_state=SEED).fit_predict(z), dtype=np.int64)
        sample = SILHOUETTE_SAMPLE if n > SILHOUETTE_SAMPLE else None
        score = float(silhouette_score(z, labels, sample_size=sample, random_state=SEED))
        scores[k] = score
        if best is None or score > best.silhouette:
            best = Clustering(k, labels, score, scores)
    return best


def items(wh: Warehouse, society: str) -> list[Item]:
    """Agents, k, silhouette, peripheral share, betweenness sources; the clusters; silhouette by k."""
    feats = agent_features(interaction_graph(wh, society))
    n = len(feats.agents)
    out: list[Item] = [Scalar("roles.agents", "Agents in the interaction graph", n, unit="agents")]
    if n == 0:
        reason = "no interaction edges: no agent commented on another agent's post or comment"
        out.append(
            Scalar("roles.betweenness_sources", "Betweenness: shortest-path sources used", None, reason)
        )
        return out + _missing(reason)
    sampled = feats.betweenness_sources < n
    out.append(
        Scalar(
            "roles.betweenness_sources",
            "Betweenness: shortest-path sources used"
            + (f" (sampled, seed {SEED}, scaled by n / sources)" if sampled else " (all: exact)"),
            feats.betweenness_sources,
            unit="sources",
        )
    )
    best = cluster(standardise(feats.matrix))
    if best is None:
        distinct = np.unique(feats.matrix, axis=0).shape[0]
        reason = (
            f"k-means with k = {K_RANGE[0]} needs at least {K_RANGE[0] + 1} agents with distinct features; "
            f"the graph has {n} agents, {distinct} distinct"
        )
        return out + _missing(reason)

    sizes = np.bincount(best.labels, minlength=best.k)
    order = sorted(range(best.k), key=lambda c: (-int(sizes[c]), c))
    out += [
        Scalar("roles.k", "Number of roles (best k)", best.k),
        Scalar("roles.silhouette", "Silhouette of the best k", best.silhouette),
        Scalar(
            "roles.peripheral_share",
            "Share of agents in the largest (peripheral) cluster",
            float(sizes[order[0]]) / n,
        ),
    ]
    rows: list[list[float | int | str | None]] = []
    for rank, c in enumerate(order, start=1):
        members = feats.matrix[best.labels == c]
        rows.append([rank, int(sizes[c]), float(sizes[c]) / n, *(float(v) for v in members.mean(axis=0))])
    out.append(
        Table(
            "roles.clusters",
            "Roles: clusters by size, mean raw feature values",
            ["cluster", "agents", "share", *(f"mean {f}" for f in FEATURES)],
            rows,
        )
    )
    ks = sorted(best.silhouettes)
    out.append(
        Figure(
            "roles.silhouette_by_k",
            "Silhouette of k-means by number of clusters",
            "k",
            "silhouette",
            [Series("silhouette", [float(k) for k in ks], [best.silhouettes[k] for k in ks], style="line")],
        )
    )
    return out


def _missing(reason: str) -> list[Item]:
    return [
        Scalar("roles.k", "Number of roles (best k)", None, reason),
        Scalar("roles.silhouette", "Silhouette of the best k", None, reason),
        Scalar("roles.peripheral_share", "Share of agents in the largest (peripheral) cluster", None, reason),
        Table("roles.clusters", "Roles: clusters by size, mean raw feature values", [], [], reason),
        Figure(
            "roles.silhouette_by_k",
            "Silhouette of k-means by number of clusters",
            "k",
            "silhouette",
            [],
            reason,
        ),
    ]
