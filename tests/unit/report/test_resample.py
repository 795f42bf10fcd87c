"""The counts bootstrap (report.resample): each weighted statistic equals the statistic of the expanded
values, and the multinomial resampling gives the interval of index resampling."""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
import pytest

from molt_society.report import resample
from molt_society.report.verdicts import COUNTS_FROM, bootstrap_values


@pytest.mark.parametrize("seed", range(25))
def test_weighted_forms_equal_the_statistic_of_the_expanded_values(seed: int) -> None:
    rng = np.random.default_rng(seed)
    low = 0 if seed % 3 == 0 else -5  # non-negative, as counts and upvotes are, or not
    values = np.unique(rng.choice(np.arange(low, 60), size=int(rng.integers(1, 30))).astype(np.float64))
    d = values.size
    counts = rng.integers(0, 9, size=d).astype(np.float64)
    counts[int(rng.integers(0, d))] += 1  # at least one unit
    expanded = np.repeat(values, counts.astype(np.int64))
    for plain, weighted in resample.WEIGHTED.items():
        assert weighted(values, counts) == pytest.approx(plain(expanded), abs=1e-12), plain


def test_gini_and_share_zero_by_hand() -> None:
    assert resample.gini([0, 0, 4]) == pytest.approx(2 / 3)
    assert resample.gini([2, 2]) == 0.0
    assert resample.weighted_gini(np.array([0.0, 4.0]), np.array([2.0, 1.0])) == pytest.approx(2 / 3)
    assert resample.share_zero([0, 1, 0, 3]) == 0.5


def test_counts_bootstrap_gives_the_index_bootstrap_interval() -> None:
    """Comment counts of 60,000 posts (geometric): the counts path (taken at this size) and index
    resampling (the same values below COUNTS_FROM units, tiled to the same mean and spread) give the
    normal-theory interval of the mean; the median's interval holds the median."""
    values = np.random.default_rng(5).geometric(0.3, size=60_000).astype(np.float64) - 1
    assert values.size >= COUNTS_FROM
    assert np.unique(values).size * 4 <= values.size  # the counts path is taken
    ci = bootstrap_values(values)
    assert ci is not None
    half = 1.959964 * values.std(ddof=1) / math.sqrt(values.size)
    assert ci[0] == pytest.approx(values.mean() - half, abs=0.1 * half)
    assert ci[1] == pytest.approx(values.mean() + half, abs=0.1 * half)
    by_index = resample_by_index(values, np.mean, seed=3)
    assert ci[0] == pytest.approx(by_index[0], abs=0.1 * half)
    assert ci[1] == pytest.approx(by_index[1], abs=0.1 * half)
    gini_ci = bootstrap_values(values, resample.gini)
    gini_index = resample_by_index(values, resample.gini, seed=4)
    assert gini_ci is not None
    width = gini_index[1] - gini_index[0]
    assert gini_ci[0] == pytest.approx(gini_index[0], abs=0.15 * width)
    assert gini_ci[1] == pytest.approx(gini_index[1], abs=0.15 * width)
    med = bootstrap_values(values, np.median)
    assert med is not None
    assert med[0] <= float(np.median(values)) <= med[1]
    assert bootstrap_values(values, replicates=50) == bootstrap_values(values, replicates=50)  # seeded


def resample_by_index(
    values: np.ndarray, statistic: Callable[[np.ndarray], float], seed: int, replicates: int = 1_000
) -> tuple[float, float]:
    """The textbook bootstrap: n indices drawn per replicate."""
    rng = np.random.default_rng(seed)
    got = [float(statistic(values[rng.integers(0, values.size, values.size)])) for _ in range(replicates)]
    return float(np.percentile(got, 2.5)), float(np.percentile(got, 97.5))
