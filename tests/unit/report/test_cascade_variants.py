"""Network-following cascades (``report.cascade_variants.network_sizes``): only adoptions exposed by an
earlier adopting predecessor in the interaction graph count, plus the cascade's first adoption. A hand
case, and a power law of known alpha that the network reading keeps when every adopter was exposed and
loses when nobody was."""

from __future__ import annotations

import numpy as np
import pytest

from molt_society.algorithms.powerlaw_fit import fit_discrete_power_law
from molt_society.report import cascade_variants
from molt_society.report.saturation import Diffusion, structure


def _diffusion(rows: list[tuple[int, int, float]], edges: list[tuple[int, int]], n_nodes: int) -> Diffusion:
    """``rows``: (cascade, node, hours); ``edges``: (predecessor, successor)."""
    return Diffusion(
        cascade=np.asarray([r[0] for r in rows], dtype=np.int64),
        agent=np.asarray([r[1] for r in rows], dtype=np.int64),
        hours=np.asarray([r[2] for r in rows], dtype=np.float64),
        src=np.asarray([e[0] for e in edges], dtype=np.int64),
        dst=np.asarray([e[1] for e in edges], dtype=np.int64),
        n_nodes=n_nodes,
        n_cascades=len({r[0] for r in rows}),
    )


def test_only_adoptions_after_an_adopting_predecessor_follow_the_network() -> None:
    # graph: 0 -> 1 -> 2, 3 -> 0; node 4 has no edge into it
    edges = [(0, 1), (1, 2), (3, 0)]
    rows = [
        # cascade 0: 0 first; 1 after its predecessor 0 (follows); 2 after 1 (follows); 4 (no predecessor)
        (0, 0, 0.0), (0, 1, 1.0), (0, 2, 2.0), (0, 4, 3.0),
        # cascade 1: 2 before its predecessor 1 (does not follow); 1 after 0 (follows): size 2
        (1, 2, 0.0), (1, 0, 1.0), (1, 1, 2.0),
        # cascade 2: 1 and 0 at the same time (not strictly earlier): no network cascade
        (2, 1, 5.0), (2, 0, 5.0), (2, 4, 6.0),
    ]  # fmt: skip
    d = _diffusion(rows, edges, 5)
    histogram, adoptions = cascade_variants.network_sizes(d, structure(d))
    assert adoptions == 3
    assert histogram == {3: 1, 2: 1}
    items = {i.key: i for i in cascade_variants.network_items(d, structure(d), sampled=False)}
    assert items["cascades.variant_network.count"].value == 2
    assert items["cascades.variant_network.propagation_events"].value == 3


def _power_law_sizes(alpha: float, n: int, seed: int) -> list[int]:
    """Sizes >= 2 from a discrete power law, by inverting the continuous CDF (x_min 1.5, rounded)."""
    u = np.random.default_rng(seed).random(n)
    return [int(x) for x in np.floor(1.5 * (1 - u) ** (-1 / (alpha - 1)) + 0.5) if x >= 2]


@pytest.mark.parametrize("exposed", [True, False])
def test_a_power_law_of_known_alpha_under_the_network_reading(exposed: bool) -> None:
    """Node 0 adopts every cascade first; each later adopter is a distinct node. With an edge from 0 to
    every node, every later adoption followed the network and the network sizes are the plain sizes (the
    fit finds the alpha they were drawn with); with one edge (1 -> 2), only that edge's adoptions count."""
    sizes = [min(s, 400) for s in _power_law_sizes(2.5, 4_000, seed=7)]
    n_nodes = max(sizes) + 1
    rows = [(c, v, float(v)) for c, size in enumerate(sizes) for v in range(size)]
    edges = [(0, v) for v in range(1, n_nodes)] if exposed else [(1, 2)]
    d = _diffusion(rows, edges, n_nodes)
    histogram, adoptions = cascade_variants.network_sizes(d, structure(d))
    if not exposed:  # the one edge 1 -> 2: node 2's adoption follows it in every cascade of 3 or more
        three_plus = sum(1 for s in sizes if s >= 3)
        assert three_plus > 100
        assert histogram == {2: three_plus}
        assert adoptions == three_plus
        return
    plain: dict[int, int] = {}
    for s in sizes:
        plain[s] = plain.get(s, 0) + 1
    assert histogram == plain
    assert adoptions == sum(s - 1 for s in sizes)
    fit = fit_discrete_power_law(histogram)
    assert fit is not None
    assert fit.alpha == pytest.approx(2.5, abs=0.15)
    alpha = {i.key: i for i in cascade_variants.network_items(d, structure(d), sampled=False)}
    assert alpha["cascades.variant_network.alpha"].value == pytest.approx(fit.alpha)
    low = alpha["cascades.variant_network.alpha_ci_low"].value
    high = alpha["cascades.variant_network.alpha_ci_high"].value
    assert low is not None
    assert high is not None
    assert low <= fit.alpha <= high


def test_followed_adoptions_count_without_the_full_index() -> None:
    edges = [(0, 1), (1, 2), (3, 0)]
    rows = [(0, 0, 0.0), (0, 1, 1.0), (0, 2, 2.0), (0, 4, 3.0), (1, 2, 0.0), (1, 0, 1.0), (1, 1, 2.0)]
    d = _diffusion(rows, edges, 5)
    assert cascade_variants.followed_adoptions(d) == cascade_variants.network_sizes(d, structure(d))[1] == 3


def test_the_rewired_null_separates_contagion_from_independent_adoption() -> None:
    """Contagion (hazard grows with adopting predecessors) follows the actual ties beyond every rewiring;
    adoption drawn independently of the graph does not."""
    from test_saturation import contagion_diffusion, null_diffusion

    contagion = contagion_diffusion(5)
    items = {i.key: i for i in cascade_variants.network_items(contagion, structure(contagion), False)}
    observed = items["cascades.variant_network.propagation_events"].value
    assert observed is not None
    assert observed > (items["cascades.variant_network.null_propagation_events_ci_high"].value or 0)
    assert items["cascades.variant_network.beyond_null_p"].value == pytest.approx(1 / 31)
    independent = null_diffusion(11)
    items = {i.key: i for i in cascade_variants.network_items(independent, structure(independent), False)}
    assert (items["cascades.variant_network.beyond_null_p"].value or 0) > 0.05
    hi = items["cascades.variant_network.null_propagation_events_ci_high"].value
    assert hi is not None
    assert (items["cascades.variant_network.propagation_events"].value or 0) <= hi  # not beyond: one-sided
