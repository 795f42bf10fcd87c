"""Information cascades (Molt Dynamics): size distribution and exposure saturation.

The SQL views (sinks/molt_dynamics.sql) find the cascades (``cascade_adoptions``, ``cascades``) and each
agent's exposure (``cascade_exposures``); this module fits what SQL cannot:

* the discrete power law of cascade sizes (``streams.powerlaw_fit``, equal to ``powerlaw.Fit(sizes,
  discrete=True)``) over all cascades, and per kind where the fit is possible;
* saturation, over the (agent, cascade) pairs with exposure >= 1 (exposure counted up to the adoption
  for adopters, up to the cascade's last adoption for non-adopters):
  (a) logistic regression of adopted on exposure and exposure^2 (statsmodels ``Logit``, with intercept);
  "saturating" when the square term is negative with p < 0.05 (Wald test);
  (b) Cox proportional hazards with the single covariate exposure (statsmodels ``PHReg``, Efron ties):
  duration = hours from the cascade's first adoption to the agent's adoption, non-adopters censored at
  the cascade's last adoption; the same pairs as (a), so seeds and unexposed adopters are not in it.
  Harrell's concordance of the fitted risk score is computed here (``concordance``), with the pair rules
  of lifelines: ties in time count only when exactly the earlier-or-equal one had the event, ties in
  risk count one half.

"Propagation events" is our reading of the paper's 10,323: adoptions by an agent already exposed, i.e.
adopter rows with exposure >= 1 (report/published.py attaches that number to ``cascades.count``, the
number of cascades; both are reported). Published values come from report/published.py.

Above ``MAX_MODEL_ROWS`` exposed pairs the models run on a deterministic hash sample of the pairs
(``cityHash64(kind, item, agent)``; the report says how many were used); the counts are always exact.
"""

from __future__ import annotations

import math
import warnings
from collections import defaultdict
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
from scipy.special import zeta

from report.model import Figure, Item, Scalar, Series, Table
from report.source import Warehouse, quoted
from streams.powerlaw_fit import MIN_DISTINCT_VALUES, MIN_OBSERVATIONS, PowerLawFit, fit_discrete_power_law

FloatArray = npt.NDArray[np.float64]

KINDS = ("meme", "skill", "behaviour")
MIN_MODEL_ROWS = 10
MAX_MODEL_ROWS = 2_000_000


@dataclass(frozen=True)
class Logistic:
    b_exposure: float
    b_exposure2: float
    p_exposure2: float


@dataclass(frozen=True)
class Cox:
    coef: float
    hazard_ratio: float
    concordance: float


def cascade_sizes(wh: Warehouse, society: str) -> dict[str, dict[int, int]]:
    """Per kind, the histogram ``{size: number of cascades}``."""
    res = wh.query(
        f"SELECT kind, size, count() FROM cascades WHERE society = {quoted(society)} GROUP BY kind, size"
    )
    out: dict[str, dict[int, int]] = defaultdict(dict)
    for kind, size, n in res.rows:
        out[str(kind)][int(size)] = int(n)
    return dict(out)


def exposure_table(wh: Warehouse, society: str) -> tuple[FloatArray, FloatArray, FloatArray, int, int]:
    """(exposure, adopted, hours) of the pairs with exposure >= 1, the number of pairs, of adopters.

    Above ``MAX_MODEL_ROWS`` pairs, the arrays hold a hash sample of about that many (the counts do not).
    """
    where = f"society = {quoted(society)} AND exposure >= 1"
    res = wh.query(f"SELECT count(), countIf(adopted = 1) FROM cascade_exposures WHERE {where}")
    total, adopters = (int(v) for v in res.rows[0]) if res.rows else (0, 0)
    if total > MAX_MODEL_ROWS:
        keep = max(1, math.floor(MAX_MODEL_ROWS / total * 1_000_000))
        where += f" AND cityHash64(kind, item, agent) % 1000000 < {keep}"
    res = wh.query(f"SELECT exposure, adopted, hours FROM cascade_exposures WHERE {where}")
    data = np.asarray(res.rows, dtype=np.float64).reshape(-1, 3)
    return data[:, 0], data[:, 1], data[:, 2], total, adopters


def fit_logistic(exposure: FloatArray, adopted: FloatArray) -> Logistic | str:
    """Logit of adopted on [1, exposure, exposure^2]; a reason string when it cannot be fitted."""
    import statsmodels.api as sm

    if exposure.size < MIN_MODEL_ROWS:
        return f"{exposure.size} exposed (agent, cascade) pairs; at least {MIN_MODEL_ROWS} are needed"
    if np.unique(adopted).size < 2:
        return "every exposed pair has the same outcome (all adopted or none): no variation to model"
    if np.unique(exposure).size < 3:
        return "exposure takes fewer than 3 distinct values: exposure and its square cannot be separated"
    x = np.column_stack([np.ones_like(exposure), exposure, exposure**2])
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            fit = sm.Logit(adopted, x).fit(method="newton", maxiter=200, disp=0)
    except Exception as exc:  # statsmodels raises e.g. PerfectSeparationError, LinAlgError
        return f"the logistic regression could not be fitted ({type(exc).__name__}: {exc})"
    params = np.asarray(fit.params, dtype=np.float64)
    pvalues = np.asarray(fit.pvalues, dtype=np.float64)
    if (
        not fit.mle_retvals.get("converged", False)
        or not np.all(np.isfinite(params))
        or not math.isfinite(pvalues[2])
    ):
        return "the logistic regression did not converge (separation or too little variation)"
    return Logistic(float(params[1]), float(params[2]), float(pvalues[2]))


def fit_cox(exposure: FloatArray, adopted: FloatArray, hours: FloatArray) -> Cox | str:
    """Cox PH of hours to adoption on exposure (Efron ties) and its concordance; or a reason."""
    from statsmodels.duration.hazard_regression import PHReg

    if exposure.size < MIN_MODEL_ROWS:
        return f"{exposure.size} exposed (agent, cascade) pairs; at least {MIN_MODEL_ROWS} are needed"
    if not adopted.any():
        return "no exposed agent adopted: the hazard model has no events"
    if np.unique(exposure).size < 2:
        return "every exposed pair has the same exposure: no variation to model"
    # Fitted on the standardised exposure with BFGS from 0: statsmodels' default Newton steps overflow
    # exp(beta * exposure) when exposures reach the hundreds (seen at 1M events: NaN), BFGS does not.
    # The coefficient per unit of exposure is the standardised one divided by the standard deviation.
    sd = float(exposure.std())
    z = (exposure - float(exposure.mean())) / sd
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            fit = PHReg(hours, z[:, None], status=adopted, ties="efron").fit(
                start_params=np.zeros(1), method="bfgs", maxiter=200, disp=False
            )
    except Exception as exc:  # numerical failures of the optimiser
        return f"the Cox model could not be fitted ({type(exc).__name__}: {exc})"
    params = np.asarray(fit.params, dtype=np.float64)
    gradient = (
        float(np.abs(np.asarray(fit.model.score(params))).max()) / exposure.size
        if np.isfinite(params).all()
        else math.inf
    )
    if not gradient < 1e-4:  # the optimiser's own tolerance is 1e-5 on this per-row gradient
        return "the Cox model did not converge (the partial likelihood's gradient is not 0 at the end)"
    coef = float(params[0]) / sd
    if not math.isfinite(coef) or abs(coef) > 700:
        return "the Cox model did not converge (the exposure coefficient diverges)"
    c = concordance(hours, coef * exposure, adopted.astype(bool))
    if c is None:
        return "no comparable pair of durations: concordance undefined"
    return Cox(coef, math.exp(coef), c)


def concordance(time: FloatArray, risk: FloatArray, event: npt.NDArray[np.bool_]) -> float | None:
    """Harrell's C: share of comparable pairs where the higher risk fails first (ties in risk: 1/2).

    A pair (i, j) is comparable when i had the event and t_i < t_j, or t_i == t_j and j is censored
    (lifelines' rules). Computed per distinct risk level with sorted times: O(levels * n log n).
    Returns None when there is no comparable pair.
    """
    levels, level_of = np.unique(risk, return_inverse=True)
    ev_t = time[event]
    ev_level = level_of[event]
    concordant = np.zeros(ev_t.size)
    tied = np.zeros(ev_t.size)
    pairs = np.zeros(ev_t.size)
    for lv in range(levels.size):
        at_level = level_of == lv
        all_t = np.sort(time[at_level])
        cens_t = np.sort(time[at_level & ~event])
        later = all_t.size - np.searchsorted(all_t, ev_t, side="right")
        same_censored = np.searchsorted(cens_t, ev_t, side="right") - np.searchsorted(
            cens_t, ev_t, side="left"
        )
        comparable = (later + same_censored).astype(np.float64)
        pairs += comparable
        concordant += np.where(ev_level > lv, comparable, 0.0)
        tied += np.where(ev_level == lv, comparable, 0.0)
    total = float(pairs.sum())
    if total == 0:
        return None
    return float((concordant.sum() + 0.5 * tied.sum()) / total)


def items(wh: Warehouse, society: str) -> list[Item]:
    """Cascade counts, the power-law fit and CCDF, the saturation models."""
    sizes = cascade_sizes(wh, society)
    total_hist: dict[int, int] = defaultdict(int)
    for hist in sizes.values():
        for s, n in hist.items():
            total_hist[s] += n
    n_cascades = sum(total_hist.values())
    out: list[Item] = [Scalar("cascades.count", "Cascades (all kinds)", n_cascades, unit="cascades")]
    out += [
        Scalar(f"cascades.count_{k}", f"Cascades: {k}", sum(sizes.get(k, {}).values()), unit="cascades")
        for k in KINDS
    ]
    out += _power_law_items(sizes, dict(total_hist))

    exposure, adopted, hours, pairs, adopters = exposure_table(wh, society)
    out.append(
        Scalar(
            "cascades.propagation_events",
            "Propagation events (adoptions by an already exposed agent)",
            adopters,
        )
    )
    out.append(Scalar("cascades.exposed_pairs", "Exposed (agent, cascade) pairs", pairs, unit="pairs"))
    if exposure.size < pairs:
        out.append(
            Scalar(
                "cascades.model_sample",
                f"Pairs used by the models (hash sample, cap {MAX_MODEL_ROWS:,})",
                int(exposure.size),
                unit="pairs",
            )
        )
    out += _logistic_items(fit_logistic(exposure, adopted))
    out += _cox_items(fit_cox(exposure, adopted, hours))
    return out


def _power_law_items(sizes: dict[str, dict[int, int]], total: dict[int, int]) -> list[Item]:
    fit = fit_discrete_power_law(total) if total else None
    reason = None if fit else _no_fit(total)
    out: list[Item] = [
        Scalar(
            "cascades.alpha", "Power-law exponent alpha of cascade sizes", fit.alpha if fit else None, reason
        ),
        Scalar("cascades.alpha_sigma", "Standard error of alpha", fit.sigma if fit else None, reason),
        Scalar(
            "cascades.xmin", "xmin of the power-law fit", fit.xmin if fit else None, reason, unit="adopters"
        ),
        Scalar("cascades.n_tail", "Cascades in the power-law tail", fit.n_tail if fit else None, reason),
    ]
    rows: list[list[float | int | str | None]] = []
    for kind in KINDS:
        hist = sizes.get(kind, {})
        kfit = fit_discrete_power_law(hist) if hist else None
        note = "" if kfit else _no_fit(hist)
        rows.append(_fit_row(kind, sum(hist.values()), kfit, note))
    rows.append(_fit_row("all", sum(total.values()), fit, "" if fit else (reason or "")))
    out.append(
        Table(
            "cascades.power_law",
            "Power-law fits of cascade sizes by kind",
            ["kind", "cascades", "alpha", "sigma", "xmin", "n_tail", "note"],
            rows,
        )
    )
    out.append(_ccdf_figure(total, fit, reason))
    return out


def _no_fit(hist: dict[int, int]) -> str:
    n = sum(hist.values())
    if n == 0:
        return "no cascades"
    if n < MIN_OBSERVATIONS or len(hist) < MIN_DISTINCT_VALUES:
        return (
            f"{n} cascades with {len(hist)} distinct sizes: a power-law fit needs at least "
            f"{MIN_OBSERVATIONS} cascades and {MIN_DISTINCT_VALUES} distinct sizes"
        )
    return f"no power-law fit with alpha inside (0, 3) for {n} cascades (the sizes fall off faster)"


def _fit_row(kind: str, n: int, fit: PowerLawFit | None, note: str) -> list[float | int | str | None]:
    if fit is None:
        return [kind, n, None, None, None, None, note]
    return [kind, n, fit.alpha, fit.sigma, fit.xmin, fit.n_tail, note]


def _ccdf_figure(total: dict[int, int], fit: PowerLawFit | None, reason: str | None) -> Figure:
    title = "Cascade sizes: complementary CDF P(S >= s)"
    if not total:
        return Figure("cascades.ccdf", title, "cascade size s (adopters)", "P(S >= s)", [], "no cascades")
    xs = sorted(total)
    n = sum(total.values())
    counts = np.asarray([total[s] for s in xs], dtype=np.float64)
    ccdf = np.cumsum(counts[::-1])[::-1] / n
    series = [Series("cascades", [float(x) for x in xs], [float(v) for v in ccdf], style="points")]
    if fit is not None:
        line_x = [float(x) for x in xs if x >= fit.xmin]
        z0 = float(zeta(fit.alpha, fit.xmin))
        line_y: list[float | None] = [fit.n_tail / n * float(zeta(fit.alpha, x)) / z0 for x in line_x]
        series.append(Series(f"power law, alpha = {fit.alpha:.2f}", line_x, line_y, style="line"))
    return Figure(
        "cascades.ccdf",
        title,
        "cascade size s (adopters)",
        "P(S >= s)",
        series,
        None if fit else reason,
        log_x=True,
        log_y=True,
    )


def _logistic_items(res: Logistic | str) -> list[Item]:
    reason = res if isinstance(res, str) else None
    fit = res if isinstance(res, Logistic) else None
    saturating = None if fit is None else int(fit.b_exposure2 < 0 and fit.p_exposure2 < 0.05)
    return [
        Scalar(
            "saturation.logit_exposure",
            "Logistic coefficient of exposure",
            fit.b_exposure if fit else None,
            reason,
        ),
        Scalar(
            "saturation.logit_exposure2",
            "Logistic coefficient of exposure squared",
            fit.b_exposure2 if fit else None,
            reason,
        ),
        Scalar(
            "saturation.logit_exposure2_p",
            "p-value of the squared term",
            fit.p_exposure2 if fit else None,
            reason,
        ),
        Scalar(
            "saturation.saturating",
            "Adoption saturates (square term negative, p < 0.05): 1 yes, 0 no",
            saturating,
            reason,
        ),
    ]


def _cox_items(res: Cox | str) -> list[Item]:
    reason = res if isinstance(res, str) else None
    fit = res if isinstance(res, Cox) else None
    return [
        Scalar(
            "saturation.cox_hazard_ratio",
            "Cox hazard ratio per unit of exposure",
            fit.hazard_ratio if fit else None,
            reason,
        ),
        Scalar(
            "saturation.cox_concordance",
            "Concordance (Harrell's C) of the Cox model",
            fit.concordance if fit else None,
            reason,
        ),
    ]
