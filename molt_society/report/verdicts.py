"""Verdicts on published comparisons: is a number beside a published one a reproduction or an artefact?

A comparison (``report.comparisons``) holds the published value (with its CI when the study gave one), our
value under the study's own method (with a CI), the same quantity under other reasonable definitions (the
multiverse) and, where there is one, the value on a null society. ``judge`` turns that into one of four
verdicts, by rules a reader can check:

* **not comparable**: the comparison cannot mean anything here (said why): a count of a population of
  another size, a baseline the study used and we do not have, a figure the search range decided, ...;
* **reproduced**: our value under the study's method lies inside the published CI; where the study gave
  no CI, the published value lies inside our 95% CI; with no CI on either side, the two are equal;
* **same direction**: not reproduced, but both lie on the same side of the reference (the value of no
  effect: a hazard ratio of 1, a Cohen's d of 0, a trend of 0; or the null society's value);
* **differs**: otherwise.

An agreeing verdict is also judged on its null (``null_flag``): unless the observed value lies beyond the
null societies' 95% range in the published effect's direction (or, for a null without a range, the null
gets another verdict), the agreement is "not distinguishable from the null".

Intervals come from the study (published CI), from the model (a Cox CI), from ``wilson`` (a share of n)
or from ``bootstrap`` (resampling the units the number is computed from).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Literal

import numpy as np

from molt_society.report import resample
from molt_society.report.model import ComparisonReading, Scalar

Verdict = Literal["reproduced", "same direction", "differs", "not comparable"]
VERDICTS: tuple[Verdict, ...] = ("reproduced", "same direction", "differs", "not comparable")
NOT_DISTINGUISHABLE = "not distinguishable from the null"
Interval = tuple[float, float]
COUNTS_FROM = 20_000  # units from which a repeating sample is bootstrapped as counts


Reading = ComparisonReading  # the quantity under one definition: value, its 95% ci, why it is missing


def _inside(x: float, ci: Interval) -> bool:
    return min(ci) <= x <= max(ci)


def _side(x: float, reference: float) -> int:
    return (x > reference) - (x < reference)


def judge(
    published: float,
    published_ci: Interval | None,
    study: Reading | None,
    reference: float | None,
    not_comparable: str | None = None,
) -> tuple[Verdict, str]:
    """The verdict and a sentence saying which rule gave it."""
    if not_comparable:
        return "not comparable", not_comparable
    if study is None or study.value is None or not math.isfinite(study.value):
        why = study.reason if study is not None and study.reason else "not computed"
        return "not comparable", f"the study's method gives no value here: {why}"
    v = float(study.value)
    if published_ci is not None:
        if _inside(v, published_ci):
            return (
                "reproduced",
                f"{v:.4g} lies inside the published CI [{published_ci[0]:g}, {published_ci[1]:g}]",
            )
        missed = f"{v:.4g} lies outside the published CI [{published_ci[0]:g}, {published_ci[1]:g}]"
    elif study.ci is not None:
        lo, hi = study.ci
        if _inside(published, study.ci):
            return "reproduced", f"the published {published:g} lies inside our 95% CI [{lo:.4g}, {hi:.4g}]"
        missed = f"the published {published:g} lies outside our 95% CI [{lo:.4g}, {hi:.4g}]"
    elif math.isclose(v, published, rel_tol=1e-9, abs_tol=1e-12):
        return "reproduced", f"{v:.4g} equals the published value (no CI on either side)"
    else:
        missed = f"{v:.4g} differs from the published {published:g} (no CI on either side)"
    if (
        reference is not None
        and _side(v, reference) != 0
        and _side(v, reference) == _side(published, reference)
    ):
        where = "above" if v > reference else "below"
        return "same direction", f"{missed}; both lie {where} {reference:g}"
    if reference is not None:
        return "differs", f"{missed}; and not on the published value's side of {reference:g}"
    return "differs", missed


def null_flag(
    verdict: Verdict,
    published: float,
    published_ci: Interval | None,
    null: Reading | None,
    reference: float | None,
    observed: float | None = None,
) -> str | None:
    """``NOT_DISTINGUISHABLE`` when an agreeing verdict is what a null society gets too. With the null
    societies' 95% range: unless the observed value lies beyond that range in the published effect's
    direction (below it for a published hazard ratio under 1, a falling trend; the direction is the
    published value's side of ``reference``, else of the null's median). Without a range: when the
    null's value gets the same verdict."""
    if null is None or null.value is None or verdict not in ("reproduced", "same direction"):
        return None
    if null.ci is not None and observed is not None:
        towards = _side(published, reference if reference is not None else null.value)
        beyond = observed < min(null.ci) if towards < 0 else observed > max(null.ci) if towards > 0 else False
        return None if beyond else NOT_DISTINGUISHABLE
    null_verdict, _ = judge(published, published_ci, null, reference)
    return NOT_DISTINGUISHABLE if null_verdict == verdict else None


def wilson(share: float, n: int, z: float = 1.959964) -> Interval | None:
    """Wilson's 95% interval of a share of ``n`` units (None without units)."""
    if n <= 0 or not 0.0 <= share <= 1.0:
        return None
    denominator = 1 + z * z / n
    centre = (share + z * z / (2 * n)) / denominator
    half = z * math.sqrt(share * (1 - share) / n + z * z / (4 * n * n)) / denominator
    return (max(0.0, centre - half), min(1.0, centre + half))


def bootstrap(
    histogram: dict[int, int],
    statistic: Callable[[dict[int, int]], float | None],
    *,
    replicates: int = 200,
    seed: int = 0,
) -> Interval | None:
    """Percentile 95% interval of ``statistic`` over histograms resampled from ``histogram`` (the units,
    e.g. cascades, drawn with replacement: a multinomial draw of the counts). None when fewer than half
    the replicates give a value."""
    values = np.asarray(sorted(histogram), dtype=np.int64)
    counts = np.asarray([histogram[v] for v in values], dtype=np.float64)
    n = int(counts.sum())
    if n == 0:
        return None
    rng = np.random.default_rng(seed)
    got: list[float] = []
    for _ in range(replicates):
        draw = rng.multinomial(n, counts / n)
        stat = statistic({int(v): int(c) for v, c in zip(values, draw, strict=True) if c})
        if stat is not None and math.isfinite(stat):
            got.append(stat)
    if len(got) < replicates / 2:
        return None
    return (float(np.percentile(got, 2.5)), float(np.percentile(got, 97.5)))


def bootstrap_values(
    values: Sequence[float] | np.ndarray,
    statistic: Callable[[np.ndarray], float] = np.mean,
    *,
    replicates: int = 1_000,
    seed: int = 0,
) -> Interval | None:
    """Percentile 95% interval of ``statistic`` (a mean, a median, ...) over ``values`` resampled with
    replacement (the units: posts, agents). None for fewer than 2 values. From ``COUNTS_FROM`` units on,
    a statistic of ``resample.WEIGHTED`` over values that repeat is resampled as multinomial counts of the
    distinct values (``resample.bootstrap_counts``: the same bootstrap, not n draws per replicate)."""
    arr = np.asarray(values, dtype=np.float64)
    if arr.size < 2:
        return None
    weighted = resample.WEIGHTED.get(statistic)
    if weighted is not None and arr.size >= COUNTS_FROM:
        distinct, counts = np.unique(arr, return_counts=True)
        if distinct.size * 4 <= arr.size:  # the units repeat their values: resample the counts
            drawn = resample.bootstrap_counts(distinct, counts, weighted, replicates, seed)
            return (float(np.percentile(drawn, 2.5)), float(np.percentile(drawn, 97.5)))
    rng = np.random.default_rng(seed)
    chunk = max(1, 2_000_000 // arr.size)  # draws at once: at most ~16 MB of indices
    got: list[float] = []
    while len(got) < replicates:
        draws = arr[rng.integers(0, arr.size, (min(chunk, replicates - len(got)), arr.size))]
        got.extend(float(statistic(row)) for row in draws)
    return (float(np.percentile(got, 2.5)), float(np.percentile(got, 97.5)))


def ci_scalars(key: str, label: str, ci: Interval | None, why: str | None = None) -> list[Scalar]:
    """``<key>_ci_low`` and ``<key>_ci_high`` (``report.comparisons`` finds a reading's CI by them)."""
    reason = None if ci else (why or "fewer than 2 units to resample")
    return [
        Scalar(f"{key}_ci_low", f"{label}: 95% bootstrap CI, low", ci[0] if ci else None, reason),
        Scalar(f"{key}_ci_high", f"{label}: 95% bootstrap CI, high", ci[1] if ci else None, reason),
    ]


def spread(readings: Sequence[Reading]) -> Interval | None:
    """The range of the readings' values (None when none has one)."""
    vals = [float(r.value) for r in readings if r.value is not None and math.isfinite(r.value)]
    return (min(vals), max(vals)) if vals else None
