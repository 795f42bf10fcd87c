"""Thread-depth histogram helpers against direct computations on the raw per-post values."""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest

from molt_society.streams.thread_stats import depth_histogram, mean_depth, merge_histograms, share_zero


def _depths(seed: int, n: int) -> list[int]:
    """Per-post depths with many zeros (no comments) and a few deep threads."""
    rng = np.random.default_rng(seed)
    return [int(d) for d in np.where(rng.random(n) < 0.6, 0, rng.geometric(0.7, n))]


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_against_raw_values(seed: int) -> None:
    depths = _depths(seed, 2000)
    hist = depth_histogram(depths)
    assert hist == dict(Counter(depths))
    assert list(hist) == sorted(hist)
    arr = np.array(depths)
    assert share_zero(hist) == pytest.approx(float(np.mean(arr == 0)))
    assert mean_depth(hist) == pytest.approx(float(arr.mean()))
    assert mean_depth(hist, only_nonzero=True) == pytest.approx(float(arr[arr > 0].mean()))


def test_empty_and_degenerate() -> None:
    assert depth_histogram([]) == {}
    assert share_zero({}) == 0.0
    assert mean_depth({}) == 0.0
    assert mean_depth({}, only_nonzero=True) == 0.0
    only_zero = depth_histogram([0, 0, 0])
    assert share_zero(only_zero) == 1.0
    assert mean_depth(only_zero) == 0.0
    assert mean_depth(only_zero, only_nonzero=True) == 0.0
    assert share_zero({1: 4, 3: 1}) == 0.0


def test_merge_equals_histogram_of_concatenation() -> None:
    parts = [_depths(seed, n) for seed, n in ((4, 300), (5, 0), (6, 1000), (7, 17))]
    merged = merge_histograms(depth_histogram(p) for p in parts)
    assert merged == depth_histogram([d for p in parts for d in p])
    assert list(merged) == sorted(merged)
    assert merge_histograms([]) == {}
    assert merge_histograms([{2: 0, 1: 3}, {1: 1}]) == {1: 4}


def test_rejects_negative() -> None:
    with pytest.raises(ValueError):
        depth_histogram([0, 1, -1])
    with pytest.raises(ValueError):
        share_zero({0: -1, 1: 2})
    with pytest.raises(ValueError):
        merge_histograms([{1: -2}])
