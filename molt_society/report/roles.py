"""Structural roles (Molt Dynamics): k-means on per-agent features of the interaction graph.

Population (the published 0.91 silhouette and 93.5% peripheral share): every *active* agent, i.e. every
agent that wrote at least one post or comment, whether or not it has an interaction edge. The public code
(YCRG-Labs/molt-dynamics, ``src/molt_dynamics/features.py``, ``FeatureExtractor.extract_all_features``)
computes features for every agent of its agent table and ``compute_centrality_metrics`` gives an agent that
is not in the interaction network in-degree, out-degree, betweenness, clustering and PageRank all 0; those
rows are clustered with the others (``main.run_rq1_analysis`` -> ``rq1_roles.RoleAnalyzer``). So isolated
agents are one point at the origin of the raw features and usually form the big "peripheral" cluster.
Our active agents are the authors of ``post_created``/``comment_created`` events (the public code's
features come from posts and comments only; votes are not part of them).

Variant (keys ``roles.variant_graph_only.*``, labelled "variant: graph-only", no published value): the
same clustering on the agents with at least one interaction edge only, which is what this module used to
report as the study value (and what the later re-analysis ``scripts/run_rigor.py``, ``task1_clusters``,
clusters: the igraph graph's nodes).

Null society (keys ``roles.null_k``, ``roles.null_silhouette``, ``roles.null_peripheral_share``, beside
each published role figure as its null): the same population and clustering on the interaction graph with
every comment's target shuffled (``shuffled_targets``: each agent writes and receives as many comments as
it did, who answers whom is random). A role structure the null society shows as well is what the activity
distribution alone gives, not structure of the network.

The graph is the whole history's interaction graph (view ``interaction_edges``: commenter -> author of
what it answers, self-edges dropped, weight = number of comments). Per agent, five features, as
``features.FeatureExtractor.compute_centrality_metrics`` computes them with networkx:

* in-degree and out-degree: number of distinct neighbours (the simple directed graph), not comments;
* betweenness: directed, unweighted, normalised by ``(n - 1)(n - 2)`` over the graph's n nodes as
  ``networkx.betweenness_centrality`` does; above ``EXACT_BETWEENNESS_MAX`` nodes it is estimated from
  ``SAMPLED_SOURCES`` shortest-path sources drawn with a fixed seed, scaled by ``n / sources``
  (Brandes-Pich), and the report says how many were used;
* clustering coefficient: on the undirected simple graph (direction and multiplicity dropped), 0 for
  an agent with fewer than two neighbours (``networkx.clustering`` of ``to_undirected()``);
* PageRank: weighted, damping 0.85, ``algorithms.pagerank`` (equals ``networkx.pagerank``), over the graph.

The public code has a second clustering (``RoleAnalyzer`` with ``feature_set='full'``) of every numeric
column of ``extract_all_features`` (activity counts, submolt entropy, hour-of-day shares, burstiness, text
length, VADER sentiment, ...); the paper and ``../shared/notes/metrics.md`` describe the five network
features, which is the study reading here, and the full set is the labelled variant
``roles.variant_public_code.*`` (``report.roles_public``).

As the public code (``rq1_roles.RoleAnalyzer.find_optimal_k`` with ``config/default.yaml``): features
z-scored (``StandardScaler``: population standard deviation; a constant feature is left as it is, which
changes no distance, here it becomes 0), k-means (scikit-learn) with ``n_init=100``, ``random_state=42``
for k = 3..8, the silhouette (``silhouette_score``, Euclidean) of each, the k with the highest silhouette
(ties: the smaller k). Departures: a k is tried only when the data has at least k + 1 distinct points (the
public code would let k-means return duplicate centres); identical rows are clustered once with their
multiplicity as ``sample_weight`` and the silhouette of the repeated rows is computed exactly from the
distinct ones (``cluster``); above ``SILHOUETTE_SAMPLE`` distinct points the silhouette is computed on a
seeded sample of that many rows (the public code computes it on all rows, O(n^2)); above ``FIT_SAMPLE``
agents (a society of some 10 million events) the centres are fitted on a seeded random sample of that many
agents and every agent is then assigned to its nearest centre (``KMeans.predict``), which the report says
beside each clustering (``*.fitted_on``): 100 initialisations of each of six k on every agent would grow
with the society (750,000 agents at 17M events). The
public code names no cluster "peripheral"; the paper's peripheral cluster is the largest one, and so is
ours.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass

import igraph as ig
import numpy as np
import numpy.typing as npt
import structlog
from sklearn.cluster import KMeans
from sklearn.metrics import silhouette_score
from sklearn.metrics.pairwise import euclidean_distances

from molt_society.algorithms.pagerank import pagerank
from molt_society.report import roles_public
from molt_society.report.model import Figure, Item, Scalar, Series, Table
from molt_society.report.text_source import text_source
from molt_society.report.warehouse_source import Warehouse, quoted

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]

log = structlog.get_logger(__name__)

FEATURES = ("in_degree", "out_degree", "betweenness", "clustering", "pagerank")
K_RANGE = range(3, 9)  # config/default.yaml kmeans_k_range: [3, 8]
KMEANS_N_INIT = 100  # config/default.yaml kmeans_n_init
SEED = 42  # config/default.yaml random_seed (k-means, silhouette sample, betweenness sources)
EXACT_BETWEENNESS_MAX = 5_000
SAMPLED_SOURCES = 500
SILHOUETTE_SAMPLE = 20_000
FIT_SAMPLE = 60_000  # above this many agents the centres are fitted on a seeded sample of this many
VARIANT = "roles.variant_graph_only"
VARIANT_LABEL = "variant: graph-only (agents with an interaction edge): "
PUBLIC = "roles.variant_public_code"
PUBLIC_LABEL = "variant: the public code's full feature set (42 columns, PCA to 10; report.roles_public): "
_SILHOUETTE_CHUNK = 2_048
PERIPHERAL_LABEL = "Share of agents in the largest (peripheral) cluster"
NULL_LABEL = "null society (every comment's target shuffled)"


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
    fitted_on: int  # rows the centres were fitted on (all, or a seeded sample of FIT_SAMPLE)


def interaction_graph(wh: Warehouse, society: str) -> list[tuple[str, str, float]]:
    """Weighted edges ``(src, dst, comments)`` of the society's whole-history interaction graph."""
    res = wh.query(
        "SELECT src, dst, count() AS w FROM interaction_edges "
        f"WHERE society = {quoted(society)} GROUP BY src, dst ORDER BY src, dst"
    )
    return [(str(s), str(d), float(w)) for s, d, w in res.rows]


def active_agents(wh: Warehouse, society: str) -> list[str]:
    """Agents that wrote at least one post or comment in the society's history, sorted."""
    res = wh.query(
        "SELECT DISTINCT actor FROM events FINAL "
        f"WHERE society = {quoted(society)} AND type IN ('post_created', 'comment_created') AND actor != '' "
        "ORDER BY actor"
    )
    return [str(r[0]) for r in res.rows]


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


def shuffled_targets(edges: list[tuple[str, str, float]], seed: int = SEED) -> list[tuple[str, str, float]]:
    """The null society's interaction graph: every comment keeps its writer and gets a target drawn from all
    comments' targets without replacement (one random permutation, seeded), so each agent writes and
    receives as many comments as it did; who answers whom is random. A comment drawn onto its own writer is
    dropped, as self-edges are from the graph."""
    if not edges:
        return []
    weights = np.asarray([int(w) for _s, _d, w in edges], dtype=np.int64)
    src = np.repeat(np.arange(len(edges)), weights)
    dst = np.random.default_rng(seed).permutation(src)
    pairs: Counter[tuple[str, str]] = Counter(
        (edges[s][0], edges[d][1]) for s, d in zip(src.tolist(), dst.tolist(), strict=True)
    )
    return sorted((s, d, float(n)) for (s, d), n in pairs.items() if s != d)


def study_population(graph: AgentFeatures, active: Iterable[str]) -> AgentFeatures:
    """The study's population: every active agent, with all five features 0 for those not in the graph.

    Graph agents are active by construction (an edge is a comment on a post or comment), but they are
    added anyway so that no graph row is ever dropped.
    """
    agents = sorted(set(active) | set(graph.agents))
    matrix = np.zeros((len(agents), len(FEATURES)), dtype=np.float64)
    if graph.agents:
        index = {a: i for i, a in enumerate(agents)}
        matrix[[index[a] for a in graph.agents]] = graph.matrix
    return AgentFeatures(agents, matrix, graph.betweenness_sources)


def standardise(matrix: FloatArray) -> FloatArray:
    """Column z-scores (population standard deviation); a constant column becomes all zeros."""
    mean = matrix.mean(axis=0)
    std = matrix.std(axis=0)
    safe = np.where(std > 0, std, 1.0)
    return np.asarray((matrix - mean) / safe, dtype=np.float64)


def cluster(z: FloatArray, *, n_init: int | None = None, seed: int = SEED) -> Clustering | None:
    """k-means for each allowed k in ``K_RANGE``, the one with the best silhouette; None if none allowed.

    Identical rows (every isolated agent is the same point) are clustered once, weighted by how many
    agents share them (``sample_weight``): Lloyd's iterations and the k-means++ sampling are then the same
    as on the repeated rows, only the random draws are spent differently. The silhouette is the exact
    silhouette of the repeated rows (``weighted_silhouette``), or scikit-learn's on a seeded sample of
    ``SILHOUETTE_SAMPLE`` rows when there are more distinct points than that. Above ``FIT_SAMPLE`` rows the
    centres are fitted on a seeded sample of that many rows and every row gets its nearest centre; the
    silhouette is then the sampled one. ``n_init`` None: the public code's ``KMEANS_N_INIT``.
    """
    n = z.shape[0]
    if n == 0:
        return None
    fit = z
    if n > FIT_SAMPLE:
        fit = z[np.sort(np.random.default_rng(seed).choice(n, size=FIT_SAMPLE, replace=False))]
    points, inverse, counts = np.unique(fit, axis=0, return_inverse=True, return_counts=True)
    inverse = inverse.ravel()
    weights = counts.astype(np.float64)
    best: Clustering | None = None
    scores: dict[int, float] = {}
    for k in K_RANGE:
        if points.shape[0] < k + 1:
            break
        km = KMeans(n_clusters=k, n_init=n_init or KMEANS_N_INIT, random_state=seed).fit(
            points, sample_weight=weights
        )
        point_labels = np.asarray(km.labels_, dtype=np.int64)
        # fitted on a sample: every agent to its nearest centre
        labels = point_labels[inverse] if fit is z else np.asarray(km.predict(z), dtype=np.int64)
        if fit is z and points.shape[0] <= SILHOUETTE_SAMPLE:
            score = weighted_silhouette(points, weights, point_labels)
        else:
            score = float(silhouette_score(z, labels, sample_size=SILHOUETTE_SAMPLE, random_state=seed))
        scores[k] = score
        if best is None or score > best.silhouette:
            best = Clustering(k, labels, score, scores, fit.shape[0])
    return best


def weighted_silhouette(points: FloatArray, weights: FloatArray, labels: IntArray) -> float:
    """Mean silhouette of a data set given as distinct ``points`` repeated ``weights`` times.

    Equals ``sklearn.metrics.silhouette_score`` of the repeated rows (Euclidean): for a row, ``a`` is its
    mean distance to the other rows of its cluster, ``b`` the smallest mean distance to another cluster,
    ``s = (b - a) / max(a, b)``, and 0 for a row alone in its cluster. Copies of a point are at distance 0
    from it, so only the divisor of ``a`` (cluster size - 1) counts them. O(distinct points^2), in chunks.
    """
    k = int(labels.max()) + 1
    member = np.zeros((points.shape[0], k), dtype=np.float64)
    member[np.arange(points.shape[0]), labels] = weights
    sizes = member.sum(axis=0)
    total = 0.0
    for start in range(0, points.shape[0], _SILHOUETTE_CHUNK):
        stop = min(start + _SILHOUETTE_CHUNK, points.shape[0])
        sums = euclidean_distances(points[start:stop], points) @ member  # summed distance to each cluster
        own = labels[start:stop]
        rows = np.arange(stop - start)
        own_size = sizes[own]
        a = sums[rows, own] / np.maximum(own_size - 1.0, 1.0)
        mean_other = sums / sizes
        mean_other[rows, own] = np.inf
        b = mean_other.min(axis=1)
        denom = np.maximum(a, b)
        s = np.where((own_size > 1) & (denom > 0), (b - a) / np.where(denom > 0, denom, 1.0), 0.0)
        total += float((s * weights[start:stop]).sum())
    return total / float(weights.sum())


def items(wh: Warehouse, society: str) -> list[Item]:
    """The study's clustering (every active agent) with its published comparators, and the graph-only variant.

    Scalars: active agents, isolated ones, agents in the graph, betweenness sources; then k, silhouette and
    peripheral share of the study population (keys ``roles.k`` ...) and of the variant (keys
    ``roles.variant_graph_only.*``, no published value); a table of clusters for each; silhouette by k.
    """
    edges = interaction_graph(wh, society)
    active = active_agents(wh, society)
    graph = agent_features(edges)
    study = study_population(graph, active)
    n_active, n_graph = len(study.agents), len(graph.agents)
    log.info("roles", society=society, active_agents=n_active, graph_agents=n_graph)
    out: list[Item] = [
        Scalar(
            "roles.active_agents",
            "Active agents (wrote a post or a comment): the clustered population",
            n_active,
            unit="agents",
        ),
        Scalar(
            "roles.isolated_agents",
            "Active agents without an interaction edge (clustered with all features 0)",
            n_active - n_graph,
            unit="agents",
        ),
        Scalar("roles.agents", "Agents in the interaction graph", n_graph, unit="agents"),
    ]
    if n_graph == 0:
        out.append(
            Scalar(
                "roles.betweenness_sources",
                "Betweenness: shortest-path sources used",
                None,
                "no interaction edges: no agent commented on another agent's post or comment",
            )
        )
    else:
        sampled = graph.betweenness_sources < n_graph
        out.append(
            Scalar(
                "roles.betweenness_sources",
                "Betweenness: shortest-path sources used"
                + (f" (sampled, seed {SEED}, scaled by n / sources)" if sampled else " (all: exact)"),
                graph.betweenness_sources,
                unit="sources",
            )
        )

    series: list[Series] = []
    for feats, prefix, label, population in (
        (study, "roles", "", "all active agents"),
        (graph, VARIANT, VARIANT_LABEL, "variant: graph-only"),
    ):
        best, reason = _best_clustering(feats, n_active)
        out += _population_items(feats, best, reason, prefix, label)
        series += _silhouette_series(population, best)
    public_items, public_series = _public_items(wh, society, study)
    out += public_items
    series += public_series
    null = study_population(agent_features(shuffled_targets(edges)), active)
    best_null, why_null = _best_clustering(null, n_active)
    out += _null_items(null, best_null, why_null)
    series += _silhouette_series(NULL_LABEL, best_null)
    out.append(
        Figure(
            "roles.silhouette_by_k",
            "Silhouette of k-means by number of clusters: active agents (study), the variants, the null",
            "k",
            "silhouette",
            series,
            None if series else "no clustering could be computed (see the roles scalars for why)",
        )
    )
    return out


def _public_items(wh: Warehouse, society: str, study: AgentFeatures) -> tuple[list[Item], list[Series]]:
    """The public-code variant's scalars and cluster table, and its silhouette-by-k series."""
    public, why_public, columns, population = _public_code_clustering(wh, society, study)
    label = PUBLIC_LABEL
    if len(population.agents) < len(study.agents):
        label += (
            f"on a random sample of {len(population.agents):,} of {len(study.agents):,} active agents (the "
            "first by a hash of the id): "
        )
    items = _population_items(population, public, why_public, PUBLIC, label)
    items.append(
        Scalar(
            f"{PUBLIC}.columns",
            label + "feature columns clustered (after dropping constant ones; PCA to "
            f"{roles_public.PCA_COMPONENTS} components above that many): " + ", ".join(columns),
            len(columns),
        )
    )
    return items, _silhouette_series("variant: the public code's features", public)


def _silhouette_series(name: str, best: Clustering | None) -> list[Series]:
    """The silhouette of every k tried, as one line of the figure (none without a clustering)."""
    if best is None:
        return []
    ks = sorted(best.silhouettes)
    return [Series(name, [float(k) for k in ks], [best.silhouettes[k] for k in ks], style="line")]


def _public_code_clustering(
    wh: Warehouse, society: str, study: AgentFeatures
) -> tuple[Clustering | None, str | None, list[str], AgentFeatures]:
    """The study population clustered on the public code's full feature set (``report.roles_public``);
    above ``FIT_SAMPLE`` agents, the first ``FIT_SAMPLE`` of them by ``cityHash64`` of the id (a fixed
    pseudo-random order, as ``report.sample``): their behaviour columns, VADER on their texts above all,
    are what would otherwise grow with the society. Returns the population clustered too."""
    if not study.agents:
        return None, "no active agents: nobody wrote a post or a comment", [], study
    population, cut = _public_population(wh, society, study)
    src = text_source(wh, society)
    behaviour = roles_public.features(
        wh,
        society,
        population.agents,
        population.matrix,
        with_content=not src.synthetic,
        hash_cut=cut,
    )
    z, kept = roles_public.reduced(behaviour)
    best = cluster(z)
    why = (
        None if best is not None else f"k-means needs at least {K_RANGE[0] + 1} agents with distinct features"
    )
    if not src.synthetic:
        return best, why, kept, population
    return best, why, [*kept, "(content columns left out: the society's texts are synthetic)"], population


def _public_population(wh: Warehouse, society: str, study: AgentFeatures) -> tuple[AgentFeatures, int | None]:
    """``study`` itself up to ``FIT_SAMPLE`` agents; else its agents among the first ``FIT_SAMPLE`` active
    agents by ``cityHash64(actor)``, and that hash's cut."""
    if len(study.agents) <= FIT_SAMPLE:
        return study, None
    rows = wh.query(
        "SELECT actor, cityHash64(actor) AS h FROM (SELECT DISTINCT actor FROM events FINAL "
        f"WHERE society = {quoted(society)} AND type IN ('post_created', 'comment_created') AND actor != '') "
        f"ORDER BY h, actor LIMIT {FIT_SAMPLE}"
    ).rows
    chosen = {str(a) for a, _h in rows}
    keep = [i for i, a in enumerate(study.agents) if a in chosen]
    sample = AgentFeatures([study.agents[i] for i in keep], study.matrix[keep], study.betweenness_sources)
    return sample, max((int(h) for _a, h in rows), default=0)


def _best_clustering(feats: AgentFeatures, n_active: int) -> tuple[Clustering | None, str | None]:
    """The best clustering of one population, or None and the reason."""
    n = len(feats.agents)
    if n_active == 0:
        return None, "no active agents and no interaction edges: nobody wrote a post or a comment"
    if n == 0:
        return None, "no interaction edges: no agent commented on another agent's post or comment"
    best = cluster(standardise(feats.matrix))
    if best is not None:
        return best, None
    distinct = np.unique(feats.matrix, axis=0).shape[0]
    if not feats.matrix.any():
        return None, (
            f"no interaction edges: all {n} active agents have all-zero features, nothing to cluster"
        )
    return None, (
        f"k-means with k = {K_RANGE[0]} needs at least {K_RANGE[0] + 1} agents with distinct features; "
        f"the population has {n} agents, {distinct} distinct"
    )


def _population_items(
    feats: AgentFeatures, best: Clustering | None, reason: str | None, prefix: str, label: str
) -> list[Item]:
    """k, silhouette, peripheral share and the cluster table of one population (keys under ``prefix``)."""
    table_title = label + "Roles: clusters by size, mean raw feature values"
    if best is None:
        return [
            Scalar(f"{prefix}.k", label + "Number of roles (best k)", None, reason),
            Scalar(f"{prefix}.silhouette", label + "Silhouette of the best k", None, reason),
            Scalar(f"{prefix}.peripheral_share", label + PERIPHERAL_LABEL, None, reason),
            Table(f"{prefix}.clusters", table_title, [], [], reason),
        ]
    n = len(feats.agents)
    sizes = np.bincount(best.labels, minlength=best.k)
    order = sorted(range(best.k), key=lambda c: (-int(sizes[c]), c))
    rows: list[list[float | int | str | None]] = []
    for rank, c in enumerate(order, start=1):
        members = feats.matrix[best.labels == c]
        rows.append([rank, int(sizes[c]), float(sizes[c]) / n, *(float(v) for v in members.mean(axis=0))])
    fitted = (
        "all of them"
        if best.fitted_on >= n
        else f"a random sample of {best.fitted_on:,} of {n:,} (seed {SEED}), every agent then to its nearest "
        "centre"
    )
    return [
        Scalar(f"{prefix}.fitted_on", label + f"k-means centres fitted on agents: {fitted}", best.fitted_on),
        Scalar(f"{prefix}.k", label + "Number of roles (best k)", best.k),
        Scalar(f"{prefix}.silhouette", label + "Silhouette of the best k", best.silhouette),
        Scalar(f"{prefix}.peripheral_share", label + PERIPHERAL_LABEL, float(sizes[order[0]]) / n),
        Table(
            f"{prefix}.clusters",
            table_title,
            ["cluster", "agents", "share", *(f"mean {f}" for f in FEATURES)],
            rows,
        ),
    ]


def _null_items(feats: AgentFeatures, best: Clustering | None, reason: str | None) -> list[Item]:
    """k, silhouette and peripheral share of the null society (``shuffled_targets``)."""
    labels = {
        "roles.null_k": "Number of roles (best k)",
        "roles.null_silhouette": "Silhouette of the best k",
        "roles.null_peripheral_share": PERIPHERAL_LABEL,
    }
    if best is None:
        return [Scalar(key, f"{NULL_LABEL}: {label}", None, reason) for key, label in labels.items()]
    sizes = np.bincount(best.labels, minlength=best.k)
    values = [best.k, best.silhouette, float(sizes.max()) / len(feats.agents)]
    return [
        Scalar(key, f"{NULL_LABEL}: {label}", value)
        for (key, label), value in zip(labels.items(), values, strict=True)
    ]
