"""report.effects: bootstrap CIs over seeds, differences from control, Hedges' g, time series.

Expected values come from direct loops written here (resampling one draw at a time, sorting, interpolating
by hand, variances and the gamma function from their textbook definitions), and from simulations with a
known truth (coverage, A/A, a large effect).
"""

from __future__ import annotations

import json
import math
import statistics

import numpy as np
import pytest
from scipy import stats

from molt_society.report.effects import (
    difference_ci,
    hedges_g,
    mean_ci,
    metric_effects,
    series_effects,
    tail_probability,
)

VALUES = [3.1, 0.4, 2.2, 5.0, 1.7]
CONTROL = [1.0, 0.2, 1.4, 0.9, 2.5, 1.1]


def _tail(df: int, expand: bool) -> float:
    """Phi(-t_{0.975, df}) for the expanded interval (statistics.NormalDist, not scipy's norm), else 2.5%."""
    if not expand:
        return 0.025
    return statistics.NormalDist().cdf(-float(stats.t.ppf(0.975, df)))


def _loop_means(values: list[float], gen: np.random.Generator, resamples: int, expand: bool) -> list[float]:
    """Resampled means, one resample at a time, from values spread by hand about their mean."""
    n = len(values)
    centre = sum(values) / n
    factor = math.sqrt(n / (n - 1)) if expand else 1.0
    spread = [centre + factor * (v - centre) for v in values]
    out = []
    for _ in range(resamples):
        draw = gen.integers(0, n, size=n)
        out.append(sum(spread[int(i)] for i in draw) / n)
    return out


def _percentile(values: list[float], q: float) -> float:
    """The linearly interpolated q-quantile of a sorted copy (position q * (len - 1))."""
    s = sorted(values)
    pos = q * (len(s) - 1)
    lo = math.floor(pos)
    hi = min(lo + 1, len(s) - 1)
    return s[lo] + (pos - lo) * (s[hi] - s[lo])


@pytest.mark.parametrize("expand", [True, False])
def test_mean_ci_equals_a_direct_loop(expand: bool) -> None:
    got = mean_ci(VALUES, rng=np.random.default_rng(42), resamples=2_000, expand=expand)
    means = _loop_means(VALUES, np.random.default_rng(42), 2_000, expand)
    p = _tail(len(VALUES) - 1, expand)
    assert got is not None
    assert got[0] == pytest.approx(_percentile(means, p), rel=1e-12)
    assert got[1] == pytest.approx(_percentile(means, 1 - p), rel=1e-12)


@pytest.mark.parametrize("expand", [True, False])
def test_difference_ci_equals_a_direct_loop(expand: bool) -> None:
    got = difference_ci(VALUES, CONTROL, rng=np.random.default_rng(7), resamples=1_500, expand=expand)
    gen = np.random.default_rng(7)  # treated resamples drawn first, then the control's
    treated = _loop_means(VALUES, gen, 1_500, expand)
    control = _loop_means(CONTROL, gen, 1_500, expand)
    diffs = [t - c for t, c in zip(treated, control, strict=True)]
    p = _tail(len(VALUES) + len(CONTROL) - 2, expand)
    assert got is not None
    assert got[0] == pytest.approx(_percentile(diffs, p), rel=1e-12)
    assert got[1] == pytest.approx(_percentile(diffs, 1 - p), rel=1e-12)


def test_tail_probability_plain_and_expanded() -> None:
    assert tail_probability(4, expand=False) == pytest.approx(0.025)
    # t_{0.975, 4} = 2.7764451...; Phi(-2.7764451) = 0.0027474...
    assert tail_probability(4) == pytest.approx(0.0027474, rel=1e-3)
    assert tail_probability(10_000) == pytest.approx(0.025, rel=1e-2)  # t tends to the normal


def _simulate(delta: float, sims: int = 300, n: int = 5) -> tuple[float, float]:
    """(share of CIs covering delta, share significant) over simulated normal experiments (sd 1)."""
    covered = significant = 0
    for s in range(sims):
        data = np.random.default_rng(10_000 + s)
        treated, control = data.normal(delta, 1.0, n), data.normal(0.0, 1.0, n)
        ci = difference_ci(treated, control, rng=np.random.default_rng(s), resamples=2_000)
        assert ci is not None
        covered += ci[0] <= delta <= ci[1]
        significant += ci[0] > 0 or ci[1] < 0
    return covered / sims, significant / sims


def test_coverage_of_a_known_difference() -> None:
    coverage, _ = _simulate(delta=1.0)
    assert 0.88 <= coverage <= 0.99


def test_a_a_experiments_cover_zero() -> None:
    covered = 0
    for s in range(300):
        data = np.random.default_rng(20_000 + s)
        values = {arm: {seed: float(data.normal()) for seed in range(5)} for arm in ("control", "copy")}
        effect = metric_effects(values, "control", resamples=2_000, seed=s).effects[0]
        assert effect.ci_low is not None
        assert effect.ci_high is not None
        assert effect.significant == (effect.ci_low > 0 or effect.ci_high < 0)
        covered += effect.ci_low <= 0 <= effect.ci_high
    assert covered / 300 >= 0.90


def test_a_large_effect_is_significant() -> None:
    data = np.random.default_rng(3)
    values = {
        "control": {s: float(v) for s, v in enumerate(data.normal(0.0, 1.0, 5))},
        "treated": {s: float(v) for s, v in enumerate(data.normal(3.0, 1.0, 5))},
    }
    result = metric_effects(values, "control", metric="m", resamples=2_000)
    effect = result.effects[0]
    assert effect.significant
    assert effect.ci_low is not None
    assert effect.ci_low > 0
    assert effect.hedges_g is not None
    assert effect.hedges_g > 1.5
    _, power = _simulate(delta=3.0, sims=100)
    assert power >= 0.9


def _hand_hedges_g(t: list[float], c: list[float]) -> float:
    """Hedges (1981): g = J(df) (mean_t - mean_c) / s_pooled, J(df) = G(df/2) / (sqrt(df/2) G((df-1)/2))."""
    nt, nc = len(t), len(c)
    mt, mc = sum(t) / nt, sum(c) / nc
    ss_t = sum((v - mt) ** 2 for v in t)
    ss_c = sum((v - mc) ** 2 for v in c)
    df = nt + nc - 2
    s_pooled = math.sqrt((ss_t + ss_c) / df)
    j = math.gamma(df / 2) / (math.sqrt(df / 2) * math.gamma((df - 1) / 2))
    return j * (mt - mc) / s_pooled


@pytest.mark.parametrize(
    ("treated", "control"),
    [(VALUES, CONTROL), ([1.0, 2.0], [0.0, 0.5]), ([0.3, 0.1, 0.2], [5.0, 4.0, 6.5, 5.5])],
)
def test_hedges_g_matches_the_textbook_formula(treated: list[float], control: list[float]) -> None:
    assert hedges_g(treated, control) == pytest.approx(_hand_hedges_g(treated, control), rel=1e-12)


def test_hedges_g_small_sample_correction() -> None:
    # n = 2 per arm: df = 2, J = G(1) / (1 * G(1/2)) = 1 / sqrt(pi); d = (1.5 - 0.25) / 0.5590...
    d = 1.25 / math.sqrt((0.5 + 0.125) / 2)
    assert hedges_g([1.0, 2.0], [0.0, 0.5]) == pytest.approx(d / math.sqrt(math.pi), rel=1e-12)
    # the usual approximation J ~ 1 - 3 / (4 df - 1) is within 0.1% at df = 9
    g, t, c = hedges_g(VALUES, CONTROL), np.asarray(VALUES), np.asarray(CONTROL)
    pooled = math.sqrt((4 * t.var(ddof=1) + 5 * c.var(ddof=1)) / 9)
    assert g == pytest.approx((1 - 3 / 35) * (t.mean() - c.mean()) / pooled, rel=1e-3)


def test_hedges_g_with_zero_pooled_variance() -> None:
    assert hedges_g([2.0, 2.0, 2.0], [2.0, 2.0]) == 0.0
    assert hedges_g([0.1, 0.1, 0.1], [0.0, 0.0]) == math.inf
    assert hedges_g([0.0, 0.0], [0.1, 0.1, 0.1]) == -math.inf
    assert hedges_g([1.0], [0.0, 1.0]) is None


def test_metric_effects_numbers_order_and_json() -> None:
    values: dict[str, dict[int, float | None]] = {
        "treated": {4: 2.0, 0: 2.0, 2: 2.0},
        "control": {1: 0.0, 0: 0.0, 9: None},  # None: the metric is undefined for that run
        "lonely": {0: 1.0},
    }
    result = metric_effects(values, "control", metric="top1_share", resamples=500, seed=5)
    assert [a.arm for a in result.arms] == ["control", "treated", "lonely"]
    control, _, lonely = result.arms
    assert (control.n, control.mean, control.ci_low, control.ci_high) == (2, 0.0, 0.0, 0.0)
    assert (lonely.n, lonely.mean, lonely.ci_low) == (1, 1.0, None)
    effect, lone = result.effects
    assert (effect.difference, effect.ci_low, effect.ci_high, effect.significant) == (2.0, 2.0, 2.0, True)
    assert effect.hedges_g == math.inf
    assert (lone.difference, lone.ci_low, lone.hedges_g, lone.significant) == (1.0, None, None, False)
    doc = json.loads(json.dumps(result.to_dict(), allow_nan=False))
    assert doc["effects"][0]["hedges_g"] == "inf"
    assert doc["arms"][2] == {"arm": "lonely", "n": 1, "mean": 1.0, "ci_low": None, "ci_high": None}


def test_results_are_deterministic_and_arm_local() -> None:
    data = np.random.default_rng(8)
    values = {arm: {s: float(data.normal()) for s in range(5)} for arm in ("control", "a", "b")}
    first = metric_effects(values, "control", resamples=1_000, seed=11)
    again = metric_effects(values, "control", resamples=1_000, seed=11)
    assert json.dumps(first.to_dict()) == json.dumps(again.to_dict())
    fewer = metric_effects({k: values[k] for k in ("control", "b")}, "control", resamples=1_000, seed=11)
    assert fewer.arms[1] == first.arms[2]  # arm b's numbers do not depend on arm a being there
    assert fewer.effects[0] == first.effects[1]
    other = metric_effects(values, "control", resamples=1_000, seed=12)
    assert other.arms[0].ci_low != first.arms[0].ci_low


def test_missing_control_is_an_error() -> None:
    with pytest.raises(KeyError, match="control"):
        metric_effects({"a": {0: 1.0, 1: 2.0}}, "control")


def test_series_is_the_scalar_result_per_window() -> None:
    data = np.random.default_rng(4)
    windows = [0, 10, 20]
    values: dict[str, dict[int, list[float | None]]] = {
        arm: {s: [float(v) for v in data.normal(shift, 1.0, len(windows))] for s in range(4)}
        for arm, shift in (("control", 0.0), ("treated", 1.0))
    }
    values["treated"][3][1] = None
    series = series_effects(values, "control", windows, metric="m", resamples=800, seed=2)
    assert series.windows == (0, 10, 20)
    for w in range(len(windows)):
        column = {arm: {s: runs[s][w] for s in runs} for arm, runs in values.items()}
        assert series.points[w] == metric_effects(column, "control", metric="m", resamples=800, seed=2)
    assert series.points[1].arms[1].n == 3
    bands = series.bands()
    assert bands["treated"]["mean"] == [p.arms[1].mean for p in series.points]
    assert len(bands["control"]["ci_low"]) == 3
    assert json.loads(json.dumps(series.to_dict()))["points"][2]["arms"][0]["arm"] == "control"


def test_series_with_a_wrong_length_is_an_error() -> None:
    with pytest.raises(ValueError, match="2 values for 3 windows"):
        series_effects({"control": {0: [1.0, 2.0]}}, "control", [0, 1, 2])
