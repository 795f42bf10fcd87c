"""Exposure saturation (Molt Dynamics RQ2): the published fixed-count models beside a time-varying Cox
model and a permutation null, so that a reader sees whether "saturation" survives a correct analysis.

Data: the adoptions of every cascade (``cascade_adoptions``) and the whole-history interaction graph
(``interaction_edges``, distinct src -> dst: src commented on dst). Exposure of agent v to a cascade is the
number of v's graph predecessors (agents that commented on v) that adopted the item before v.

**Published method**, as the public code computes it (YCRG-Labs/molt-dynamics,
``src/molt_dynamics/rq2_diffusion.py``, ``DiffusionModeler.compute_exposures``, ``fit_logistic_model``,
``fit_cox_hazards``): one row per graph node (an agent with at least one interaction edge) and cascade;
exposure = predecessors that adopted strictly before v (adopters) or at any time (non-adopters);

* logistic regression of adopted on exposure and exposure^2 over all those rows (the public code uses
  scikit-learn's default L2-penalised ``LogisticRegression``; here the unpenalised maximum likelihood of
  statsmodels' GLM on the (exposure, adopted) counts, which is the same fit for the row table without the
  penalty and gives the Wald p-value of the square term);
* Cox model (lifelines ``CoxPHFitter``, Efron ties; its likelihood computed here by ``efron_cox``, 180 times
  faster and equal to it to 1e-9) over the adopters only: duration = hours from the
  cascade's first adoption to the agent's, rows with duration > 0, every row an event, no censoring; the
  single covariate is the fixed exposure count. Hazard ratio, its 95% CI and the concordance
  (``concordance_index_``) are what the paper reports (0.53 and 0.78).

The fixed count is measured at the adoption time: a later adopter has had more time to see its
neighbours adopt, so its count is larger *because* it adopted later. With adoption independent of the
network the published Cox model therefore still finds HR < 1 and the logistic square term comes out
significant: the "saturation" is made by the method.

**Time-varying Cox model** (lifelines ``CoxTimeVaryingFitter``, counting-process rows, strata = cascade):
for each cascade, every graph node is at risk from the first adoption (t = 0) until it adopts (event) or
until the cascade's last adoption (censored); its exposure is a step function that rises at each
predecessor's adoption, so the hazard at time t is compared with the exposure at time t, not with the
count reached at the end. Adopters at t = 0 (the seed and its ties) are not at risk. Nodes no predecessor
exposes before the end share identical rows and enter as one row per cascade with a frequency weight.

**Permutation null**: adoption times are shuffled among the adopters of each cascade (the adopter sets, the
graph and each cascade's first and last times stay), which keeps every mechanical link between time and
count and removes any effect of the network on timing. Each statistic (published Cox log hazard ratio,
logistic square coefficient, time-varying log hazard ratio) is recomputed on ``PERMUTATIONS`` seeded
shuffles; the report gives the null mean, 2.5/50/97.5 percentiles and the permutation p-value
(one-sided towards saturation: share of shuffles at least as low as observed, (1 + k) / (1 + B)).

**Rewired null** (``rewired``): the time shuffle keeps who adopts, and so the link between an agent's
activity and its exposure (an active agent uses many phrases, early, and comments with other active
agents); on a society without contagion whose agents differ in activity it still lets the logistic square
term pass as saturation (tests/unit/report/test_saturation.py). This null keeps every adoption and rewires the
interaction graph with each agent's in- and out-degree kept: what activity explains stays, what the
network's actual ties explain goes. Every draw re-indexes the exposures and refits the three models, so it
runs on its own seeded sample of whole cascades (``REWIRED_ROWS``) with ``REWIRED_NULLS``
draws (fewer, at least ``MIN_REWIRED_NULLS``, on a graph of more than ``REWIRED_EDGE_DRAWS / REWIRED_NULLS``
edges: each draw rewires the whole graph), and compares with the statistics observed on that same sample.
"""

from __future__ import annotations

import math
import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
import structlog

log = structlog.get_logger(__name__)

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]

PERMUTATIONS = 200
"""Shuffles of the permutation null (seeded with ``SEED``)."""
SEED = 20260314
MAX_TV_ROWS = 400_000
"""Counting-process rows of the time-varying model; above it, whole cascades are dropped at random
(seeded) until it fits, and the report says how many cascades were used."""
TV_PERMUTATION_ROW_BUDGET = 4_000_000
"""Rows x shuffles the time-varying null may fit; fewer shuffles than ``PERMUTATIONS`` when exceeded."""
MIN_ROWS = 10
REWIRED_NULLS = 200
"""Draws of the rewired null (the graph rewired with degrees kept, ``rewired``), each re-indexed and
refitted (seeded)."""
REWIRED_EDGE_DRAWS = 100_000_000
"""Graph edges x draws the rewired null may rewire: each draw permutes and sorts every edge of the whole
graph, so above 500,000 edges it makes fewer draws, never under ``MIN_REWIRED_NULLS`` (the report's
null table gives the draws and the p-value's resolution)."""
MIN_REWIRED_NULLS = 50
REWIRED_ROWS = 150_000
"""Counting-process rows of the rewired null's sample of whole cascades (as ``MAX_TV_ROWS``): each draw
re-indexes the exposures and refits all three models, so the sample is smaller."""


@dataclass(frozen=True)
class Diffusion:
    """Adoptions and the interaction graph, as integer indices.

    ``cascade``, ``agent``, ``hours`` are per adoption: the cascade (0..n_cascades-1), the adopter's graph
    node (0..n_nodes-1, or -1 for an adopter without any interaction edge, which counts for the cascade's
    first and last times but has no exposure) and the time in hours (any origin). ``src``/``dst``: the
    distinct directed edges between graph nodes.
    """

    cascade: IntArray
    agent: IntArray
    hours: FloatArray
    src: IntArray
    dst: IntArray
    n_nodes: int
    n_cascades: int


@dataclass(frozen=True)
class Structure:
    """What the exposures need and the adoption times do not change (computed once, reused by shuffles)."""

    seed: FloatArray  # per cascade: first adoption time
    span: FloatArray  # per cascade: last - first adoption time (hours)
    graph_rows: IntArray  # adoption rows whose adopter is a graph node
    pair_i: IntArray  # adopter-adopter edges within a cascade: row of the predecessor ...
    pair_j: IntArray  # ... and row of the successor
    na_cascade: IntArray  # per exposed non-adopter (cascade, node): its cascade
    na_pred: IntArray  # per (exposed non-adopter, adopting predecessor): the predecessor's row ...
    na_unit: IntArray  # ... and the non-adopter's index
    untouched: IntArray  # per cascade: graph nodes neither adopting nor having an adopting predecessor


@dataclass(frozen=True)
class CoxResult:
    log_hr: float
    hazard_ratio: float
    ci_low: float
    ci_high: float
    p: float
    concordance: float | None
    rows: int
    events: int


@dataclass(frozen=True)
class LogitResult:
    b_exposure: float
    b_exposure2: float
    p_exposure2: float
    rows: int


@dataclass(frozen=True)
class Null:
    """A statistic's permutation null: its observed value, the shuffled values' summary, the p-value."""

    observed: float
    mean: float
    p2_5: float
    p50: float
    p97_5: float
    p_value: float
    permutations: int


def structure(d: Diffusion) -> Structure:
    """Index the adopter-adopter edges and the exposed non-adopters of every cascade."""
    seed = np.full(d.n_cascades, np.inf)
    last = np.full(d.n_cascades, -np.inf)
    np.minimum.at(seed, d.cascade, d.hours)
    np.maximum.at(last, d.cascade, d.hours)
    graph_rows, pred_rows, tkeys, hit, pair_j = _successors(d)
    n = np.int64(d.n_nodes)
    pair_i = pred_rows[hit]
    na_keys, na_unit = np.unique(tkeys[~hit], return_inverse=True)
    na_cascade = (na_keys // n).astype(np.int64)
    adopters_per_c = np.bincount(d.cascade[graph_rows], minlength=d.n_cascades)
    exposed_per_c = np.bincount(na_cascade, minlength=d.n_cascades)
    return Structure(
        seed=seed,
        span=since_seed(last, seed),
        graph_rows=graph_rows,
        pair_i=pair_i.astype(np.int64),
        pair_j=pair_j.astype(np.int64),
        na_cascade=na_cascade,
        na_pred=pred_rows[~hit].astype(np.int64),
        na_unit=na_unit.astype(np.int64).reshape(-1),
        untouched=(d.n_nodes - adopters_per_c - exposed_per_c).astype(np.int64),
    )


def adopter_pairs(d: Diffusion) -> tuple[IntArray, IntArray]:
    """(predecessor's row, successor's row) of every graph edge whose two ends adopted the same cascade:
    ``structure``'s ``pair_i``/``pair_j`` without the non-adopters (a fraction of its cost)."""
    _, pred_rows, _, hit, pair_j = _successors(d)
    return pred_rows[hit].astype(np.int64), pair_j.astype(np.int64)


def _successors(d: Diffusion) -> tuple[IntArray, IntArray, IntArray, npt.NDArray[np.bool_], IntArray]:
    """Every (adoption row of u, successor v of u in the graph): the graph adoption rows, each pair's row of
    u and key (cascade, v), whether v adopted that cascade, and v's adoption row where it did."""
    graph_rows = np.flatnonzero(d.agent >= 0).astype(np.int64)
    n = np.int64(d.n_nodes)
    keys = d.cascade[graph_rows] * n + d.agent[graph_rows]
    order = np.argsort(keys, kind="stable")
    sorted_keys, sorted_rows = keys[order], graph_rows[order]
    if np.any(np.diff(sorted_keys) == 0):
        raise ValueError("an agent adopts the same cascade twice: adoptions must be first uses")
    # the successors of each node as CSR over src
    by_src = np.argsort(d.src, kind="stable")
    succ = d.dst[by_src]
    first = np.searchsorted(d.src[by_src], np.arange(d.n_nodes + 1))
    deg = (first[1:] - first[:-1])[d.agent[graph_rows]]
    pred_rows = np.repeat(graph_rows, deg)
    rank = np.arange(pred_rows.size) - np.repeat(np.cumsum(deg) - deg, deg)
    targets = succ[np.repeat(first[d.agent[graph_rows]], deg) + rank]
    tkeys = d.cascade[pred_rows] * n + targets
    pos = np.searchsorted(sorted_keys, tkeys)
    pos_c = np.minimum(pos, max(sorted_keys.size - 1, 0))
    hit = (
        (pos < sorted_keys.size) & (sorted_keys[pos_c] == tkeys)
        if sorted_keys.size
        else np.zeros_like(tkeys, bool)
    )
    return graph_rows, pred_rows, tkeys, hit, sorted_rows[pos_c[hit]]


def since_seed(hours: FloatArray, seed: FloatArray) -> FloatArray:
    """Hours from the cascade's first adoption, rounded to the microsecond so that equal stored times give
    equal durations whatever their distance from the time origin (ties decide rank-based fits)."""
    rel: FloatArray = np.round((hours - seed) * 3.6e9) / 3.6e9
    return rel


def rewired(d: Diffusion, rng: np.random.Generator, rounds: int = 50) -> tuple[Diffusion, int]:
    """The interaction graph rewired with every agent's degrees kept (the rewired null): the edges' targets
    are permuted, so each agent keeps how many agents it commented on and how many commented on it, and the
    adoptions (who, which cascade, when) all stay; who exposes whom is drawn. Edges the permutation makes
    self-loops or repeats get their targets permuted again with as many random others, up to ``rounds``
    times; those still bad are dropped. Returns the rewired diffusion and how many edges were."""
    m = d.src.size
    dst = d.dst[rng.permutation(m)]
    n = np.int64(max(d.n_nodes, 1))
    for _ in range(rounds):
        key = d.src * n + dst
        order = np.argsort(key, kind="stable")
        repeat = np.zeros(m, dtype=bool)
        repeat[order[1:][np.diff(key[order]) == 0]] = True
        bad = np.flatnonzero(repeat | (d.src == dst))
        if bad.size == 0:
            break
        pool = np.union1d(bad, rng.choice(m, min(m, bad.size), replace=False))
        dst[pool] = dst[pool[rng.permutation(pool.size)]]
    key = d.src * n + dst
    keep = d.src != dst
    _, first = np.unique(key, return_index=True)
    distinct = np.zeros(m, dtype=bool)
    distinct[first] = True
    keep &= distinct
    out = Diffusion(d.cascade, d.agent, d.hours, d.src[keep], dst[keep], d.n_nodes, d.n_cascades)
    return out, int(m - keep.sum())


def shuffled_hours(d: Diffusion, rng: np.random.Generator) -> FloatArray:
    """Adoption times permuted among the adopters of each cascade."""
    base = np.argsort(d.cascade, kind="stable")
    shuffled = np.lexsort((rng.random(d.cascade.size), d.cascade))
    out = np.empty_like(d.hours)
    out[base] = d.hours[shuffled]
    return out


# --- published method --------------------------------------------------------------------------------------


def adopter_exposure(d: Diffusion, s: Structure, hours: FloatArray) -> FloatArray:
    """Per adoption row: predecessors that adopted strictly earlier (the public code's count)."""
    earlier = (hours[s.pair_i] < hours[s.pair_j]).astype(np.float64)
    return np.bincount(s.pair_j, weights=earlier, minlength=d.cascade.size).astype(np.float64)


def published_cox(d: Diffusion, s: Structure, hours: FloatArray) -> CoxResult | str:
    """The public code's Cox model: adopters with duration > 0, all events, fixed exposure. lifelines'
    ``CoxPHFitter`` fit (Efron ties), computed by ``efron_cox``; its Wald CI and p-value and its
    concordance (lifelines' ``concordance_index`` of the fitted partial hazards) as lifelines reports them."""
    from lifelines.utils import concordance_index
    from scipy import stats

    expo = adopter_exposure(d, s, hours)[s.graph_rows]
    dur = since_seed(hours[s.graph_rows], s.seed[d.cascade[s.graph_rows]])
    keep = dur > 0
    if int(keep.sum()) < MIN_ROWS:
        return f"{int(keep.sum())} adoptions after their cascade's first one; at least {MIN_ROWS} are needed"
    x, t = expo[keep], dur[keep]
    if np.unique(x).size < 2:
        return "every adopter has the same exposure: no variation to model"
    fit = efron_cox(x, t)
    diverges = "the Cox model did not converge (the exposure coefficient diverges)"
    if fit is None:
        return diverges
    z = float(stats.norm.ppf(0.975))
    lo, hi = fit.coef - z * fit.se, fit.coef + z * fit.se
    with np.errstate(over="ignore", invalid="ignore"):
        p = float(stats.chi2.sf((fit.coef / fit.se) ** 2, 1))
    if (
        not all(math.isfinite(v) for v in (fit.coef, lo, hi, p))
        or max(abs(fit.coef), abs(lo), abs(hi)) > MAX_LOG_HR
    ):
        return diverges
    concordance = float(concordance_index(t, -np.exp(fit.coef * (x - x.mean())), np.ones(t.size)))
    rows = int(keep.sum())
    return CoxResult(fit.coef, math.exp(fit.coef), math.exp(lo), math.exp(hi), p, concordance, rows, rows)


def logit_counts(d: Diffusion, s: Structure, hours: FloatArray) -> tuple[FloatArray, FloatArray, FloatArray]:
    """(exposure, adopted, count) over every graph node x cascade, aggregated (most rows are (0, 0))."""
    expo_a = adopter_exposure(d, s, hours)[s.graph_rows]
    expo_n = np.bincount(s.na_unit, minlength=s.na_cascade.size).astype(np.float64)
    zeros = float(s.untouched.sum())
    x = np.concatenate([expo_a, expo_n, [0.0]])
    y = np.concatenate([np.ones(expo_a.size), np.zeros(expo_n.size), [0.0]])
    w = np.concatenate([np.ones(expo_a.size + expo_n.size), [zeros]])
    # exposures are counts of neighbours: one bincount over (exposure, adopted) pairs, O(rows) for each of
    # the permutations (a 2-column np.unique sorted every row at each shuffle)
    key = x.astype(np.int64) * 2 + y.astype(np.int64)
    counts = np.bincount(key, weights=w)
    (cells,) = np.nonzero(counts > 0)
    return (cells // 2).astype(np.float64), (cells % 2).astype(np.float64), counts[cells].astype(np.float64)


def published_logit(x: FloatArray, y: FloatArray, w: FloatArray) -> LogitResult | str:
    """Unpenalised logistic regression of adopted on [1, exposure, exposure^2] with frequency weights."""
    import statsmodels.api as sm

    rows = int(w.sum())
    if rows < MIN_ROWS:
        return f"{rows} (agent, cascade) rows; at least {MIN_ROWS} are needed"
    if np.unique(y).size < 2:
        return "every (agent, cascade) row has the same outcome: no variation to model"
    if np.unique(x).size < 3:
        return "exposure takes fewer than 3 distinct values: exposure and its square cannot be separated"
    design = np.column_stack([np.ones_like(x), x, x**2])
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            fit = sm.GLM(y, design, family=sm.families.Binomial(), freq_weights=w).fit()
    except Exception as exc:  # PerfectSeparationError, LinAlgError
        return f"the logistic regression could not be fitted ({type(exc).__name__}: {exc})"
    # statsmodels reports (quasi-)separation as a warning and still says "converged": its estimates are
    # then unidentified (coefficients run off to infinity), so no coefficient or p-value is given
    if any(type(c.message).__name__ == "PerfectSeparationWarning" for c in caught):
        return "the outcome is perfectly separated by exposure: the logistic coefficients are not identified"
    params = np.asarray(fit.params, dtype=np.float64)
    pvalues = np.asarray(fit.pvalues, dtype=np.float64)
    if not (np.all(np.isfinite(params)) and math.isfinite(pvalues[2]) and fit.converged):
        return "the logistic regression did not converge (separation or too little variation)"
    return LogitResult(float(params[1]), float(params[2]), float(pvalues[2]), rows)


# --- time-varying model ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Intervals:
    """Counting-process rows: (start, stop] with a constant exposure, event at stop, frequency weight."""

    cascade: IntArray
    start: FloatArray
    stop: FloatArray
    exposure: FloatArray
    event: FloatArray
    weight: FloatArray


def intervals(d: Diffusion, s: Structure, hours: FloatArray) -> Intervals:
    """Counting-process rows of every graph node at risk in every cascade (see the module docstring)."""
    rel = since_seed(hours, s.seed[d.cascade])
    n_a = d.cascade.size
    # units: adoption rows [0, n_a) (only graph adopters with rel > 0 are at risk), exposed non-adopters after
    unit_cascade = np.concatenate([d.cascade, s.na_cascade])
    unit_end = np.concatenate([rel, s.span[s.na_cascade]])
    unit_event = np.concatenate([np.ones(n_a), np.zeros(s.na_cascade.size)])
    at_risk = np.zeros(unit_cascade.size, dtype=bool)
    at_risk[s.graph_rows] = rel[s.graph_rows] > 0
    at_risk[n_a:] = s.span[s.na_cascade] > 0
    # exposure changes: (unit, time of a predecessor's adoption)
    ch_unit = np.concatenate([s.pair_j, n_a + s.na_unit])
    ch_time = np.concatenate([rel[s.pair_i], rel[s.na_pred]])
    before = ch_time <= 0
    e0 = np.bincount(ch_unit[before], minlength=unit_cascade.size).astype(np.float64)
    inside = (~before) & (ch_time < unit_end[ch_unit]) & at_risk[ch_unit]
    cu, ct = ch_unit[inside], ch_time[inside]
    order = np.lexsort((ct, cu))
    cu, ct = cu[order], ct[order]
    new = np.ones(cu.size, dtype=bool)
    new[1:] = (cu[1:] != cu[:-1]) | (ct[1:] != ct[:-1])
    idx = np.flatnonzero(new)
    mult = np.diff(np.append(idx, cu.size)).astype(np.float64)
    cu, ct = cu[idx], ct[idx]
    first_of_unit = np.ones(cu.size, dtype=bool)
    first_of_unit[1:] = cu[1:] != cu[:-1]
    group = np.cumsum(first_of_unit) - 1
    cum = np.cumsum(mult)
    group_base = (cum - mult)[first_of_unit]
    after = e0[cu] + cum - group_base[group]
    last_of_unit = np.ones(cu.size, dtype=bool)
    last_of_unit[:-1] = cu[1:] != cu[:-1]
    next_time = np.empty_like(ct)
    next_time[:-1] = ct[1:]
    stop_ch = np.where(last_of_unit, unit_end[cu], next_time)
    ev_ch = np.where(last_of_unit, unit_event[cu], 0.0)
    # the first row of every unit at risk: from 0 to its first change (or its end)
    units = np.flatnonzero(at_risk)
    n_changes = np.bincount(cu, minlength=unit_cascade.size)
    first_stop = unit_end.copy()
    first_stop[cu[first_of_unit]] = ct[first_of_unit]
    first_event = np.where(n_changes == 0, unit_event, 0.0)
    # untouched nodes: one weighted row per cascade
    ucs = np.flatnonzero((s.untouched > 0) & (s.span > 0))
    return Intervals(
        cascade=np.concatenate([unit_cascade[units], unit_cascade[cu], ucs]).astype(np.int64),
        start=np.concatenate([np.zeros(units.size), ct, np.zeros(ucs.size)]),
        stop=np.concatenate([first_stop[units], stop_ch, s.span[ucs]]),
        exposure=np.concatenate([e0[units], after, np.zeros(ucs.size)]),
        event=np.concatenate([first_event[units], ev_ch, np.zeros(ucs.size)]),
        weight=np.concatenate([np.ones(units.size + cu.size), s.untouched[ucs].astype(np.float64)]),
    )


MAX_LOG_HR = 700.0
"""A log hazard ratio (or CI bound) beyond this is a diverging fit, and exp() of it overflows a float."""


# --- a fast Cox estimator for the shuffles ------------------------------------------------------------------


@dataclass(frozen=True)
class FastCox:
    """Breslow partial-likelihood fit of one covariate: coefficient, its standard error, iterations."""

    coef: float
    se: float
    iterations: int


def fast_cox(
    x: FloatArray,
    stop: FloatArray,
    event: FloatArray,
    *,
    start: FloatArray | None = None,
    strata: IntArray | None = None,
    weight: FloatArray | None = None,
    beta0: float = 0.0,
    tol: float = 1e-9,
    max_iter: int = 50,
) -> FastCox | None:
    """Cox model with one covariate by Newton-Raphson on the Breslow partial likelihood, in numpy.

    Rows are (start, stop] intervals (start = 0 when not given) with an event at stop, frequency weights
    and strata. The risk set of an event at t in stratum s is the rows of s with start < t <= stop; its
    sums come from suffix sums over rows sorted by (stratum, time rank). lifelines fits the same model
    (Efron ties: equal when no two events share a time) in a Python loop over event times, 2.7 s for
    11,000 rows in 40 strata; this takes milliseconds, which is what 200 shuffles need. Checked against
    lifelines ``CoxPHFitter`` and ``CoxTimeVaryingFitter`` in tests/unit/report/test_saturation.py.
    ``beta0`` starts Newton's steps (the shuffles start from the observed coefficient); it stops when a
    step is below ``tol`` (relative). Returns None when the likelihood has no finite maximum (no events or
    no variation in x).
    """
    n = x.size
    strata = np.zeros(n, dtype=np.int64) if strata is None else strata
    weight = np.ones(n) if weight is None else weight
    ev = event > 0
    if not ev.any() or np.ptp(x) == 0:
        return None
    xc = x - float(np.average(x, weights=weight))
    # rows entered at 0 and leaving after it never start at or after an event time: no entry part to take
    # off the risk sets (the published model's rows; half the work of a fit)
    entry = (start is not None and bool(np.any(start != 0))) or not bool(np.all(stop > 0))
    begin = np.zeros(n) if start is None else start
    times, rank = np.unique(np.concatenate([begin, stop]) if entry else stop, return_inverse=True)
    m = np.int64(times.size + 1)
    k_stop = strata * m + (rank[n:] if entry else rank)
    o_stop = np.argsort(k_stop, kind="stable")
    ks_stop = k_stop[o_stop]
    # the events in key order (their sums do not depend on it): binary searches of sorted keys walk memory
    # forwards, where searches in row order took a third of a fit's time
    ev_sorted = ev[o_stop]
    ev_rows = o_stop[ev_sorted]
    k_ev = ks_stop[ev_sorted]
    k_end = strata[ev_rows] * m + m  # first key of the next stratum
    # rows of the stratum with stop >= t: positions [lo, hi) in the stop order; start >= t likewise
    idx_stop = np.concatenate([np.searchsorted(ks_stop, k_end), np.searchsorted(ks_stop, k_ev)])
    x_ev, w_ev = xc[ev_rows], weight[ev_rows]
    x_stop, w_stop = xc[o_stop], weight[o_stop]
    n_ev = k_ev.size
    if entry:
        k_start = strata * m + rank[:n]
        o_start = np.argsort(k_start, kind="stable")
        ks_start = k_start[o_start]
        idx_start = np.concatenate([np.searchsorted(ks_start, k_end), np.searchsorted(ks_start, k_ev)])
        x_start, w_start = xc[o_start], weight[o_start]

    def at_risk(xs: FloatArray, ws: FloatArray, idx: IntArray, beta: float) -> FloatArray:
        r = ws * np.exp(beta * xs)
        c = np.zeros((3, xs.size + 1))
        np.cumsum(np.stack([r, r * xs, r * xs * xs]), axis=1, out=c[:, 1:])
        picked = c[:, idx]
        diff: FloatArray = picked[:, :n_ev] - picked[:, n_ev:]
        return diff

    def sums(beta: float) -> tuple[float, float, float]:
        # a diverging beta overflows exp() and empties risk sets: the non-finite sums make the caller stop
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            risk = at_risk(x_stop, w_stop, idx_stop, beta)
            if entry:
                risk = risk - at_risk(x_start, w_start, idx_start, beta)
            s0, s1, s2 = risk
            ll = float(np.sum(w_ev * (beta * x_ev - np.log(s0))))
            score = float(np.sum(w_ev * (x_ev - s1 / s0)))
            info = float(np.sum(w_ev * (s2 / s0 - (s1 / s0) ** 2)))
        return ll, score, info

    return _newton(sums, beta0, tol, max_iter)


def _newton(
    sums: Callable[[float], tuple[float, float, float]], beta: float, tol: float, max_iter: int
) -> FastCox | None:
    """Newton-Raphson from ``beta`` on a log-likelihood given as (value, score, information) by ``sums``;
    a step that lowers the likelihood is halved (30 times at most). None when it does not converge."""
    ll, score, info = sums(beta)
    for it in range(1, max_iter + 1):
        if not info > 0:
            return None
        step = score / info
        for _ in range(30):
            new_ll, new_score, new_info = sums(beta + step)
            if math.isfinite(new_ll) and new_ll >= ll - 1e-12 * max(1.0, abs(ll)):
                break
            step /= 2
        else:
            return None
        beta, ll, score, info = beta + step, new_ll, new_score, new_info
        if abs(step) < tol * max(1.0, abs(beta)):
            return FastCox(beta, 1 / math.sqrt(info), it) if info > 0 else None
    return None


def efron_cox(x: FloatArray, duration: FloatArray, tol: float = 1e-9, max_iter: int = 50) -> FastCox | None:
    """Cox model of one covariate where every row is an event (no censoring, no entry, no strata, no
    weights: the published model), by Newton-Raphson on the Efron partial likelihood, in numpy.

    The same likelihood as lifelines' ``CoxPHFitter`` (Efron ties): at an event time with d tied events,
    the l-th of them (l = 0..d-1) has the risk set's sums less l/d of the tied events' own. lifelines walks
    the event times in a Python loop: 18.6 s for the demo's 80,084 rows (73,629 distinct times), where this
    takes 0.1 s; checked against it in tests/unit/report/test_saturation.py. None when the likelihood has no
    finite maximum."""
    if x.size == 0 or np.ptp(x) == 0:
        return None
    o = np.argsort(duration, kind="stable")
    xs = x[o] - float(x.mean())
    _, first, counts = np.unique(duration[o], return_index=True, return_counts=True)
    group = np.repeat(np.arange(first.size), counts)
    frac = (np.arange(xs.size) - first[group]) / counts[group]  # l/d of each tied event
    x_sum = float(xs.sum())

    def sums(beta: float) -> tuple[float, float, float]:
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            r = np.exp(beta * xs)
            terms = np.stack([r, r * xs, r * xs * xs])
            risk = np.cumsum(terms[:, ::-1], axis=1)[:, ::-1][:, first]  # rows with duration >= t
            tied = np.stack([np.bincount(group, weights=v, minlength=first.size) for v in terms])
            s0, s1, s2 = risk[:, group] - frac * tied[:, group]
            ll = beta * x_sum - float(np.sum(np.log(s0)))
            score = x_sum - float(np.sum(s1 / s0))
            info = float(np.sum(s2 / s0 - (s1 / s0) ** 2))
        return ll, score, info

    return _newton(sums, 0.0, tol, max_iter)


# --- permutation null --------------------------------------------------------------------------------------


def null_summary(observed: float, values: list[float]) -> Null | None:
    """Mean, 2.5/50/97.5 percentiles and the lower-tail p-value (1 + #{null <= observed}) / (1 + B)."""
    a = np.asarray([v for v in values if math.isfinite(v)], dtype=np.float64)
    if a.size == 0:
        return None
    q = np.percentile(a, [2.5, 50, 97.5])
    p = (1 + int(np.sum(a <= observed))) / (1 + a.size)
    return Null(observed, float(a.mean()), float(q[0]), float(q[1]), float(q[2]), p, int(a.size))


@dataclass(frozen=True)
class Saturation:
    """Everything the report shows about saturation (each model a result or the reason it has none)."""

    cox: CoxResult | str
    logit: LogitResult | str
    tv: CoxResult | str
    cox_null: Null | None
    logit_null: Null | None
    tv_null: Null | None
    rewired: RewiredNull
    propagation_events: int
    graph_nodes: int
    n_cascades: int
    tv_cascades: int
    tv_rows: int
    seconds: float


def published_rows(d: Diffusion, s: Structure, hours: FloatArray) -> tuple[FloatArray, FloatArray]:
    """(exposure, duration) of the published Cox model's rows: graph adopters with duration > 0."""
    expo = adopter_exposure(d, s, hours)[s.graph_rows]
    dur = since_seed(hours[s.graph_rows], s.seed[d.cascade[s.graph_rows]])
    keep = dur > 0
    return expo[keep], dur[keep]


def published_log_hr(d: Diffusion, s: Structure, hours: FloatArray, beta0: float = 0.0) -> float:
    """The published Cox model's log hazard ratio by ``fast_cox`` (NaN when it has no maximum)."""
    expo, dur = published_rows(d, s, hours)
    fit = fast_cox(expo, dur, np.ones(expo.size), beta0=beta0) if expo.size >= MIN_ROWS else None
    return fit.coef if fit else math.nan


def tv_fit(rows: Intervals, beta0: float = 0.0) -> CoxResult | str:
    """The time-varying Cox model (``fast_cox`` on the counting-process rows, strata = cascade)."""
    events = int(rows.event.sum())
    if events < MIN_ROWS:
        return f"{events} adoptions at risk after their cascade's first one; at least {MIN_ROWS} are needed"
    fit = fast_cox(
        rows.exposure,
        rows.stop,
        rows.event,
        start=rows.start,
        strata=rows.cascade,
        weight=rows.weight,
        beta0=beta0,
    )
    if fit is None:
        return "the time-varying Cox model has no finite maximum (no variation in exposure, or separation)"
    z = fit.coef / fit.se
    half = 1.959963984540054 * fit.se
    if not math.isfinite(half) or abs(fit.coef) + half > MAX_LOG_HR:
        return "the time-varying Cox model did not converge (the exposure coefficient diverges)"
    p = math.erfc(abs(z) / math.sqrt(2))
    return CoxResult(
        fit.coef,
        math.exp(fit.coef),
        math.exp(fit.coef - half),
        math.exp(fit.coef + half),
        p,
        None,
        int(rows.weight.sum()),
        events,
    )


def analyse(
    d: Diffusion,
    *,
    permutations: int = PERMUTATIONS,
    seed: int = SEED,
    max_tv_rows: int = MAX_TV_ROWS,
    indexed: Structure | None = None,
    rewired_draws: int = REWIRED_NULLS,
    rewired_rows: int = REWIRED_ROWS,
) -> Saturation:
    """Fit the published models and the time-varying model, and the two nulls of each (adoption times
    shuffled within cascade; the graph rewired with degrees kept, ``rewired``). ``indexed``:
    ``structure(d)``, where the caller has it already."""
    t0 = time.perf_counter()
    rng = np.random.default_rng(seed)
    s = indexed if indexed is not None else structure(d)
    cox = published_cox(d, s, d.hours)
    logit = published_logit(*logit_counts(d, s, d.hours))
    tv_d, tv_s = _bounded(d, s, max_tv_rows, rng)
    rows = intervals(tv_d, tv_s, tv_d.hours)
    tv = tv_fit(rows)
    tv_perms = min(permutations, TV_PERMUTATION_ROW_BUDGET // max(rows.start.size, 1))
    cox_obs = published_log_hr(d, s, d.hours) if isinstance(cox, CoxResult) else math.nan
    cox_vals: list[float] = []
    logit_vals: list[float] = []
    tv_vals: list[float] = []
    for k in range(permutations):
        h = shuffled_hours(d, rng)
        if isinstance(cox, CoxResult):
            cox_vals.append(published_log_hr(d, s, h, cox_obs if math.isfinite(cox_obs) else 0.0))
        if isinstance(logit, LogitResult):
            lr = published_logit(*logit_counts(d, s, h))
            logit_vals.append(lr.b_exposure2 if isinstance(lr, LogitResult) else math.nan)
        if isinstance(tv, CoxResult) and k < tv_perms:
            rt = tv_fit(intervals(tv_d, tv_s, shuffled_hours(tv_d, rng)), tv.log_hr)
            tv_vals.append(rt.log_hr if isinstance(rt, CoxResult) else math.nan)
    draws = min(rewired_draws, max(MIN_REWIRED_NULLS, REWIRED_EDGE_DRAWS // max(d.src.size, 1)))
    act = rewired_null(*_bounded(d, s, rewired_rows, rng), draws, rng)
    expo, _ = published_rows(d, s, d.hours)
    seconds = time.perf_counter() - t0
    log.info(
        "saturation",
        cascades=d.n_cascades,
        graph_nodes=d.n_nodes,
        tv_rows=rows.start.size,
        permutations=permutations,
        seconds=round(seconds, 2),
    )
    return Saturation(
        cox=cox,
        logit=logit,
        tv=tv,
        cox_null=null_summary(cox_obs, cox_vals) if cox_vals else None,
        logit_null=null_summary(logit.b_exposure2, logit_vals) if isinstance(logit, LogitResult) else None,
        tv_null=null_summary(tv.log_hr, tv_vals) if isinstance(tv, CoxResult) else None,
        rewired=act,
        propagation_events=int(expo.size),
        graph_nodes=d.n_nodes,
        n_cascades=d.n_cascades,
        tv_cascades=tv_d.n_cascades,
        tv_rows=int(rows.start.size),
        seconds=seconds,
    )


@dataclass(frozen=True)
class RewiredNull:
    """The rewired null (``rewired``) of each statistic, on a seeded sample of whole cascades:
    ``observed`` of each ``Null`` is the statistic on that same sample."""

    cox: Null | None
    logit: Null | None
    tv: Null | None
    cascades: int  # in the sample
    draws: int
    edges_dropped: int  # most edges one draw dropped (self-loops, repeats; see ``rewired``)


def rewired_null(d: Diffusion, s: Structure, draws: int, rng: np.random.Generator) -> RewiredNull:
    """Each statistic (published Cox log HR, logistic square term, time-varying log HR) on ``d`` and on
    ``draws`` rewired versions of it."""
    cox_o = published_log_hr(d, s, d.hours)
    logit = published_logit(*logit_counts(d, s, d.hours))
    tv = tv_fit(intervals(d, s, d.hours))
    cox_vals: list[float] = []
    logit_vals: list[float] = []
    tv_vals: list[float] = []
    dropped = 0
    for _ in range(draws):
        a, lost = rewired(d, rng)
        dropped = max(dropped, lost)
        sa = structure(a)
        if math.isfinite(cox_o):
            cox_vals.append(published_log_hr(a, sa, a.hours, cox_o))
        if isinstance(logit, LogitResult):
            lr = published_logit(*logit_counts(a, sa, a.hours))
            logit_vals.append(lr.b_exposure2 if isinstance(lr, LogitResult) else math.nan)
        if isinstance(tv, CoxResult):
            rt = tv_fit(intervals(a, sa, a.hours), tv.log_hr)
            tv_vals.append(rt.log_hr if isinstance(rt, CoxResult) else math.nan)
    return RewiredNull(
        cox=null_summary(cox_o, cox_vals) if cox_vals else None,
        logit=null_summary(logit.b_exposure2, logit_vals) if isinstance(logit, LogitResult) else None,
        tv=null_summary(tv.log_hr, tv_vals) if isinstance(tv, CoxResult) else None,
        cascades=d.n_cascades,
        draws=draws,
        edges_dropped=dropped,
    )


def _bounded(
    d: Diffusion, s: Structure, max_rows: int, rng: np.random.Generator
) -> tuple[Diffusion, Structure]:
    """``d`` restricted to a seeded random subset of whole cascades whose counting-process rows fit."""
    rows = intervals(d, s, d.hours)
    if rows.start.size <= max_rows:
        return d, s
    per_c = np.bincount(rows.cascade, minlength=d.n_cascades)
    order = rng.permutation(d.n_cascades)
    keep_c = np.sort(order[np.cumsum(per_c[order]) <= max_rows])
    new_index = np.full(d.n_cascades, -1, dtype=np.int64)
    new_index[keep_c] = np.arange(keep_c.size)
    keep = new_index[d.cascade] >= 0
    sub = Diffusion(
        cascade=new_index[d.cascade[keep]],
        agent=d.agent[keep],
        hours=d.hours[keep],
        src=d.src,
        dst=d.dst,
        n_nodes=d.n_nodes,
        n_cascades=int(keep_c.size),
    )
    return sub, structure(sub)
