"""Discrete power-law fit of a histogram (Clauset, Shalizi & Newman 2009), matching ``powerlaw`` 2.0.

The reference is ``powerlaw.Fit(data, discrete=True)`` (``powerlaw`` 2.0.0), with one default changed:
the alpha range. ``powerlaw`` 2.0 confines alpha to ``parameter_ranges={"alpha": [0, 3]}``
(``Power_Law.DEFAULT_PARAMETER_RANGES``), so a tail of true alpha 3.3-3.5 cannot be fitted at its own xmin
and the KS search falls back to a worse xmin with alpha 2.7-2.8. ``powerlaw`` 1.5 had no such range: it
only required alpha > 1. By default we search the range the data needs, (1, ``ALPHA_MAX`` = 20] (the
likelihood is convex in alpha, so the bounded search finds the unbounded maximum whenever it lies below
20); ``alpha_range=(0.0, 3.0)`` reproduces the 2.0 default exactly. Each result says which range was
searched and at how many xmin candidates the fit ran into a bound of it (``candidates_at_bound``), so a
report can say when the range, not the data, shaped the fit. Apart from that, the package's conventions
are reproduced on purpose, including the surprising ones:

* xmin candidates are the distinct values except the two largest (the package restricts candidates to
  values below the maximum and then also drops the largest remaining one);
* for a candidate xmin >= 10 the package does *not* run the exact discrete MLE: it uses the closed-form
  approximation ``alpha = 1 + n / sum(log(x / (xmin - 0.5)))`` (Clauset et al. 2009, eq. 3.7) whenever
  that value lies in (1.5, 3]; otherwise (and for every xmin < 10) alpha maximises the exact likelihood
  ``x**-alpha / zeta(alpha, xmin)``;
* a numeric fit within 0.01 of a bound of the alpha range is flagged as noise, and noisy candidates are
  not eligible as xmin (an accepted approximation is not subject to that 0.01 margin, so e.g. 2.9999 can
  come out with the 2.0 range);
* the KS distance compares strict CDFs ``P(X < x)`` of the tail data and of the fitted law at the
  distinct tail values;
* the standard error is ``(alpha - 1) / sqrt(n_tail)``.

The exact MLE is a vectorised golden-section search (the package uses Nelder-Mead with tol 1e-4, hence
alpha differences of order 1e-5). Deliberately not reproduced: the package normalises by
``1 - (1 - zeta(alpha, xmin))``, which cancels catastrophically when zeta is tiny (alpha > 4 with xmin
in the hundreds, reachable only with a wider alpha range; negligible within (0, 3) unless xmin is in the
hundreds of thousands); we use zeta directly.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
from scipy.special import zeta

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.intp]

MIN_OBSERVATIONS = 10
"""Fewer observations >= 1 than this and no fit is attempted."""

MIN_DISTINCT_VALUES = 4
"""The package never tries the two largest values as xmin and gives up with fewer than two candidates."""

ALPHA_MAX = 20.0
"""Upper end of the default alpha search range (1, ALPHA_MAX]: far above any fitted tail in the studies
(2-4), low enough that ``zeta(alpha, xmin)`` stays a normal float for any xmin below 1e15."""

PACKAGE_ALPHA_RANGE = (0.0, 3.0)
"""``powerlaw`` 2.0's default ``parameter_ranges["alpha"]``, for an exact reproduction of the package."""

_ESTIMATE_XMIN = 10  # powerlaw's default: approximate discrete MLE for xmin >= 10
_ESTIMATE_RANGE = (1.5, 3.0)  # approximation accepted when 1.5 < alpha <= 3 (hard-coded in powerlaw)
_BOUNDARY_EPS = 0.01  # powerlaw flags numeric fits this close to a bound of the alpha range as noise
_GOLDEN_ITERATIONS = 64  # shrinks the search interval by 0.618**64 ~ 1e-13
_GRID_POINTS = 16  # initial evaluated tail positions per candidate in the KS branch and bound
_SPLIT = 8  # segments an unresolved run of tail positions is split into
_FOCUS_CANDIDATES = 8  # candidates per criterion resolved first, to get a tight bound for pruning


@dataclass(frozen=True)
class PowerLawFit:
    """Result of :func:`fit_discrete_power_law`.

    ``sigma`` is the standard error of alpha, ``n_tail`` the number of observations >= ``xmin``,
    ``ks_distance`` the KS distance of the tail fit and ``n`` the number of observations >= 1 used.
    ``alpha_range`` is the range searched, ``candidates`` the number of xmin candidates tried and
    ``candidates_at_bound`` how many of them had their fit run into a bound of the range (within 0.01:
    the package's "noise", not eligible as xmin); when it is not 0 the range shaped the result.
    """

    alpha: float
    sigma: float
    xmin: int
    n_tail: int
    ks_distance: float
    n: int
    alpha_range: tuple[float, float] = (1.0, ALPHA_MAX)
    candidates: int = 0
    candidates_at_bound: int = 0

    @property
    def bound_hit(self) -> bool:
        """Whether a bound of the alpha range excluded at least one xmin candidate."""
        return self.candidates_at_bound > 0


def fit_discrete_power_law(
    counts: Mapping[int, int],
    *,
    xmin_candidates: int | None = None,
    estimate_discrete: bool | None = None,
    alpha_range: tuple[float, float] | None = None,
) -> PowerLawFit | None:
    """Fit a discrete power law to a histogram ``{value: number_of_observations}``.

    Maximum likelihood with xmin chosen to minimise the KS distance, as in Clauset, Shalizi & Newman
    (2009) and exactly as ``powerlaw.Fit(data, discrete=True)`` (v2.0.0) does; see the module docstring
    for the conventions that come with it. Values < 1 and zero counts are ignored; negative counts
    raise ``ValueError``. The work is done on the histogram, O(distinct values) per candidate at worst.

    Returns None when there are fewer than ``MIN_OBSERVATIONS`` (10) observations >= 1, fewer than
    ``MIN_DISTINCT_VALUES`` (4) distinct values >= 1 (the package then returns NaN for everything), or
    when no candidate gives a fit strictly inside ``alpha_range`` (the package's "noise" outcome).

    ``xmin_candidates`` caps the search to that many smallest candidates (None: all, as the package);
    for a cap c >= 2 this equals the package's ``xmin=(smallest value, (c + 2)-th smallest value)``,
    and c = 1 is a fit at the fixed xmin = smallest value.
    ``estimate_discrete`` mirrors the package option: None uses the closed-form approximation for
    xmin >= 10, True for every xmin, False never (always the exact MLE). ``alpha_range`` mirrors
    ``parameter_ranges={"alpha": ...}``; None (default) searches (1, ``ALPHA_MAX``] as ``powerlaw`` 1.5
    did (alpha > 1 only); ``PACKAGE_ALPHA_RANGE`` (0, 3) is the 2.0 default, which cannot represent
    alpha >= 3.
    """
    lo, hi = (1.0, ALPHA_MAX) if alpha_range is None else (float(alpha_range[0]), float(alpha_range[1]))
    if not hi > max(lo, 1.0):
        raise ValueError(f"alpha_range must allow values above 1, got {alpha_range}")
    if xmin_candidates is not None and xmin_candidates < 1:
        raise ValueError("xmin_candidates must be positive")

    values, weights = _histogram_arrays(counts)
    n_obs = int(weights.sum()) if weights.size else 0
    if n_obs < MIN_OBSERVATIONS or values.size < MIN_DISTINCT_VALUES:
        return None

    # Suffix sums over the sorted distinct values: observations >= x[i] and the sum of their logs.
    tail_n = np.cumsum(weights[::-1])[::-1]
    tail_log = np.cumsum((weights * np.log(values))[::-1])[::-1]

    n_cand = values.size - 2
    if xmin_candidates is not None:
        n_cand = min(n_cand, xmin_candidates)
    cand = np.arange(n_cand, dtype=np.intp)
    xmin = values[cand]
    n_t = tail_n[cand]
    # Sum of log(x / xmin) over each candidate's tail.
    log_ratio = tail_log[cand] - n_t * np.log(xmin)

    alpha, valid, at_bound = _candidate_alphas(xmin, n_t, log_ratio, lo, hi, estimate_discrete)
    eligible = cand[valid]
    if eligible.size == 0:
        return None
    best, ks = _ks_argmin(eligible, alpha[eligible], values, tail_n)

    a = float(alpha[best])
    n_tail = int(tail_n[best])
    return PowerLawFit(
        alpha=a,
        sigma=(a - 1.0) / math.sqrt(n_tail),
        xmin=int(values[best]),
        n_tail=n_tail,
        ks_distance=ks,
        n=n_obs,
        alpha_range=(lo, hi),
        candidates=int(n_cand),
        candidates_at_bound=int(at_bound.sum()),
    )


def _histogram_arrays(counts: Mapping[int, int]) -> tuple[FloatArray, FloatArray]:
    """Sorted distinct values >= 1 and their (positive) counts, as float arrays."""
    merged: dict[int, int] = {}
    for value, count in counts.items():
        c = int(count)
        if c < 0:
            raise ValueError(f"negative count {count} for value {value}")
        v = int(value)
        if v != value:
            raise ValueError(f"non-integer value {value}")
        if v >= 1 and c > 0:
            merged[v] = merged.get(v, 0) + c
    keys = sorted(merged)
    return (
        np.asarray(keys, dtype=np.float64),
        np.asarray([merged[k] for k in keys], dtype=np.float64),
    )


def _candidate_alphas(
    xmin: FloatArray,
    n_t: FloatArray,
    log_ratio: FloatArray,
    lo: float,
    hi: float,
    estimate_discrete: bool | None,
) -> tuple[FloatArray, npt.NDArray[np.bool_], npt.NDArray[np.bool_]]:
    """Alpha per xmin candidate, whether the package would count that fit as valid, and whether the
    numeric fit ran into a bound of the range (within ``_BOUNDARY_EPS``: the package's "noise")."""
    if estimate_discrete is None:
        use_estimate = xmin >= _ESTIMATE_XMIN
    else:
        use_estimate = np.full(xmin.shape, estimate_discrete)
    with np.errstate(divide="ignore"):
        estimate = 1.0 + n_t / (log_ratio + n_t * (np.log(xmin) - np.log(xmin - 0.5)))
    estimated = use_estimate & (estimate > _ESTIMATE_RANGE[0]) & (estimate <= _ESTIMATE_RANGE[1])

    alpha = np.where(estimated, estimate, np.nan)
    numeric = ~estimated
    if numeric.any():
        alpha[numeric] = _exact_mle(xmin[numeric], log_ratio[numeric] / n_t[numeric], lo, hi)

    in_range = (alpha > lo) & (alpha < hi)
    near_bound = (alpha - _BOUNDARY_EPS < lo) | (alpha + _BOUNDARY_EPS > hi)
    valid = in_range & (estimated | ~near_bound)
    return alpha, valid, ~estimated & near_bound


def _exact_mle(xmin: FloatArray, mean_log_ratio: FloatArray, lo: float, hi: float) -> FloatArray:
    """Exact discrete MLE of alpha on [lo, hi], one per candidate (vectorised golden-section search).

    Minimises the per-observation negative log-likelihood
    ``alpha * mean(log(x / xmin)) + log(xmin**alpha * zeta(alpha, xmin))``, which is convex in alpha,
    so the bounded minimiser is the clipped unbounded one. It always lies above 1, where zeta diverges.
    """

    def objective(a: FloatArray) -> FloatArray:
        return np.asarray(a * mean_log_ratio + np.log(zeta(a, xmin)) + a * np.log(xmin), dtype=np.float64)

    inv_phi = (math.sqrt(5.0) - 1.0) / 2.0
    left = np.full(xmin.shape, max(lo, 1.0 + 1e-9))
    right = np.full(xmin.shape, hi)
    c = right - inv_phi * (right - left)
    d = left + inv_phi * (right - left)
    fc, fd = objective(c), objective(d)
    for _ in range(_GOLDEN_ITERATIONS):
        go_left = fc <= fd
        right = np.where(go_left, d, right)
        left = np.where(go_left, left, c)
        new = np.where(go_left, right - inv_phi * (right - left), left + inv_phi * (right - left))
        f_new = objective(new)
        c, d, fc, fd = (
            np.where(go_left, new, d),
            np.where(go_left, c, new),
            np.where(go_left, f_new, fd),
            np.where(go_left, fc, f_new),
        )
    alpha = 0.5 * (left + right)
    # Snap to a bound the optimiser ran into (scipy's bounded Nelder-Mead clips onto it exactly).
    alpha = np.where(alpha > hi - 1e-9, hi, alpha)
    return np.where(alpha < lo + 1e-9, lo, alpha)


def _ks_argmin(cand: IntArray, alpha: FloatArray, x: FloatArray, tail_n: FloatArray) -> tuple[int, float]:
    """First candidate (index into ``x``) with the smallest KS distance, and that distance.

    For a candidate at index ``i`` the distance is ``max_k |S_emp(k) - S_fit(k)|`` over ``k >= i`` with
    survival functions ``S_emp(k) = tail_n[k] / tail_n[i]`` and ``S_fit(k) = zeta(alpha, x[k]) /
    zeta(alpha, x[i])``, i.e. the difference of the strict CDFs ``P(X < x[k])`` used by the package.

    Exact, computed by branch and bound: both survival functions decrease, so between two evaluated
    positions ``lo < hi`` the gap is at most ``max(S_emp(lo) - S_fit(hi), S_fit(lo) - S_emp(hi))``. A
    block whose bound does not exceed the candidate's largest evaluated gap needs no further work, and a
    candidate whose largest evaluated gap exceeds another candidate's upper bound cannot be the minimum.
    The most promising candidates are resolved first, so that this prunes the others early.
    """
    m = x.size
    norm = np.asarray(zeta(alpha, x[cand]), dtype=np.float64)

    def survival(owner: IntArray, k: IntArray) -> tuple[FloatArray, FloatArray]:
        s_emp = tail_n[k] / tail_n[cand[owner]]
        s_fit = np.asarray(zeta(alpha[owner], x[k]), dtype=np.float64) / norm[owner]
        return s_emp, s_fit

    # Initial grid: about _GRID_POINTS evaluated positions per candidate, always including i and m - 1.
    span = (m - 1) - cand
    step = np.maximum(1, -(-span // _GRID_POINTS))
    n_points = -(-span // step) + 1
    owner = np.repeat(np.arange(cand.size), n_points)
    first = np.cumsum(n_points) - n_points
    j = np.arange(owner.size) - np.repeat(first, n_points)
    k = np.minimum(cand[owner] + j * step[owner], m - 1)
    s_emp, s_fit = survival(owner, k)
    lower = np.maximum.reduceat(np.abs(s_emp - s_fit), first)  # largest evaluated gap per candidate
    same = owner[:-1] == owner[1:]
    blocks = _Blocks(
        owner[:-1][same], k[:-1][same], k[1:][same], s_emp[:-1][same], s_emp[1:][same],
        s_fit[:-1][same], s_fit[1:][same],
    )  # fmt: skip

    # Resolve a few promising candidates first (the smallest xmins, and the smallest lower and upper
    # bounds so far), then all the others.
    upper = lower.copy()
    np.maximum.at(upper, blocks.owner, blocks.bound())
    focus = np.zeros(cand.size, dtype=bool)
    focus[:_FOCUS_CANDIDATES] = True
    focus[np.argsort(lower, kind="stable")[:_FOCUS_CANDIDATES]] = True
    focus[np.argsort(upper, kind="stable")[:_FOCUS_CANDIDATES]] = True
    alive = focus.copy()
    _branch_and_bound(blocks.take(focus[blocks.owner]), lower, alive, survival)
    alive |= ~focus
    _branch_and_bound(blocks.take(~focus[blocks.owner]), lower, alive, survival)

    positions = np.flatnonzero(alive)
    best = int(positions[np.argmin(lower[positions])])
    return int(cand[best]), float(lower[best])


@dataclass
class _Blocks:
    """Runs ``(lo, hi)`` of tail positions of candidate ``owner``, with both survival functions at the
    evaluated end points; the positions strictly inside a run are not evaluated yet."""

    owner: IntArray
    lo: IntArray
    hi: IntArray
    emp_lo: FloatArray
    emp_hi: FloatArray
    fit_lo: FloatArray
    fit_hi: FloatArray

    def bound(self) -> FloatArray:
        """Upper bound of the gap at the positions strictly inside each run (both functions decrease)."""
        bound = np.maximum(self.emp_lo - self.fit_hi, self.fit_lo - self.emp_hi)
        return np.where(self.hi - self.lo > 1, bound, 0.0)

    def take(self, mask: npt.NDArray[np.bool_]) -> _Blocks:
        return _Blocks(
            self.owner[mask], self.lo[mask], self.hi[mask], self.emp_lo[mask], self.emp_hi[mask],
            self.fit_lo[mask], self.fit_hi[mask],
        )  # fmt: skip


def _branch_and_bound(
    blocks: _Blocks,
    lower: FloatArray,
    alive: npt.NDArray[np.bool_],
    survival: Callable[[IntArray, IntArray], tuple[FloatArray, FloatArray]],
) -> None:
    """Split runs until every alive owner's largest evaluated gap is its exact KS distance.

    Updates ``lower`` (largest evaluated gap per candidate) and ``alive`` (candidates that may still be
    the minimum) in place.
    """
    while True:
        bound = blocks.bound()
        open_ = bound > lower[blocks.owner]
        upper = lower.copy()
        np.maximum.at(upper, blocks.owner[open_], bound[open_])
        alive &= lower <= upper[alive].min()
        open_ &= alive[blocks.owner]
        if not open_.any():
            return
        b = blocks.take(open_)

        # Split every open run into up to _SPLIT segments and evaluate the new inner end points.
        sub = -(-(b.hi - b.lo) // _SPLIT)
        n_seg = -(-(b.hi - b.lo) // sub)
        rep = np.repeat(np.arange(b.owner.size), n_seg)
        seg = np.arange(rep.size) - np.repeat(np.cumsum(n_seg) - n_seg, n_seg)
        seg_lo = b.lo[rep] + seg * sub[rep]
        owner = b.owner[rep]
        inner = seg > 0
        new_emp, new_fit = survival(owner[inner], seg_lo[inner])
        np.maximum.at(lower, owner[inner], np.abs(new_emp - new_fit))

        emp_lo, fit_lo = b.emp_lo[rep], b.fit_lo[rep]
        emp_lo[inner], fit_lo[inner] = new_emp, new_fit
        last = seg == n_seg[rep] - 1
        emp_hi, fit_hi = np.empty_like(emp_lo), np.empty_like(fit_lo)
        emp_hi[:-1], fit_hi[:-1] = emp_lo[1:], fit_lo[1:]
        emp_hi[last], fit_hi[last] = b.emp_hi[rep][last], b.fit_hi[rep][last]
        hi = np.where(last, b.hi[rep], seg_lo + sub[rep])
        blocks = _Blocks(owner, seg_lo, hi, emp_lo, emp_hi, fit_lo, fit_hi)
