"""The posting-rhythm null (report.rhythm.poisson_covs): agents whose posts fall at random times.

With three posts the middle one is uniform between the first and the last, so the two gaps are (U, 1 - U)
and the sample CoV is sqrt(2) |2U - 1|: P(CoV < 0.5) = 0.5 / sqrt(2) = 0.3536 and the median CoV is
sqrt(2) / 2 = 0.7071, exactly. Many posts give a CoV near 1 (exponential gaps)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from molt_society.report import rhythm


def test_three_posts_give_the_closed_form() -> None:
    covs = rhythm.poisson_covs([3] * 200_000, np.random.default_rng(1))
    assert float(np.mean(covs < 0.5)) == pytest.approx(0.5 / math.sqrt(2), abs=0.005)
    assert float(np.median(covs)) == pytest.approx(math.sqrt(2) / 2, abs=0.005)


def test_many_posts_approach_the_exponential_cov_of_one() -> None:
    covs = rhythm.poisson_covs([2_000] * 50, np.random.default_rng(2))
    assert float(np.mean(covs)) == pytest.approx(1.0, abs=0.03)


def test_the_null_items_sit_beside_the_published_keys() -> None:
    items = {i.key: i.value for i in rhythm._null_items([3] * 5_000, "rhythm")}
    low, mid, high = (items[f"rhythm.null_autonomous_share{s}"] for s in ("_ci_low", "", "_ci_high"))
    assert low is not None
    assert mid is not None
    assert high is not None
    assert low < 0.5 / math.sqrt(2) < high
    assert high - low < 0.05
    assert items["rhythm.null_cv_median"] == pytest.approx(math.sqrt(2) / 2, abs=0.02)
    empty = {i.key: i for i in rhythm._null_items([], "rhythm")}
    assert empty["rhythm.null_autonomous_share"].value is None
    assert empty["rhythm.null_autonomous_share"].reason == "no agent to simulate"
