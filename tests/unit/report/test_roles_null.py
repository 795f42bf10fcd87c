"""The roles section's null society (``report.roles.shuffled_targets``): every comment keeps its writer and
gets a random target, so each agent writes and receives as many comments as before and who answers whom
is random; its clustering stands beside each published role figure as the null."""

from __future__ import annotations

from collections import Counter

import numpy as np

from molt_society.report import roles
from molt_society.report.comparisons import compare
from molt_society.report.model import Scalar


def _society(seed: int = 3) -> list[tuple[str, str, float]]:
    """Two communities of 30 agents that only answer inside their own, with a few hubs in each."""
    rng = np.random.default_rng(seed)
    pairs: Counter[tuple[str, str]] = Counter()
    for community in ("a", "b"):
        members = [f"{community}{i:02d}" for i in range(30)]
        for _ in range(600):
            src = members[int(rng.integers(30))]
            dst = members[min(int(rng.exponential(4)), 29)]  # low numbers are hubs
            if src != dst:
                pairs[(src, dst)] += 1
    return sorted((s, d, float(n)) for (s, d), n in pairs.items())


def _strengths(edges: list[tuple[str, str, float]]) -> tuple[Counter[str], Counter[str]]:
    out: Counter[str] = Counter()
    into: Counter[str] = Counter()
    for s, d, w in edges:
        out[s] += int(w)
        into[d] += int(w)
    return out, into


def test_shuffled_targets_keep_each_agents_comments_and_randomise_who_answers_whom() -> None:
    edges = _society()
    null = roles.shuffled_targets(edges)
    out, into = _strengths(edges)
    null_out, null_into = _strengths(null)
    dropped = sum(out.values()) - sum(null_out.values())  # comments drawn onto their own writer
    assert 0 <= dropped < 0.05 * sum(out.values())
    # every agent writes as many comments as before, less its self-draws, and receives as many, less its own
    assert all(0 <= out[a] - null_out[a] <= dropped for a in out)
    assert all(0 <= into[a] - null_into[a] <= dropped for a in into)
    assert sum(abs(out[a] - null_out[a]) for a in out) == dropped
    assert all(s != d for s, d, _ in null)
    # the communities are gone: about half of the null's comments cross from one to the other
    crossing = sum(w for s, d, w in null if s[0] != d[0]) / sum(null_out.values())
    assert 0.35 < crossing < 0.65
    assert not any(s[0] != d[0] for s, d, _ in edges)
    assert roles.shuffled_targets(edges) == null  # seeded: the same null every time
    assert roles.shuffled_targets([]) == []


def test_the_null_stands_beside_each_published_role_figure() -> None:
    def sc(key: str, value: float) -> Scalar:
        return Scalar(key, key, value, published=PUBLISHED_ROLES.get(key), published_source="test")

    PUBLISHED_ROLES = {"roles.k": 6.0, "roles.silhouette": 0.91, "roles.peripheral_share": 0.935}
    scalars = [
        sc("roles.k", 5),
        sc("roles.silhouette", 0.9),
        sc("roles.peripheral_share", 0.93),
        sc("roles.active_agents", 5000),
        sc("roles.null_k", 5),
        sc("roles.null_silhouette", 0.92),
        sc("roles.null_peripheral_share", 0.934),
    ]
    got = {c.key: c for c in compare({s.key: s for s in scalars})}
    share = got["roles.peripheral_share"]
    assert share.null is not None
    assert share.null.value == 0.934
    assert share.verdict == "reproduced"  # 0.935 inside Wilson's CI of 0.93 over 5,000 agents
    assert share.null_flag == "not distinguishable from the null"  # the shuffled network agrees as well
    assert got["roles.k"].null is not None
    assert got["roles.silhouette"].null is not None
    # a null society far from the published share: the agreement is the network's, not flagged
    scalars[-1] = sc("roles.null_peripheral_share", 0.6)
    share = {c.key: c for c in compare({s.key: s for s in scalars})}["roles.peripheral_share"]
    assert share.verdict == "reproduced"
    assert share.null_flag is None
