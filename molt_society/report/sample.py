"""The random sample of agents the semantic and individual sections read when a society is large.

Embedding every text of a 17M-event archive would take days on a CPU, and the individual layer holds every
post's vector. Above ``SOCIETY_REPORT_SAMPLE_TEXTS`` texts (default 50,000), both sections read the texts
of a random sample of agents instead: the agents in the order of ``cityHash64(actor)`` (a fixed
pseudo-random permutation: the same society gives the same sample), taken until their texts reach the
limit. A sampled agent brings all of its posts and comments, so an agent's drift and feedback windows are
whole; the semantic measures are those of the sampled agents' texts, and an interaction counts when both
the commenter and the author of the text commented on are sampled. Each section says the sample's size
and gives bootstrap 95% intervals over the sampled agents (``agent_bootstrap``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from molt_society.report.warehouse_source import Warehouse, quoted
from molt_society.runtime.settings import get_settings

DRAWS = 1000


@dataclass(frozen=True)
class AgentSample:
    """The agents whose texts are read: every one when ``cut`` is None, else those with
    ``cityHash64(actor) <= cut``."""

    cut: int | None
    agents: int  # agents with a text, in the sample
    agents_total: int
    texts: int  # texts (posts and comments) of the sampled agents
    texts_total: int
    limit: int

    @property
    def sampled(self) -> bool:
        return self.cut is not None

    def where(self, column: str = "actor") -> str:
        """A SQL condition on an agent column: true for sampled agents (always true without a sample)."""
        return "1" if self.cut is None else f"cityHash64({column}) <= {self.cut}"

    def describe(self) -> str:
        if self.cut is None:
            return f"every agent ({self.agents_total:,}) and text ({self.texts_total:,})"
        return (
            f"a random sample of {self.agents:,} of {self.agents_total:,} agents (by a hash of the id) with "
            f"{self.texts:,} of {self.texts_total:,} texts (SOCIETY_REPORT_SAMPLE_TEXTS = {self.limit:,})"
        )


def agent_sample(wh: Warehouse, society: str, limit: int | None = None) -> AgentSample:
    """The sample of ``society``'s agents for at most about ``limit`` texts (0: no sample)."""
    cap = get_settings().report_sample_texts if limit is None else limit
    q = quoted(society)
    agents_total, texts_total = (
        int(v) for v in wh.query(f"SELECT uniqExact(actor), count() FROM texts WHERE society = {q}").rows[0]
    )
    if cap <= 0 or texts_total <= cap:
        return AgentSample(None, agents_total, agents_total, texts_total, texts_total, cap)
    # the agents in hash order with their running text count; the last one that keeps it within the limit
    # (at least one agent)
    row = wh.query(
        f"""
        SELECT max(h), count(), max(running) FROM (
            SELECT h, sum(n) OVER (ORDER BY h ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW) AS running,
                   row_number() OVER (ORDER BY h) AS k
            FROM (SELECT cityHash64(actor) AS h, count() AS n FROM texts WHERE society = {q} GROUP BY h)
        ) WHERE running <= {cap} OR k = 1"""
    ).rows[0]
    return AgentSample(int(row[0]), int(row[1]), agents_total, int(row[2]), texts_total, cap)


def agent_bootstrap(
    groups: Sequence[npt.NDArray[np.float64]], *, draws: int = DRAWS, seed: int = 0
) -> tuple[float, float] | None:
    """Percentile 95% interval of the mean of the values of agents drawn with replacement.

    ``groups`` holds each agent's values (an agent's drift, its feedback windows, its comments' impacts);
    a draw takes as many agents as there are, with replacement, and the mean of their pooled values is
    the sum of their sums over the sum of their counts. None with fewer than two agents.
    """
    kept = [g for g in groups if len(g)]
    if len(kept) < 2:
        return None
    sums = np.array([float(np.sum(g)) for g in kept])
    counts = np.array([len(g) for g in kept], dtype=np.float64)
    rng = np.random.default_rng(seed)
    means = np.empty(draws)
    step = max(1, 2_000_000 // len(kept))  # draws at a time: at most about 16 MB of indices
    for start in range(0, draws, step):
        pick = rng.integers(0, len(kept), size=(min(step, draws - start), len(kept)))
        means[start : start + len(pick)] = sums[pick].sum(axis=1) / counts[pick].sum(axis=1)
    lo, hi = np.quantile(means, [0.025, 0.975])
    return float(lo), float(hi)
