"""Structural roles (report.roles) on the study's population: every active agent, isolated ones included.

Synthetic society with a known answer, stored in a real chDB through the sink's row builders:

* 3 hubs post once each; 33 spokes comment once each on one hub's post (10, 11 and 12 spokes per hub),
* 100 isolated agents post once and nobody answers them: active, but without an interaction edge.

Features (networkx reading): every spoke is the same point (in 0, out 1, betweenness 0, clustering 0, the
PageRank of a node without in-links), the hubs are three distinct points (in 10, 11, 12), the isolated
agents are the origin. So the study population has 5 distinct points, k-means can try k = 3 and 4 only,
and k = 3 ({isolated}, {spokes}, {hubs}) has the best silhouette (k = 4 leaves a hub alone, silhouette 0).
The largest ("peripheral") cluster is the 100 isolated agents: 100 / 136 of the active agents. The
graph-only variant (36 agents, 4 distinct points) has only k = 3, its largest cluster the 33 spokes.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import networkx as nx
import numpy as np
import pytest
from sklearn.cluster import KMeans
from sklearn.metrics import silhouette_score
from sklearn.preprocessing import StandardScaler
from stored_events import open_chdb, store_events

from molt_society.report import roles
from molt_society.report.model import Figure, Item, Scalar, Table
from molt_society.report.published import PUBLISHED, annotate
from molt_society.report.warehouse_source import ClientWarehouse
from molt_society.schemas.events import (
    CommentCreated,
    CommentCreatedBody,
    Event,
    PostCreated,
    PostCreatedBody,
)
from molt_society.schemas.ids import uuid7

SOC = "rolesyn"
T0 = datetime(2026, 3, 1, tzinfo=UTC)
HUB_FANS = (10, 11, 12)
N_ISOLATED = 100
N_SPOKES = sum(HUB_FANS)
N_ACTIVE = N_ISOLATED + N_SPOKES + len(HUB_FANS)


def _society() -> list[Event]:
    events: list[Event] = []
    t = T0

    def post(actor: str, pid: str) -> None:
        nonlocal t
        t += timedelta(minutes=1)
        body = PostCreatedBody(post_id=pid, submolt="general", title="t", content="c")
        events.append(PostCreated(event_id=uuid7(t), society=SOC, actor=actor, occurred_at=t, body=body))

    def comment(actor: str, pid: str, cid: str) -> None:
        nonlocal t
        t += timedelta(minutes=1)
        body = CommentCreatedBody(comment_id=cid, post_id=pid, depth=1, content="c")
        events.append(CommentCreated(event_id=uuid7(t), society=SOC, actor=actor, occurred_at=t, body=body))

    spoke = 0
    for h, fans in enumerate(HUB_FANS):
        post(f"hub{h}", f"ph{h}")
        for _ in range(fans):
            comment(f"spoke{spoke:02d}", f"ph{h}", f"c{spoke}")
            spoke += 1
    for i in range(N_ISOLATED):
        post(f"iso{i:03d}", f"pi{i}")
    return events


@pytest.fixture(scope="module")
def report_items(tmp_path_factory: pytest.TempPathFactory) -> Iterator[list[Item]]:
    """``roles.items`` of the synthetic society, computed once."""
    client = open_chdb(str(tmp_path_factory.mktemp("roles") / "ch"))
    store_events(client, _society())
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(roles, "KMEANS_N_INIT", 10)  # fewer restarts: same optimum here, a fraction of the time
        items = roles.items(ClientWarehouse(client), SOC)
    yield items
    client.close()


def _scalars(items: list[Item]) -> dict[str, Scalar]:
    return {i.key: i for i in items if isinstance(i, Scalar)}


def _tables(items: list[Item]) -> dict[str, Table]:
    return {i.key: i for i in items if isinstance(i, Table)}


def _reference_study() -> tuple[list[str], np.ndarray]:
    """The study population's raw features by networkx (public code: features.py), zeros when isolated."""
    g = nx.DiGraph()
    spoke = 0
    for h, fans in enumerate(HUB_FANS):
        for _ in range(fans):
            g.add_edge(f"spoke{spoke:02d}", f"hub{h}", weight=1.0)
            spoke += 1
    bc = nx.betweenness_centrality(g)
    cl = nx.clustering(g.to_undirected())
    pr = nx.pagerank(g, alpha=0.85, tol=1e-12)
    agents = sorted([*g.nodes, *(f"iso{i:03d}" for i in range(N_ISOLATED))])
    rows = [[g.in_degree(a), g.out_degree(a), bc[a], cl[a], pr[a]] if a in g else [0.0] * 5 for a in agents]
    return agents, np.asarray(rows, dtype=float)


def test_study_population_includes_isolated_active_agents(report_items: list[Item]) -> None:
    s = _scalars(report_items)
    # Study: {isolated}, {spokes}, {hubs}; the isolated agents are the peripheral cluster.
    assert s["roles.peripheral_share"].value == pytest.approx(N_ISOLATED / N_ACTIVE)
    assert s["roles.k"].value == 3
    assert s["roles.active_agents"].value == N_ACTIVE == 136
    assert s["roles.isolated_agents"].value == N_ISOLATED
    assert s["roles.agents"].value == N_SPOKES + len(HUB_FANS)
    agents, raw = _reference_study()
    labels = np.array([0 if a.startswith("iso") else 1 if a.startswith("spoke") else 2 for a in agents])
    want = silhouette_score(StandardScaler().fit_transform(raw), labels)
    assert s["roles.silhouette"].value == pytest.approx(want, rel=1e-6)
    table = _tables(report_items)["roles.clusters"]
    assert [r[1] for r in table.rows] == [N_ISOLATED, N_SPOKES, len(HUB_FANS)]
    assert table.rows[0][3:] == [0.0] * 5  # the peripheral cluster: all features 0


def test_graph_only_variant_is_labelled_and_has_no_published_value(report_items: list[Item]) -> None:
    items = report_items
    s = _scalars(items)
    n_graph = N_SPOKES + len(HUB_FANS)
    assert s["roles.variant_graph_only.k"].value == 3  # 4 distinct points: only k = 3 can be tried
    assert s["roles.variant_graph_only.peripheral_share"].value == pytest.approx(N_SPOKES / n_graph)
    assert s["roles.variant_graph_only.silhouette"].value is not None
    table = _tables(items)["roles.variant_graph_only.clusters"]
    assert sum(int(str(r[1])) for r in table.rows) == n_graph
    for key, scalar in s.items():
        annotate(scalar)
        if key.startswith("roles.variant_"):
            assert scalar.label.startswith(("variant: graph-only", "variant: the public code's")), key
            assert scalar.published is None, key
            assert key not in PUBLISHED
    assert s["roles.silhouette"].published == 0.91
    assert s["roles.peripheral_share"].published == 0.935
    fig = next(i for i in items if isinstance(i, Figure))
    assert [x.name for x in fig.series] == [
        "all active agents",
        "variant: graph-only",
        "variant: the public code's features",
        roles.NULL_LABEL,
    ]
    assert fig.series[0].x == [3.0, 4.0]
    assert fig.series[1].x == [3.0]


def test_kmeans_settings_are_the_public_codes(monkeypatch: pytest.MonkeyPatch) -> None:
    """config/default.yaml of YCRG-Labs/molt-dynamics: kmeans_n_init 100, random_seed 42, k 3..8."""
    seen: list[dict[str, Any]] = []
    real = KMeans

    def spy(**kwargs: Any) -> Any:
        seen.append(kwargs)
        return real(**{**kwargs, "n_init": 2})  # only the arguments are checked here

    monkeypatch.setattr(roles, "KMeans", spy)
    z = np.random.default_rng(1).normal(size=(60, 5))
    best = roles.cluster(z)
    assert best is not None
    assert [kw["n_clusters"] for kw in seen] == [3, 4, 5, 6, 7, 8]
    assert all(kw["n_init"] == 100 and kw["random_state"] == 42 for kw in seen)


def test_no_edges_but_active_agents_says_why() -> None:
    study = roles.study_population(roles.agent_features([]), ["a", "b", "c", "d", "e"])
    assert study.agents == ["a", "b", "c", "d", "e"]
    assert not study.matrix.any()
    assert roles.cluster(roles.standardise(study.matrix)) is None


def test_weighted_silhouette_equals_scikit_learn_on_the_repeated_rows() -> None:
    rng = np.random.default_rng(7)
    points = rng.normal(size=(40, 5))
    weights = rng.integers(1, 6, size=40).astype(float)
    weights[:3] = 1.0
    labels = rng.integers(0, 4, size=40)
    labels[0] = 4  # a cluster of one row: silhouette 0 by convention
    rows = np.repeat(points, weights.astype(int), axis=0)
    want = silhouette_score(rows, np.repeat(labels, weights.astype(int)))
    # scikit-learn's distances use the |x|^2 - 2xy + |y|^2 expansion: agreement to ~1e-9, not 1e-15
    assert roles.weighted_silhouette(points, weights, labels) == pytest.approx(want, rel=1e-8)


def test_clustering_with_repeated_rows_matches_scikit_learn_on_them() -> None:
    """Three blobs plus 300 copies of the origin (isolated agents): same partition, same silhouette."""
    rng = np.random.default_rng(3)
    blobs = [rng.normal(loc, 0.3, size=(25, 5)) for loc in (4.0, 8.0, -6.0)]
    z = np.vstack([np.zeros((300, 5)), *blobs])
    got = roles.cluster(z, n_init=10)
    assert got is not None
    assert got.k == 4
    assert np.bincount(got.labels).max() == 300
    assert got.silhouette == pytest.approx(silhouette_score(z, got.labels), rel=1e-8)


def test_above_the_fit_sample_centres_come_from_a_sample_and_every_agent_gets_one(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Four well separated blobs of 2,000 agents, fitted on 300 of them: the partition is the blobs, every
    agent is labelled, and the report says the centres came from a sample."""
    rng = np.random.default_rng(9)
    sizes = (1_100, 500, 250, 150)
    z = np.vstack(
        [rng.normal(loc, 0.2, size=(m, 5)) for loc, m in zip((0.0, 5.0, -5.0, 10.0), sizes, strict=True)]
    )
    full = roles.cluster(z, n_init=5)
    monkeypatch.setattr(roles, "FIT_SAMPLE", 300)
    got = roles.cluster(z, n_init=5)
    assert full is not None
    assert got is not None
    assert (full.fitted_on, got.fitted_on) == (2_000, 300)
    assert got.k == full.k == 4
    assert got.labels.shape == (2_000,)
    assert sorted(np.bincount(got.labels).tolist()) == sorted(sizes)
    feats = roles.AgentFeatures([f"a{i:04d}" for i in range(2_000)], z, 2_000)
    items = {i.key: i for i in roles._population_items(feats, got, None, "roles", "")}
    fitted = items["roles.fitted_on"]
    assert isinstance(fitted, Scalar)
    assert fitted.value == 300
    assert "a random sample of 300 of 2,000" in fitted.label
    whole = {i.key: i for i in roles._population_items(feats, full, None, "roles", "")}["roles.fitted_on"]
    assert isinstance(whole, Scalar)
    assert "all of them" in whole.label
