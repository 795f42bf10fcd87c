"""``cascades.cap_exposures``: whole cascades in hash order while their exposures fit, checked by a loop."""

from __future__ import annotations

import numpy as np
import pytest

from molt_society.report import cascades
from molt_society.report.saturation import Diffusion


def _diffusion(rng: np.random.Generator) -> tuple[Diffusion, np.ndarray]:
    n_nodes, n_cascades = 30, 12
    src = rng.integers(0, n_nodes, 200)
    dst = rng.integers(0, n_nodes, 200)
    keep = src != dst
    pairs = np.unique(np.stack([src[keep], dst[keep]], axis=1), axis=0)
    cascade = rng.integers(0, n_cascades, 150)
    agent = np.where(rng.random(150) < 0.1, -1, rng.integers(0, n_nodes, 150))
    d = Diffusion(cascade, agent, rng.random(150) * 10, pairs[:, 0], pairs[:, 1], n_nodes, n_cascades)
    ids = rng.permutation(np.arange(1000, 1000 + n_cascades)).astype(np.uint64) * np.uint64(7919)
    return d, ids


def test_under_the_cap_nothing_changes(monkeypatch: pytest.MonkeyPatch) -> None:
    d, ids = _diffusion(np.random.default_rng(1))
    monkeypatch.setattr(cascades, "MAX_EXPOSURES", 10**9)
    got, used = cascades.cap_exposures(d, ids)
    assert got is d
    assert used == d.n_cascades


@pytest.mark.parametrize("cap", [1, 100, 400, 900])
def test_whole_cascades_in_hash_order_while_they_fit(monkeypatch: pytest.MonkeyPatch, cap: int) -> None:
    d, ids = _diffusion(np.random.default_rng(2))
    monkeypatch.setattr(cascades, "MAX_EXPOSURES", cap)
    out_degree = {v: int((d.src == v).sum()) for v in range(d.n_nodes)}
    exposures = {c: 0 for c in range(d.n_cascades)}
    for c, a in zip(d.cascade, d.agent, strict=True):
        exposures[int(c)] += out_degree[int(a)] if a >= 0 else 0
    chosen: list[int] = []
    total = 0
    for c in sorted(range(d.n_cascades), key=lambda c: int(ids[c])):
        if total + exposures[c] > cap and chosen:
            break
        chosen.append(c)
        total += exposures[c]
    got, used = cascades.cap_exposures(d, ids)
    assert used == got.n_cascades == len(chosen)
    # the same adoptions, in the same order, with cascades renumbered in their old order
    rows = np.isin(d.cascade, chosen)
    renumber = {c: i for i, c in enumerate(sorted(chosen))}
    assert got.cascade.tolist() == [renumber[int(c)] for c in d.cascade[rows]]
    assert got.agent.tolist() == d.agent[rows].tolist()
    assert got.hours.tolist() == d.hours[rows].tolist()
    per_row = [out_degree[int(a)] if a >= 0 else 0 for a in got.agent]
    assert sum(per_row) == total


def test_adoptions_without_a_graph_have_no_exposure(monkeypatch: pytest.MonkeyPatch) -> None:
    """A society whose adopters never interacted: no node, every adopter -1 (a shared sample has this)."""
    empty = np.zeros(0, dtype=np.int64)
    d = Diffusion(np.array([0, 0, 1]), np.array([-1, -1, -1]), np.array([0.0, 1.0, 2.0]), empty, empty, 0, 2)
    monkeypatch.setattr(cascades, "MAX_EXPOSURES", 0)
    got, used = cascades.cap_exposures(d, np.array([5, 3], dtype=np.uint64))
    assert got is d
    assert used == 2
