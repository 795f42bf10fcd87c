"""The verdict rules (``report.verdicts``) and the comparisons built on them (``report.comparisons``), on
constructed data whose answer is known: intervals from statsmodels, power laws of known alpha, a society
whose saturation the null also shows and one whose it does not."""

from __future__ import annotations

import math

import numpy as np
import pytest
from statsmodels.stats.proportion import proportion_confint

from molt_society.report.cascade_variants import clauset_alpha, hill_alpha
from molt_society.report.comparisons import compare, section
from molt_society.report.model import Scalar, Table
from molt_society.report.published import annotate
from molt_society.report.verdicts import (
    NOT_DISTINGUISHABLE,
    Reading,
    bootstrap,
    bootstrap_values,
    judge,
    null_flag,
    wilson,
)


def test_inside_the_published_ci_is_reproduced() -> None:
    verdict, why = judge(2.57, (2.55, 2.59), Reading("ours", 2.58), None)
    assert verdict == "reproduced"
    assert "inside the published CI" in why
    assert judge(2.57, (2.55, 2.59), Reading("ours", 2.73, (2.6, 2.9)), None)[0] == "differs"


def test_without_a_published_ci_our_ci_decides() -> None:
    assert judge(0.53, None, Reading("ours", 0.6, (0.5, 0.7)), 1.0)[0] == "reproduced"
    assert judge(0.53, None, Reading("ours", 0.8, (0.7, 0.9)), 1.0)[0] == "same direction"
    assert judge(0.53, None, Reading("ours", 1.3, (1.1, 1.5)), 1.0)[0] == "differs"
    assert (
        judge(0.53, None, Reading("ours", 1.0, (0.9, 1.1)), 1.0)[0] == "differs"
    )  # on the reference: no side


def test_no_ci_on_either_side_needs_equality() -> None:
    assert judge(6, None, Reading("k", 6.0), None)[0] == "reproduced"
    assert judge(6, None, Reading("k", 5.0), None)[0] == "differs"


def test_not_comparable_and_missing_values_say_why() -> None:
    assert judge(164, None, Reading("n", 164.0), None, "a count of another population") == (
        "not comparable",
        "a count of another population",
    )
    verdict, why = judge(0.9, None, Reading("x", None, reason="no agents"), None)
    assert verdict == "not comparable"
    assert "no agents" in why


def test_a_null_with_the_same_verdict_is_flagged() -> None:
    ours = Reading("ours", 0.6, (0.55, 0.65))
    verdict, _ = judge(0.53, None, ours, 1.0)
    assert verdict == "same direction"
    assert null_flag(verdict, 0.53, None, Reading("null", 0.7), 1.0) == NOT_DISTINGUISHABLE
    assert null_flag(verdict, 0.53, None, Reading("null", 1.02), 1.0) is None
    assert null_flag("differs", 0.53, None, Reading("null", 0.7), 1.0) is None
    # with the null societies' range: inside it is indistinguishable, whatever the null's median says
    assert null_flag(verdict, 0.53, None, Reading("null", 0.9, (0.5, 1.1)), 1.0, 0.6) == NOT_DISTINGUISHABLE
    assert null_flag(verdict, 0.53, None, Reading("null", 0.7, (0.65, 0.8)), 1.0, 0.6) is None
    # beyond the range on the other side (a weaker effect than the null's) is no evidence either: a daily
    # top share falling less steeply than in every null society of the same growth
    trend = Reading("null", -1.0, (-1.0, -1.0))
    assert null_flag("reproduced", -1.0, (-1.0, -1e-12), trend, 0.0, -0.667) == NOT_DISTINGUISHABLE


@pytest.mark.parametrize(("share", "n"), [(0.067, 164), (0.5, 10), (0.0, 30), (1.0, 7), (0.935, 90_704)])
def test_wilson_matches_statsmodels(share: float, n: int) -> None:
    lo, hi = proportion_confint(round(share * n), n, alpha=0.05, method="wilson")
    got = wilson(round(share * n) / n, n)
    assert got is not None
    assert got == pytest.approx((lo, hi), abs=1e-6)


def _zeta_sample(alpha: float, n: int, seed: int) -> dict[int, int]:
    draws = np.random.default_rng(seed).zipf(alpha, n)
    values, counts = np.unique(draws, return_counts=True)
    return {int(v): int(c) for v, c in zip(values, counts, strict=True)}


@pytest.mark.parametrize("alpha", [2.2, 2.57, 3.0])
def test_a_power_law_of_known_alpha_is_recovered_with_its_interval(alpha: float) -> None:
    """Cascade sizes drawn from a discrete power law (zeta) of known alpha: the Clauset fit's bootstrap
    interval holds it. The public code's Hill estimator (continuous, x_min = smallest) is biased on
    discrete sizes from 1 (it reads x_min = 1 as a continuous bound): its interval misses alpha, which
    is what the multiverse shows."""
    sizes = _zeta_sample(alpha, 5000, seed=7)
    ci = bootstrap(sizes, clauset_alpha, replicates=60, seed=1)
    assert ci is not None
    assert ci[0] <= alpha <= ci[1]
    hill = hill_alpha(sizes)
    assert hill is not None
    hill_ci = bootstrap(sizes, hill_alpha, replicates=60, seed=1)
    assert hill_ci is not None
    assert not hill_ci[0] <= alpha <= hill_ci[1]


def _scalars(*items: Scalar) -> dict[str, Scalar]:
    return {s.key: annotate(s) for s in items}


def test_comparisons_of_a_society_with_contagion_and_of_one_without() -> None:
    """The published Cox model's HR below 1 on both; only where the null sits at 1 is it more than the
    null."""
    base = [
        Scalar("saturation.cox_hazard_ratio", "HR", 0.6),
        Scalar("saturation.cox_ci_low", "lo", 0.55),
        Scalar("saturation.cox_ci_high", "hi", 0.66),
        Scalar("saturation.variant_tv_hazard_ratio", "tv HR", 0.9),
        Scalar("saturation.variant_tv_ci_low", "lo", 0.85),
        Scalar("saturation.variant_tv_ci_high", "hi", 0.95),
    ]
    contagion = compare(
        _scalars(
            *base,
            Scalar("saturation.null_rewired_cox_hazard_ratio", "null", 1.01),
            Scalar("saturation.null_rewired_cox_hazard_ratio_ci_low", "lo", 0.97),
            Scalar("saturation.null_rewired_cox_hazard_ratio_ci_high", "hi", 1.05),
        )
    )
    none = compare(_scalars(*base, Scalar("saturation.null_rewired_cox_hazard_ratio", "null", 0.62)))
    (c,) = [x for x in contagion if x.key == "saturation.cox_hazard_ratio"]
    (n,) = [x for x in none if x.key == "saturation.cox_hazard_ratio"]
    assert c.verdict == n.verdict == "same direction"
    assert c.null_flag is None
    assert n.null_flag == NOT_DISTINGUISHABLE
    assert c.study is not None
    assert c.study.ci == (0.55, 0.66)
    assert c.spread == (0.6, 0.9)
    assert [r.ci for r in c.readings] == [(0.55, 0.66), (0.85, 0.95)]


def test_comparisons_apply_their_rules() -> None:
    got = {
        c.key: c
        for c in compare(
            _scalars(
                Scalar("cascades.alpha", "alpha", 2.73),
                Scalar("cascades.alpha_ci_low", "lo", 2.6),
                Scalar("cascades.alpha_ci_high", "hi", 2.86),
                Scalar("cascades.variant_hill.alpha", "hill", 2.3),
                Scalar("cascades.variant_public_code.alpha_hill", "code", 2.23),
                Scalar("cascades.propagation_events", "adoptions", 270_038),
                Scalar("cascades.count", "cascades", 12_822),
                Scalar("roles.k", "k", 3),
                Scalar("roles.active_agents", "agents", 5661),
                Scalar("roles.peripheral_share", "share", 0.93),
                Scalar("cooperation.cohens_d", "d", 0.17),
                Scalar("cooperation.cohens_d_ci_low", "lo", 0.02),
                Scalar("cooperation.cohens_d_ci_high", "hi", 0.31),
                Scalar("cooperation.variant_public_code.cohens_d", "against 0.5", -0.99),
                Scalar("collective.top1_share_trend", "tau", -0.8),
            )
        )
    }
    alpha = got["cascades.alpha"]
    assert alpha.verdict == "differs"
    assert alpha.study is not None
    assert alpha.study.value == 2.23  # the study's method: its public code's cascades and estimator
    assert alpha.spread == (2.23, 2.73)
    assert [r.value for r in alpha.readings] == [2.23, 2.73, 2.3]
    events = got["cascades.propagation_events"]
    assert events.verdict == "not comparable"
    assert "both readings" in events.why
    assert [r.value for r in events.readings] == [270_038, 12_822]
    assert got["roles.k"].verdict == "not comparable"
    assert "end of the searched range" in got["roles.k"].why
    share = got["roles.peripheral_share"]  # Wilson over the 5,661 clustered agents holds 0.935
    assert share.verdict == "reproduced"
    assert share.study is not None
    assert share.study.ci == pytest.approx(wilson(0.93, 5661))
    d = got["cooperation.cohens_d"]  # against single agents the sign is the opposite of the published one
    assert d.verdict == "differs"
    assert "both" not in d.why  # -0.88 and 0.17 lie on either side of no effect (0)
    assert d.spread == (-0.99, 0.17)
    assert d.study is not None
    assert d.study.ci == (0.02, 0.31)
    assert got["collective.top1_share_trend"].verdict == "reproduced"
    table = section(list(got.values())).items[0]
    assert isinstance(table, Table)
    assert {row[6] for row in table.rows} == {"differs", "not comparable", "reproduced"}


def test_bootstrap_of_values_matches_the_normal_theory_interval() -> None:
    """The mean of 4,000 standard normal draws: its 95% interval is about +/- 1.96 / sqrt(4000)."""
    values = np.random.default_rng(11).standard_normal(4_000)
    ci = bootstrap_values(values)
    assert ci is not None
    half = 1.959964 * values.std(ddof=1) / math.sqrt(values.size)
    assert ci[0] == pytest.approx(values.mean() - half, abs=0.15 * half)
    assert ci[1] == pytest.approx(values.mean() + half, abs=0.15 * half)
    med = bootstrap_values(values, np.median)
    assert med is not None
    assert med[0] < float(np.median(values)) < med[1]
    assert med[1] - med[0] > ci[1] - ci[0]  # the median of a normal sample is the less efficient estimate
    assert bootstrap_values([1.0]) is None
    assert bootstrap_values(values, replicates=50) == bootstrap_values(values, replicates=50)  # seeded
