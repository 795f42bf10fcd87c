"""The bootstrap of a statistic over many units that take few distinct values (counts, upvotes, depths).

Resampling n units with replacement and counting how often each distinct value was drawn gives a
multinomial vector of counts with n trials and the values' shares as probabilities; a statistic that
depends only on the multiset of values (a mean, a median, a share, a Gini) is then computed from the
distinct values and those counts. That is the same bootstrap distribution as drawing n indices per
replicate, at a cost that grows with the number of distinct values instead of n (3.8 million posts'
comment counts take some 200 distinct values). ``verdicts.bootstrap_values`` takes this path for the
statistics below (``WEIGHTED``) when the units are many; each weighted form equals the statistic of the
values repeated their counts times (``tests/unit/report/test_resample.py``).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import numpy.typing as npt

FloatArray = npt.NDArray[np.float64]
Weighted = Callable[[FloatArray, FloatArray], float]  # (distinct values ascending, counts) -> statistic
DRAW_CELLS = 4_000_000  # multinomial counts drawn at once (replicates x distinct values): ~32 MB


def gini(values: npt.ArrayLike) -> float:
    """``gini_coefficient`` of ln9527/moltbook-research ``analysis/descriptive_stats.py``."""
    x = np.sort(np.asarray(values, dtype=float))
    n, total = len(x), float(x.sum())
    if n == 0 or total == 0:
        return 0.0
    i = np.arange(1, n + 1, dtype=float)
    return float(np.sum((2 * i - n - 1) * x) / (n * total))


def share_zero(values: npt.ArrayLike) -> float:
    """Share of the values that are 0."""
    return float(np.mean(np.asarray(values, dtype=float) == 0))


def weighted_mean(values: FloatArray, counts: FloatArray) -> float:
    return float(values @ counts / counts.sum())


def weighted_share_zero(values: FloatArray, counts: FloatArray) -> float:
    return float(counts[values == 0].sum() / counts.sum())


def weighted_median(values: FloatArray, counts: FloatArray) -> float:
    """``np.median`` of the expanded values: the middle one, or the mean of the two middle ones."""
    n = round(float(counts.sum()))
    ends = np.cumsum(counts)  # the 1-based rank of each distinct value's last copy
    low, high = (n - 1) // 2, n // 2  # 0-based ranks of the middle element(s)
    at = np.searchsorted(ends, [low + 1, high + 1], side="left")
    return float((values[at[0]] + values[at[1]]) / 2)


def weighted_gini(values: FloatArray, counts: FloatArray) -> float:
    """``gini`` of the expanded values: the copies of the j-th distinct value hold the ranks
    ``start_j + 1 .. end_j``, whose sum is ``counts_j (start_j + end_j + 1) / 2``."""
    n = float(counts.sum())
    total = float(values @ counts)
    if n == 0 or total == 0:
        return 0.0
    ends = np.cumsum(counts)
    starts = ends - counts
    rank_weight = counts * (starts + ends + 1) - (n + 1) * counts  # sum over the copies of (2i - n - 1)
    return float(values @ rank_weight / (n * total))


WEIGHTED: dict[Callable[..., float], Weighted] = {
    np.mean: weighted_mean,
    np.median: weighted_median,
    gini: weighted_gini,
    share_zero: weighted_share_zero,
}


def bootstrap_counts(
    values: FloatArray, counts: npt.NDArray[np.int64], statistic: Weighted, replicates: int, seed: int
) -> list[float]:
    """``replicates`` bootstrap values of ``statistic`` over the units ``values`` (distinct, ascending)
    repeated ``counts`` times: each replicate's counts are one multinomial draw with ``counts.sum()``
    trials and the values' shares as probabilities."""
    n = int(counts.sum())
    p = counts / n
    rng = np.random.default_rng(seed)
    chunk = max(1, DRAW_CELLS // max(1, values.size))
    got: list[float] = []
    while len(got) < replicates:
        drawn = rng.multinomial(n, p, size=min(chunk, replicates - len(got))).astype(np.float64)
        got.extend(statistic(values, row) for row in drawn)
    return got
