"""Information cascades (Molt Dynamics): size distribution and exposure saturation.

The SQL views (warehouse/molt_dynamics.sql) find the cascades (``cascade_adoptions``, ``cascades``); this
module fits what SQL cannot:

* the discrete power law of cascade sizes (``algorithms.powerlaw_fit``, equal to ``powerlaw.Fit(sizes,
  discrete=True)``) over all cascades, and per kind where the fit is possible;
* saturation (``report.saturation``): the published method (fixed exposure count at adoption; logistic
  regression with a squared term over every graph node x cascade; Cox model over the adopters, as the
  public Molt Dynamics code builds them), beside a Cox model with time-varying exposure (stratified by
  cascade) and two nulls of each statistic: adoption times shuffled among each cascade's adopters, and
  the interaction graph rewired with every agent's degrees kept (``saturation.rewired``: keeps what
  activity explains, which the time shuffle leaves tied to exposure). The published Cox model finds
  "saturation" (HR < 1) even when adoption ignores the network; the variant rows say whether it survives.

What is compared with the published numbers: ``cascades.alpha`` with alpha = 2.57; the published method's
``saturation.cox_hazard_ratio`` and ``saturation.cox_concordance`` with 0.53 and 0.78; and
``cascades.propagation_events`` with the paper's "10,323 propagation events". The paper does not define
that count; we read it as the events of its Cox model, i.e. adoptions after their cascade's first one by
agents of the interaction graph (the rows ``fit_cox_hazards`` in the public ``rq2_diffusion.py`` keeps:
duration > 0, event = 1). ``cascades.count`` (the number of cascades) has no published value: the paper
does not give it.

Above ``MAX_ADOPTIONS`` adoptions, the saturation models run on a deterministic hash sample of whole
cascades (``cityHash64(kind, item)``; the report says how many cascades were used), and above
``MAX_EXPOSURES`` exposures (adoptions times the adopter's out-degree) on the first whole cascades in the
order of that hash that fit (``cap_exposures``); the cascade counts and the power law use every cascade
found. Above ``MEME_TEXTS`` posts and comments the meme cascades are found among a hash sample of the
n-grams (``meme_share``, view ``cascade_adoptions_sample``): each kept n-gram's cascade is whole, the
sizes are a random sample of the meme cascades' sizes (the power law's estimate unbiased, its interval
wider), and the meme count is the sample's (the report gives the share beside it).
"""

from __future__ import annotations

import math
from collections import defaultdict

import numpy as np
import numpy.typing as npt
from scipy.special import zeta

from molt_society.algorithms.powerlaw_fit import (
    MIN_DISTINCT_VALUES,
    MIN_OBSERVATIONS,
    PowerLawFit,
    fit_discrete_power_law,
)
from molt_society.report import cascade_variants
from molt_society.report.model import Figure, Item, Scalar, Series, Table
from molt_society.report.saturation import (
    CoxResult,
    Diffusion,
    LogitResult,
    Null,
    RewiredNull,
    Saturation,
    analyse,
    structure,
)
from molt_society.report.warehouse_source import Warehouse, quoted

FloatArray = npt.NDArray[np.float64]

KINDS = ("meme", "skill", "behaviour")
MAX_ADOPTIONS = 1_000_000
MAX_EXPOSURES = 10_000_000
MEME_TEXTS = 1_000_000  # above this many posts and comments, meme cascades come from a hash sample of n-grams
PER_MILLION = cascade_variants.PER_MILLION


def meme_share(wh: Warehouse, society: str) -> int:
    """How many of every million meme n-grams the cascades are read from: all up to ``MEME_TEXTS`` posts
    and comments, else about ``MEME_TEXTS`` texts' worth (``cascade_adoptions_sample``: a hash sample of
    whole n-gram items, each kept cascade complete). Grouping every (n-gram, agent) pair of a 17M-event
    archive needed more than the report's 8 GiB per query."""
    texts = int(
        wh.query(
            f"SELECT count() FROM events FINAL WHERE society = {quoted(society)} "
            "AND type IN ('post_created', 'comment_created')"
        ).rows[0][0]
    )
    return PER_MILLION if texts <= MEME_TEXTS else max(1, PER_MILLION * MEME_TEXTS // texts)


def adoptions_source(share: int) -> str:
    """The adoptions with meme n-grams kept ``share`` per million (a number of the code's, not input)."""
    return f"cascade_adoptions_sample(meme_share = {int(share)})"


def cascade_sizes(wh: Warehouse, society: str, share: int = PER_MILLION) -> dict[str, dict[int, int]]:
    """Per kind, the histogram ``{size: number of cascades}`` (memes: of the n-grams kept ``share`` per
    million)."""
    res = wh.query(
        "SELECT kind, size, count() FROM (SELECT kind, item, count() AS size "
        f"FROM {adoptions_source(share)} WHERE society = {quoted(society)} GROUP BY kind, item) "
        "GROUP BY kind, size"
    )
    out: dict[str, dict[int, int]] = defaultdict(dict)
    for kind, size, n in res.rows:
        out[str(kind)][int(size)] = int(n)
    return dict(out)


def diffusion(wh: Warehouse, society: str, adoptions: int, share: int = PER_MILLION) -> tuple[Diffusion, int]:
    """The adoptions (a hash sample of whole cascades above ``MAX_ADOPTIONS``) and the interaction graph.

    ``adoptions`` is the society's total (from the cascade sizes); returns the data and the number of
    cascades it holds. Agent names are mapped to indices in Python; nothing read is put back into SQL.
    """
    where = f"society = {quoted(society)}"
    if adoptions > MAX_ADOPTIONS:
        keep = max(1, math.floor(MAX_ADOPTIONS / adoptions * 1_000_000))
        where += f" AND cityHash64(kind, item) % 1000000 < {keep}"
    # a fixed row order (ORDER BY): the seeded shuffles of the permutation null then repeat exactly
    rows = wh.query(
        "SELECT cityHash64(kind, item), actor, toUnixTimestamp64Micro(adopted_at) "
        f"FROM {adoptions_source(share)} "
        f"WHERE {where} ORDER BY cityHash64(kind, item), actor, adopted_at"
    ).rows
    edges = wh.query(
        f"SELECT DISTINCT src, dst FROM interaction_edges WHERE society = {quoted(society)} "
        "AND dst != '' AND src != dst ORDER BY src, dst"
    ).rows
    nodes = sorted({str(a) for e in edges for a in e})
    index = {a: i for i, a in enumerate(nodes)}
    cascade_ids, cascade = np.unique(
        np.asarray([int(r[0]) for r in rows], dtype=np.uint64), return_inverse=True
    )
    micros = np.asarray([int(r[2]) for r in rows], dtype=np.int64)
    origin = int(micros.min()) if micros.size else 0
    d = Diffusion(
        cascade=cascade.astype(np.int64).reshape(-1),
        agent=np.asarray([index.get(str(r[1]), -1) for r in rows], dtype=np.int64),
        hours=(micros - origin) / 3.6e9,
        src=np.asarray([index[str(e[0])] for e in edges], dtype=np.int64),
        dst=np.asarray([index[str(e[1])] for e in edges], dtype=np.int64),
        n_nodes=len(nodes),
        n_cascades=int(cascade_ids.size),
    )
    return cap_exposures(d, cascade_ids)


def cap_exposures(d: Diffusion, cascade_ids: npt.NDArray[np.uint64]) -> tuple[Diffusion, int]:
    """``d`` with at most ``MAX_EXPOSURES`` exposures (an adoption times its adopter's out-degree: the
    (adopter, successor) pairs ``saturation.structure`` indexes, about 60 bytes each while it does), and
    the number of cascades kept: whole cascades in the order of their hash (``cascade_ids``, the
    ``cityHash64(kind, item)`` of each index), as many as fit. A few prolific agents' adoptions make the
    exposures grow much faster than the adoptions (at 1.35M events, 1M adoptions gave some 10^8)."""
    out_degree = np.bincount(d.src, minlength=max(d.n_nodes, 1))  # one 0 for a graph without nodes
    per_row = np.where(d.agent >= 0, out_degree[np.maximum(d.agent, 0)], 0)
    per_cascade = np.bincount(d.cascade, weights=per_row, minlength=d.n_cascades)
    if per_cascade.sum() <= MAX_EXPOSURES:
        return d, d.n_cascades
    order = np.argsort(cascade_ids, kind="stable")
    fits = np.cumsum(per_cascade[order]) <= MAX_EXPOSURES
    fits[0] = True  # at least one cascade
    keep = np.zeros(d.n_cascades, dtype=bool)
    keep[order[fits]] = True
    rows = keep[d.cascade]
    new_index = np.cumsum(keep) - 1
    kept = Diffusion(
        cascade=new_index[d.cascade[rows]].astype(np.int64),
        agent=d.agent[rows],
        hours=d.hours[rows],
        src=d.src,
        dst=d.dst,
        n_nodes=d.n_nodes,
        n_cascades=int(keep.sum()),
    )
    return kept, kept.n_cascades


def items(wh: Warehouse, society: str) -> list[Item]:
    """Cascade counts, the power-law fit and CCDF, the saturation models and their permutation nulls."""
    share = meme_share(wh, society)
    sizes = cascade_sizes(wh, society, share)
    total_hist: dict[int, int] = defaultdict(int)
    for hist in sizes.values():
        for s, n in hist.items():
            total_hist[s] += n
    n_cascades = sum(total_hist.values())
    memes = cascade_variants.meme_sample_label(share)
    out: list[Item] = [
        Scalar(
            "cascades.count",
            "Cascades (all kinds; the paper gives no count to compare)" + memes,
            n_cascades,
            unit="cascades",
        )
    ]
    out += [
        Scalar(
            f"cascades.count_{k}",
            f"Cascades: {k}" + (memes if k == "meme" else ""),
            sum(sizes.get(k, {}).values()),
            unit="cascades",
        )
        for k in KINDS
    ]
    out.append(
        Scalar(
            "cascades.meme_share",
            "Meme n-grams the cascades are read from, per million (a hash sample of whole n-gram items "
            f"above {MEME_TEXTS:,} posts and comments; {PER_MILLION:,}: all)",
            share,
        )
    )
    out += _power_law_items(sizes, dict(total_hist))
    out += cascade_variants.items(wh, society, dict(total_hist), share)

    adoptions = sum(s * n for s, n in total_hist.items())
    d, used = diffusion(wh, society, adoptions, share)
    indexed = structure(d)
    sat = analyse(d, indexed=indexed)
    sampled = used < n_cascades
    out += cascade_variants.network_items(d, indexed, sampled)
    out.append(
        Scalar(
            "cascades.propagation_events",
            "Propagation events: adoptions after their cascade's first one, by agents of the interaction "
            "graph (the events of the published Cox model)"
            + (" [in the sampled cascades]" if sampled else ""),
            sat.propagation_events,
            unit="adoptions",
        )
    )
    if sampled:
        out.append(
            Scalar(
                "saturation.cascades_used",
                f"Cascades used by the saturation models (hash sample, caps {MAX_ADOPTIONS:,} adoptions and "
                f"{MAX_EXPOSURES:,} exposures)",
                used,
                unit="cascades",
            )
        )
    out += saturation_items(sat)
    return out


def saturation_items(sat: Saturation) -> list[Item]:
    """The published models, the time-varying variant and the permutation-null table."""
    out: list[Item] = [
        Scalar(
            "saturation.graph_nodes",
            "Agents of the interaction graph (the models' population)",
            sat.graph_nodes,
        ),
    ]
    out += _logistic_items(sat.logit)
    out += _cox_items(sat.cox)
    tv = sat.tv if isinstance(sat.tv, CoxResult) else None
    reason = sat.tv if isinstance(sat.tv, str) else None
    label = "variant: time-varying exposure (Cox, strata = cascade)"
    out += [
        Scalar(
            "saturation.variant_tv_hazard_ratio",
            f"{label}: hazard ratio per unit of exposure",
            tv.hazard_ratio if tv else None,
            reason,
        ),
        Scalar("saturation.variant_tv_ci_low", f"{label}: 95% CI, lower", tv.ci_low if tv else None, reason),
        Scalar(
            "saturation.variant_tv_ci_high", f"{label}: 95% CI, upper", tv.ci_high if tv else None, reason
        ),
        Scalar("saturation.variant_tv_p", f"{label}: Wald p-value", tv.p if tv else None, reason),
        Scalar(
            "saturation.variant_tv_rows",
            f"{label}: agent x cascade risk rows"
            + (
                f" ({sat.tv_cascades} of {sat.n_cascades} cascades, seeded sample)"
                if sat.tv_cascades < sat.n_cascades
                else ""
            ),
            tv.rows if tv else None,
            reason,
        ),
    ]
    survives: int | None = None
    why = None
    if tv is None:
        why = reason
    elif sat.tv_null is None:
        why = "the permutation null of the time-varying model could not be computed"
    elif sat.rewired.tv is None:
        why = "the rewired null of the time-varying model could not be computed"
    else:
        survives = int(tv.ci_high < 1 and sat.tv_null.p_value < 0.05 and sat.rewired.tv.p_value < 0.05)
    out.append(
        Scalar(
            "saturation.variant_survives",
            "variant: saturation survives (time-varying HR's 95% CI < 1; p < 0.05 against both nulls: times "
            "shuffled within cascade, the graph rewired with degrees kept): 1 yes, 0 no",
            survives,
            why,
        )
    )
    act = sat.rewired.logit
    out.append(
        Scalar(
            "saturation.logit_beyond_rewired_null",
            "published logistic: exposure^2 below the rewired null (graph rewired with degrees kept, "
            "p < 0.05 on the null's cascade sample): 1 yes, 0 no ('not distinguishable from the null')",
            None if act is None else int(act.p_value < 0.05),
            None if act is not None else "the rewired null of the logistic model could not be computed",
        )
    )
    out += _null_hazard_items(sat)
    out += _rewired_hazard_items(sat.rewired)
    out.append(_null_table(sat))
    out.append(_rewired_table(sat.rewired))
    return out


def _rewired_table(act: RewiredNull) -> Table:
    """Each statistic against the rewired null, on the null's own sample of whole cascades."""
    named = [
        ("published Cox: log hazard ratio", act.cox),
        ("published logistic: exposure^2 coefficient", act.logit),
        ("variant: time-varying Cox: log hazard ratio", act.tv),
    ]
    note = (
        f"{act.cascades} cascades (seeded sample); at most {act.edges_dropped} edges a draw dropped "
        "(self-loops, repeats)"
    )
    rows = [_null_row(name, null, note, "no model on the sample") for name, null in named]
    return Table(
        "saturation.rewired_null",
        "null keeping activity: the interaction graph rewired with every agent's in- and out-degree kept, "
        "every adoption kept (seeded), every model refitted on each draw; observed = the statistic on the "
        "same sample; p = share of draws at or below it (towards saturation). Shuffling times alone keeps "
        "who adopts, and so the link between an agent's activity and its exposure: a society without "
        "contagion can pass that null",
        [
            "statistic",
            "observed (sample)",
            "null mean",
            "null 2.5%",
            "null 50%",
            "null 97.5%",
            "p (lower tail)",
            "draws",
            "p resolution (1 / (1 + draws))",
            "note",
        ],
        rows,
    )


def _null_hazard_items(sat: Saturation) -> list[Item]:
    """The published Cox model's hazard ratio on the permutation null (median and 95% of the shuffles):
    the value a society without contagion gets from the same method."""
    null = sat.cox_null
    why = None if null else "the permutation null of the published Cox model could not be computed"
    label = "null (adoption times shuffled within each cascade): published Cox hazard ratio"
    return [
        Scalar(
            "saturation.null_cox_hazard_ratio", f"{label}, median", math.exp(null.p50) if null else None, why
        ),
        Scalar(
            "saturation.null_cox_hazard_ratio_ci_low",
            f"{label}, 2.5%",
            math.exp(null.p2_5) if null else None,
            why,
        ),
        Scalar(
            "saturation.null_cox_hazard_ratio_ci_high",
            f"{label}, 97.5%",
            math.exp(null.p97_5) if null else None,
            why,
        ),
        Scalar("saturation.null_shuffles", f"{label}: shuffles", null.permutations if null else None, why),
    ]


def _rewired_hazard_items(rw: RewiredNull) -> list[Item]:
    """The published Cox model's hazard ratio on the rewired null (median and 95% of the draws): the value
    the same agents, as active as they are, get from the method when who interacts with whom is random.
    The null published beside the 0.53 (``report.comparisons``): it keeps what the time shuffle loses."""
    null = rw.cox
    why = None if null else "the rewired null of the published Cox model could not be computed"
    label = (
        "null (interaction graph rewired with degrees kept; seeded sample of "
        f"{rw.cascades} cascades): published Cox hazard ratio"
    )
    key = "saturation.null_rewired_cox_hazard_ratio"
    return [
        Scalar(key, f"{label}, median", math.exp(null.p50) if null else None, why),
        Scalar(f"{key}_ci_low", f"{label}, 2.5%", math.exp(null.p2_5) if null else None, why),
        Scalar(f"{key}_ci_high", f"{label}, 97.5%", math.exp(null.p97_5) if null else None, why),
        Scalar(
            "saturation.rewired_sample_cox_hazard_ratio",
            f"published Cox hazard ratio on the rewired null's sample of {rw.cascades} cascades",
            math.exp(null.observed) if null else None,
            why,
        ),
    ]


def _null_row(name: str, null: Null | None, note: str, missing: str) -> list[float | int | str | None]:
    """One statistic's row of a null table: observed, the null's mean and percentiles, the p-value, the
    draws and the p-value's resolution; ``missing`` as the note when there is no null."""
    if null is None:
        return [name, None, None, None, None, None, None, 0, None, missing]
    return [
        name,
        null.observed,
        null.mean,
        null.p2_5,
        null.p50,
        null.p97_5,
        null.p_value,
        null.permutations,
        1 / (1 + null.permutations),
        note,
    ]


def _null_table(sat: Saturation) -> Table:
    named: list[tuple[str, Null | None, CoxResult | LogitResult | str]] = [
        ("published Cox: log hazard ratio", sat.cox_null, sat.cox),
        ("published logistic: exposure^2 coefficient", sat.logit_null, sat.logit),
        ("variant: time-varying Cox: log hazard ratio", sat.tv_null, sat.tv),
    ]
    rows = [
        _null_row(name, null, "", fit if isinstance(fit, str) else "no shuffle could be fitted")
        for name, null, fit in named
    ]
    return Table(
        "saturation.variant_permutation_null",
        "variant: permutation null (adoption times shuffled among each cascade's adopters, seeded); "
        "p = share of shuffles at or below the observed value (towards saturation)",
        [
            "statistic",
            "observed",
            "null mean",
            "null 2.5%",
            "null 50%",
            "null 97.5%",
            "p (lower tail)",
            "shuffles",
            "p resolution (1 / (1 + shuffles))",
            "note",
        ],
        rows,
    )


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
        Scalar(
            "cascades.alpha_candidates_at_bound",
            "xmin candidates whose alpha ran into the search range"
            + (
                f" ({fit.alpha_range[0]:g}, {fit.alpha_range[1]:g}]: not 0 = the range shaped the fit"
                if fit
                else ""
            ),
            fit.candidates_at_bound if fit else None,
            reason,
        ),
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
    return (
        f"no power-law fit for {n} cascades (too few distinct sizes, or the fit at every xmin candidate "
        "ran into a bound of the alpha range)"
    )


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


def _logistic_items(res: LogitResult | str) -> list[Item]:
    reason = res if isinstance(res, str) else None
    fit = res if isinstance(res, LogitResult) else None
    saturating = None if fit is None else int(fit.b_exposure2 < 0 and fit.p_exposure2 < 0.05)
    what = "published method (fixed exposure count, every graph agent x cascade)"
    return [
        Scalar(
            "saturation.logit_exposure",
            f"Logistic coefficient of exposure; {what}",
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
            "Wald p-value of the squared term",
            fit.p_exposure2 if fit else None,
            reason,
        ),
        Scalar(
            "saturation.saturating",
            "Adoption saturates by the published logistic reading (square term < 0, p < 0.05): 1 yes, 0 no",
            saturating,
            reason,
        ),
    ]


def _cox_items(res: CoxResult | str) -> list[Item]:
    reason = res if isinstance(res, str) else None
    fit = res if isinstance(res, CoxResult) else None
    what = "published method (fixed exposure count, adopters only, no censoring)"
    return [
        Scalar(
            "saturation.cox_hazard_ratio",
            f"Cox hazard ratio per unit of exposure; {what}",
            fit.hazard_ratio if fit else None,
            reason,
        ),
        Scalar(
            "saturation.cox_ci_low", "Cox hazard ratio: 95% CI, lower", fit.ci_low if fit else None, reason
        ),
        Scalar(
            "saturation.cox_ci_high", "Cox hazard ratio: 95% CI, upper", fit.ci_high if fit else None, reason
        ),
        Scalar("saturation.cox_p", "Cox hazard ratio: p-value", fit.p if fit else None, reason),
        Scalar(
            "saturation.cox_concordance",
            "Concordance (Harrell's C) of the published Cox model",
            fit.concordance if fit else None,
            reason,
        ),
    ]
