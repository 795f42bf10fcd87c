"""PageRank and influence metrics against networkx and direct computations."""

from __future__ import annotations

import time
from collections import Counter

import networkx as nx
import numpy as np
import pytest

from molt_society.algorithms.pagerank import (
    churn,
    interaction_edges,
    jaccard,
    pagerank,
    super_nodes,
    top_k_set,
    top_k_share,
)

Edge = tuple[str, str, float]
TOL = 1e-8


def _random_edges(seed: int, n_nodes: int, n_edges: int) -> list[Edge]:
    """Random weighted edges with parallel edges, self-loops and sink-only (dangling) nodes."""
    rng = np.random.default_rng(seed)
    names = [f"agent{i:04d}" for i in range(n_nodes)]
    sinks = max(1, n_nodes // 5)  # the last nodes never appear as a source, so they are dangling
    edges: list[Edge] = []
    for _ in range(n_edges):
        src = names[int(rng.integers(0, n_nodes - sinks))]
        dst = names[int(rng.integers(0, n_nodes))]
        edges.append((src, dst, float(rng.integers(1, 5)) if rng.random() < 0.7 else float(rng.random())))
    edges += edges[: n_edges // 10]  # exact duplicates: parallel edges
    edges += [(names[i], names[i], 2.0) for i in range(0, n_nodes, 7)]  # self-loops
    order = rng.permutation(len(edges))
    return [edges[i] for i in order]


def _reference(edges: list[Edge], alpha: float = 0.85) -> dict[str, float]:
    graph = nx.MultiDiGraph()  # networkx sums the weights of parallel edges
    graph.add_weighted_edges_from((s, d, w) for s, d, w in edges if s != d)
    result: dict[str, float] = nx.pagerank(graph, alpha=alpha, tol=1e-13, max_iter=10_000)
    return result


GRAPHS = [(1, 5, 8), (2, 30, 60), (3, 200, 1500), (4, 1000, 3000), (5, 50, 400)]


@pytest.mark.parametrize("alpha", [0.85, 0.5, 0.99])
@pytest.mark.parametrize(("seed", "n_nodes", "n_edges"), GRAPHS)
def test_matches_networkx(seed: int, n_nodes: int, n_edges: int, alpha: float) -> None:
    edges = _random_edges(seed, n_nodes, n_edges)
    ref = _reference(edges, alpha)
    ours = pagerank(edges, alpha=alpha, max_iter=10_000)
    assert list(ours) == sorted(ref)
    assert max(abs(ours[node] - ref[node]) for node in ref) < TOL
    assert sum(ours.values()) == pytest.approx(1.0, abs=1e-12)


def test_matches_networkx_digraph_after_removing_self_loops() -> None:
    edges = _random_edges(6, 80, 300)
    graph = nx.DiGraph()
    for src, dst, weight in edges:
        previous = graph.get_edge_data(src, dst, default={"weight": 0.0})["weight"]
        graph.add_edge(src, dst, weight=previous + weight)
    graph.remove_edges_from(list(nx.selfloop_edges(graph)))
    graph.remove_nodes_from([n for n in list(graph) if graph.degree(n) == 0])
    ref = nx.pagerank(graph, tol=1e-13, max_iter=1000)
    ours = pagerank(edges)
    assert set(ours) == set(ref)
    assert max(abs(ours[node] - ref[node]) for node in ref) < TOL


def test_all_dangling_and_tiny_graphs() -> None:
    for edges in ([("a", "b", 1.0)], [("a", "b", 1.0), ("b", "a", 3.0)], [("x", "y", 0.0), ("y", "z", 2.0)]):
        ref = _reference(edges)
        ours = pagerank(edges)
        assert max(abs(ours[node] - ref[node]) for node in ref) < TOL


def test_self_loops_are_dropped_before_building_the_graph() -> None:
    edges = _random_edges(7, 40, 120)
    without = [(s, d, w) for s, d, w in edges if s != d]
    assert pagerank(edges) == pagerank(without)
    assert "loner" not in pagerank([*edges, ("loner", "loner", 5.0)])


def test_empty_and_errors() -> None:
    assert pagerank([]) == {}
    assert pagerank([("a", "a", 1.0)]) == {}
    with pytest.raises(ValueError):
        pagerank([("a", "b", -1.0)])
    with pytest.raises(RuntimeError):
        pagerank(_random_edges(8, 50, 200), max_iter=2)


def test_deterministic_regardless_of_edge_order() -> None:
    edges = _random_edges(9, 100, 500)
    first = pagerank(edges)
    again = pagerank(list(reversed(edges)))
    assert list(first) == list(again) == sorted(first)
    assert max(abs(first[n] - again[n]) for n in first) < 1e-14


def test_hundred_thousand_edges_is_fast() -> None:
    rng = np.random.default_rng(10)
    src = rng.integers(0, 20_000, 100_000)
    dst = rng.integers(0, 20_000, 100_000)
    edges = [(f"a{s}", f"a{d}", 1.0) for s, d in zip(src.tolist(), dst.tolist(), strict=True)]
    start = time.perf_counter()
    result = pagerank(edges)
    assert time.perf_counter() - start < 1.0
    assert sum(result.values()) == pytest.approx(1.0)


def test_interaction_edges() -> None:
    rng = np.random.default_rng(11)
    names = ["ann", "bob", "cy", "dee", "eve"]
    pairs = [(names[int(rng.integers(5))], names[int(rng.integers(5))]) for _ in range(300)]
    expected = Counter(p for p in pairs if p[0] != p[1])
    edges = interaction_edges(pairs)
    assert edges == sorted(edges)
    assert {(s, d): w for s, d, w in edges} == {k: float(v) for k, v in expected.items()}
    assert all(s != d for s, d, _ in edges)
    assert interaction_edges([]) == []
    assert interaction_edges([("a", "a")]) == []


def _direct_top_k(pr: dict[str, float], k: int) -> frozenset[str]:
    """Node u is in the top k iff fewer than k nodes beat it (higher score, or equal score, smaller id)."""
    return frozenset(
        u for u, su in pr.items() if sum(1 for v, sv in pr.items() if sv > su or (sv == su and v < u)) < k
    )


@pytest.mark.parametrize("seed", [12, 13, 14])
def test_top_k_against_direct_computation(seed: int) -> None:
    pr = pagerank(_random_edges(seed, 60, 200))
    # Add exact ties to exercise the tie rule.
    tied = {**pr, "zz_tie": max(pr.values()), "aa_tie": max(pr.values()), "mm_tie": sorted(pr.values())[10]}
    for scores in (pr, tied):
        ranked_values = sorted(scores.values(), reverse=True)
        for k in (0, 1, 3, 10, len(scores), len(scores) + 5):
            assert top_k_set(scores, k) == _direct_top_k(scores, k)
            expected_share = sum(ranked_values[:k]) / sum(ranked_values)
            assert top_k_share(scores, k) == pytest.approx(expected_share, abs=1e-12)


def test_top_k_tie_rule() -> None:
    scores = {"b": 0.3, "a": 0.3, "c": 0.4}
    assert top_k_set(scores, 2) == frozenset({"c", "a"})
    assert top_k_share({}, 3) == 0.0
    with pytest.raises(ValueError):
        top_k_set(scores, -1)


def test_jaccard_and_churn() -> None:
    rng = np.random.default_rng(15)
    universe = [f"n{i}" for i in range(30)]
    for _ in range(50):
        a = frozenset(u for u in universe if rng.random() < 0.3)
        b = frozenset(u for u in universe if rng.random() < 0.3)
        union = [u for u in universe if u in a or u in b]
        both = [u for u in universe if u in a and u in b]
        expected = len(both) / len(union) if union else 1.0
        assert jaccard(a, b) == pytest.approx(expected)
        assert churn(a, b) == pytest.approx(1.0 - expected)
    assert jaccard(frozenset(), frozenset()) == 1.0
    assert churn(frozenset(), frozenset()) == 0.0
    assert jaccard(frozenset({"a"}), frozenset()) == 0.0


@pytest.mark.parametrize("z", [1.0, 2.0, 3.0])
def test_super_nodes_against_numpy(z: float) -> None:
    graph = nx.scale_free_graph(300, seed=16)
    edges = [(f"n{u}", f"n{v}", 1.0) for u, v in graph.edges()]
    pr = pagerank(edges)
    values = np.array(list(pr.values()))
    threshold = values.mean() + z * values.std(ddof=0)
    expected = frozenset(node for node, score in pr.items() if score > threshold)
    assert super_nodes(pr, z) == expected
    assert expected  # a scale-free graph has hubs


def test_super_nodes_degenerate() -> None:
    assert super_nodes({}) == frozenset()
    assert super_nodes({"a": 0.25, "b": 0.25, "c": 0.25, "d": 0.25}) == frozenset()
