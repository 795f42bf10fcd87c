"""Weighted PageRank on the interaction graph and the influence metrics built on it.

``pagerank`` reproduces ``networkx.pagerank`` (weighted out-degree normalisation, dangling nodes spread
their rank uniformly, uniform personalisation and start vector, L1 stopping rule ``err < N * tol``) with
a scipy.sparse power iteration, so networkx is not needed at runtime.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable, Mapping

import numpy as np
import numpy.typing as npt
import scipy.sparse as sp


def interaction_edges(comments: Iterable[tuple[str, str]]) -> list[tuple[str, str, float]]:
    """Weighted edges ``(commenter, replied_to_author, count)`` from one pair per comment.

    The pair is (commenter, author of the parent comment, or of the post for a top-level comment).
    Self-edges (an agent replying to itself) are dropped, as in the interaction-graph definition.
    The result is sorted by (source, target).
    """
    weights = Counter((src, dst) for src, dst in comments if src != dst)
    return [(src, dst, float(w)) for (src, dst), w in sorted(weights.items())]


def pagerank(
    edges: Iterable[tuple[str, str, float]],
    *,
    alpha: float = 0.85,
    tol: float = 1e-10,
    max_iter: int = 200,
) -> dict[str, float]:
    """PageRank of a weighted directed graph given as ``(source, target, weight)`` edges.

    Same result as ``networkx.pagerank(G, alpha, tol=tol, max_iter=max_iter, weight="weight")`` on the
    graph with parallel edges summed: a node's rank flows along its out-edges in proportion to their
    weight, nodes without outgoing weight (dangling) spread it uniformly, and teleportation is uniform.
    Self-loops are discarded before the graph is built (the interaction graph has none), so a node that
    appears only in self-loops is not in the output. Weights must be finite and >= 0; an edge of weight 0
    still adds its nodes. Nodes are processed in sorted order, so the result is deterministic.

    Returns {} for an empty graph. Raises ``RuntimeError`` when the power iteration has not converged
    after ``max_iter`` iterations (networkx raises ``PowerIterationFailedConvergence``).
    """
    src_names: list[str] = []
    dst_names: list[str] = []
    weights: list[float] = []
    for src, dst, weight in edges:
        if src == dst:
            continue
        w = float(weight)
        if not (w >= 0.0 and math.isfinite(w)):
            raise ValueError(f"edge weight must be finite and >= 0, got {weight!r} on {src!r} -> {dst!r}")
        src_names.append(src)
        dst_names.append(dst)
        weights.append(w)
    nodes = sorted(set(src_names) | set(dst_names))
    if not nodes:
        return {}
    index = {node: i for i, node in enumerate(nodes)}
    rows = np.fromiter((index[s] for s in src_names), dtype=np.int64, count=len(src_names))
    cols = np.fromiter((index[d] for d in dst_names), dtype=np.int64, count=len(dst_names))
    x = pagerank_indexed(rows, cols, np.asarray(weights, dtype=np.float64), len(nodes), alpha, tol, max_iter)
    return dict(zip(nodes, x.tolist(), strict=True))


def pagerank_indexed(
    src: npt.NDArray[np.int64],
    dst: npt.NDArray[np.int64],
    weights: npt.NDArray[np.float64],
    n: int,
    alpha: float = 0.85,
    tol: float = 1e-10,
    max_iter: int = 200,
) -> npt.NDArray[np.float64]:
    """``pagerank`` of the graph on nodes ``0 .. n-1`` with edges ``src[i] -> dst[i]`` of ``weights[i]``
    (no self-loops; every node in an edge), as an array: the core that ``pagerank`` runs after naming."""
    # CSR construction sums parallel edges.
    adj = sp.csr_array((weights, (src, dst)), shape=(n, n))
    out_weight = np.asarray(adj.sum(axis=1), dtype=np.float64).ravel()
    dangling = out_weight == 0.0
    inv_out = np.zeros(n)
    inv_out[~dangling] = 1.0 / out_weight[~dangling]
    # Transposed, row-normalised transition matrix: rank flows as x_new = trans @ x.
    trans = sp.csr_array((sp.diags_array(inv_out) @ adj).T)

    teleport = np.full(n, 1.0 / n)
    x = teleport.copy()
    for _ in range(max_iter):
        last = x
        x = alpha * (trans @ last + last[dangling].sum() * teleport) + (1.0 - alpha) * teleport
        if np.abs(x - last).sum() < n * tol:
            return np.asarray(x, dtype=np.float64)
    raise RuntimeError(f"PageRank power iteration did not converge in {max_iter} iterations")


def _ranked(pr: Mapping[str, float]) -> list[tuple[str, float]]:
    """Nodes by decreasing score, ties broken by node id ascending."""
    return sorted(pr.items(), key=lambda item: (-item[1], item[0]))


def top_k_set(pr: Mapping[str, float], k: int) -> frozenset[str]:
    """The ``k`` highest-scoring nodes (all of them if fewer); ties broken by node id ascending."""
    if k < 0:
        raise ValueError("k must be non-negative")
    return frozenset(node for node, _ in _ranked(pr)[:k])


def top_k_share(pr: Mapping[str, float], k: int) -> float:
    """Sum of the ``k`` largest scores divided by the sum of all scores (0.0 if that sum is 0).

    The k nodes are those of :func:`top_k_set`. PageRank sums to 1, so this is the top-k rank share.
    """
    if k < 0:
        raise ValueError("k must be non-negative")
    total = math.fsum(pr.values())
    if total == 0.0:
        return 0.0
    return math.fsum(score for _, score in _ranked(pr)[:k]) / total


def jaccard(a: frozenset[str], b: frozenset[str]) -> float:
    """Jaccard overlap ``|a & b| / |a | b|``; 1.0 when both sets are empty (nothing changed)."""
    union = len(a | b)
    return 1.0 if union == 0 else len(a & b) / union


def churn(a: frozenset[str], b: frozenset[str]) -> float:
    """Turnover between two top-k sets: ``1 - jaccard(a, b)``."""
    return 1.0 - jaccard(a, b)


def super_nodes(pr: Mapping[str, float], z: float = 3.0) -> frozenset[str]:
    """Nodes whose score is strictly above ``mean + z * std`` of the window's scores.

    This is our operationalisation of the socialization study's "PageRank significantly above the
    window's distribution": population standard deviation (ddof=0) over all nodes of the window.
    Empty input, or (for z > 0) all scores equal, gives no super-nodes.
    """
    if not pr:
        return frozenset()
    scores = np.fromiter(pr.values(), dtype=np.float64, count=len(pr))
    threshold = float(scores.mean() + z * scores.std())
    return frozenset(node for node, score in pr.items() if score > threshold)
