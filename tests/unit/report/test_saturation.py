"""Exposure saturation (report.saturation): the published fixed-count models, the time-varying Cox model and
the permutation null, on synthetic diffusions with a known answer.

* null: adopters and adoption times drawn independently of the network; the published Cox model still
  reports HR < 1 (the artefact of issue 14, defect 3), the time-varying model's CI holds 1 and the
  permutation p-values are not small;
* contagion: each agent's adoption hazard grows with the number of its predecessors that adopted; the
  time-varying model finds HR > 1;
* activity without contagion (each agent uses a phrase at its own posting rate, active agents comment on
  each other more): the time-shuffle null lets the logistic square term pass as saturation, the rewired
  null (the graph rewired with degrees kept) does not;
* a hand-counted four-agent cascade for the exposures and the counting-process rows;
* ``fast_cox`` against lifelines ``CoxPHFitter`` and ``CoxTimeVaryingFitter`` (strata, weights, entry).
"""

from __future__ import annotations

import math
from collections import Counter

import numpy as np
import numpy.typing as npt
import pandas as pd
import pytest

from molt_society.report.saturation import (
    CoxResult,
    Diffusion,
    adopter_exposure,
    analyse,
    fast_cox,
    intervals,
    logit_counts,
    null_summary,
    rewired,
    shuffled_hours,
    structure,
)

Ints = npt.NDArray[np.int64]


def random_graph(rng: np.random.Generator, n: int, k: int) -> tuple[Ints, Ints]:
    src = np.repeat(np.arange(n), k)
    dst = rng.integers(0, n, n * k)
    keep = src != dst
    e = np.unique(np.column_stack([src[keep], dst[keep]]), axis=0)
    return e[:, 0].astype(np.int64), e[:, 1].astype(np.int64)


def null_diffusion(seed: int, n: int = 300, k: int = 4, cascades: int = 30) -> Diffusion:
    """Adopters and times independent of the graph; a fifth of the adopters are outside it (agent -1)."""
    rng = np.random.default_rng(seed)
    src, dst = random_graph(rng, n, k)
    cas: list[int] = []
    ag: list[int] = []
    hours: list[float] = []
    for c in range(cascades):
        m = int(rng.integers(15, 60))
        cas += [c] * m
        ag += [int(a) if rng.random() > 0.2 else -1 for a in rng.choice(n, m, replace=False)]
        hours += list(rng.uniform(0, 100, m))
    return Diffusion(np.array(cas), np.array(ag), np.array(hours), src, dst, n, cascades)


def contagion_diffusion(seed: int, n: int = 200, k: int = 3, cascades: int = 8, steps: int = 40) -> Diffusion:
    """Discrete-time contagion: P(adopt in a step) = 0.002 + 0.03 * (predecessors adopted before it)."""
    rng = np.random.default_rng(seed)
    src, dst = random_graph(rng, n, k)
    preds: list[list[int]] = [[] for _ in range(n)]
    for s, d in zip(src, dst, strict=True):
        preds[int(d)].append(int(s))
    cas: list[int] = []
    ag: list[int] = []
    hours: list[float] = []
    for c in range(cascades):
        t_ad = np.full(n, np.inf)
        t_ad[rng.integers(n)] = 0.0
        for t in range(1, steps):
            for v in range(n):
                if np.isfinite(t_ad[v]):
                    continue
                exposure = sum(1 for u in preds[v] if t_ad[u] < t)
                if rng.random() < 0.002 + 0.03 * exposure:
                    t_ad[v] = t + 0.5 * rng.random()
        adopters = np.flatnonzero(np.isfinite(t_ad))
        cas += [c] * adopters.size
        ag += [int(a) for a in adopters]
        hours += list(t_ad[adopters])
    return Diffusion(np.array(cas), np.array(ag), np.array(hours), src, dst, n, cascades)


def test_null_adoption_published_cox_shows_saturation_the_time_varying_model_does_not() -> None:
    d = null_diffusion(11)
    sat = analyse(d, permutations=60, seed=3)
    assert isinstance(sat.cox, CoxResult)
    assert isinstance(sat.tv, CoxResult)
    # the artefact: the fixed count "finds" saturation, significantly, though adoption ignores the graph
    assert sat.cox.hazard_ratio < 0.8
    assert sat.cox.ci_high < 1
    assert sat.cox.p < 1e-4
    # the time-varying model does not, and the observed values are ordinary draws of the permutation null
    assert sat.tv.ci_low < 1 < sat.tv.ci_high
    assert sat.tv_null is not None
    assert sat.tv_null.p_value > 0.05
    assert sat.cox_null is not None
    assert sat.cox_null.p_value > 0.05
    assert sat.cox_null.p97_5 < 0  # the null itself sits below HR = 1: the published HR < 1 is mechanical
    assert sat.cox_null.permutations == 60
    assert sat.tv_null.permutations == 60


def test_true_contagion_is_found_by_the_time_varying_model() -> None:
    d = contagion_diffusion(5)
    sat = analyse(d, permutations=20, seed=3)
    assert isinstance(sat.tv, CoxResult)
    assert sat.tv.ci_low > 1.3
    assert sat.tv.p < 1e-6
    assert sat.tv_null is not None
    assert sat.tv_null.p_value == 1.0


def test_exposures_and_risk_rows_of_a_hand_made_cascade() -> None:
    # graph: 0 -> 2, 1 -> 2, 2 -> 3, 1 -> 3, 0 -> 4 (src commented on dst: src is a predecessor of dst)
    # one cascade: 0 adopts at 0 h (seed), 1 at 2 h, 2 at 5 h, an agent outside the graph at 9 h (last);
    # 3 and 4 never adopt
    d = Diffusion(
        cascade=np.array([0, 0, 0, 0]),
        agent=np.array([0, 1, 2, -1]),
        hours=np.array([10.0, 12.0, 15.0, 19.0]),
        src=np.array([0, 1, 2, 1, 0]),
        dst=np.array([2, 2, 3, 3, 4]),
        n_nodes=5,
        n_cascades=1,
    )
    s = structure(d)
    assert adopter_exposure(d, s, d.hours).tolist() == [0.0, 0.0, 2.0, 0.0]
    x, y, w = logit_counts(d, s, d.hours)
    # rows: adopters 0 (x 0), 1 (x 0), 2 (x 2); non-adopters 3 (preds 2, 1: x 2) and 4 (pred 0: x 1)
    assert Counter({(a, b): c for a, b, c in zip(x, y, w, strict=True)}) == Counter(
        {(0.0, 1.0): 2, (2.0, 1.0): 1, (2.0, 0.0): 1, (1.0, 0.0): 1}
    )
    rows = intervals(d, s, d.hours)
    got = sorted(
        zip(rows.start, rows.stop, rows.exposure, rows.event, rows.weight, strict=True),
    )
    # at risk from the seed (t = 0) to the last adoption (t = 9): 1 adopts at 2 with exposure 0 (no
    # predecessor); 2: exposure 1 from 0 (agent 0), 2 from 2 (agent 1), adopts at 5; 3: exposure 0, 1 from
    # 2 (agent 1), 2 from 5 (agent 2), censored at 9; 4: exposure 1 from 0, censored at 9
    assert got == sorted(
        [
            (0.0, 2.0, 0.0, 1.0, 1.0),
            (0.0, 2.0, 1.0, 0.0, 1.0),
            (2.0, 5.0, 2.0, 1.0, 1.0),
            (0.0, 2.0, 0.0, 0.0, 1.0),
            (2.0, 5.0, 1.0, 0.0, 1.0),
            (5.0, 9.0, 2.0, 0.0, 1.0),
            (0.0, 9.0, 1.0, 0.0, 1.0),
        ]
    )


def test_untouched_agents_enter_as_one_weighted_row_per_cascade() -> None:
    d = null_diffusion(2, n=120, cascades=5)
    s = structure(d)
    rows = intervals(d, s, d.hours)
    for c in range(d.n_cascades):
        here = rows.cascade == c
        first_rows = here & (rows.start == 0)
        # every graph agent not adopting at t = 0 starts exactly once (weights counted)
        at_zero = int(np.sum((d.cascade == c) & (d.agent >= 0) & (d.hours == d.hours[d.cascade == c].min())))
        assert rows.weight[first_rows].sum() == d.n_nodes - at_zero
        assert rows.event[here].sum() == np.sum((d.cascade == c) & (d.agent >= 0)) - at_zero


def test_shuffles_permute_times_within_each_cascade() -> None:
    d = null_diffusion(4, cascades=6)
    h = shuffled_hours(d, np.random.default_rng(0))
    assert not np.array_equal(h, d.hours)
    for c in range(d.n_cascades):
        assert sorted(h[d.cascade == c]) == sorted(d.hours[d.cascade == c])


def test_fast_cox_matches_lifelines() -> None:
    from lifelines import CoxPHFitter, CoxTimeVaryingFitter

    d = null_diffusion(7, n=150, cascades=12)
    s = structure(d)
    rows = intervals(d, s, shuffled_hours(d, np.random.default_rng(1)))
    mine = fast_cox(
        rows.exposure, rows.stop, rows.event, start=rows.start, strata=rows.cascade, weight=rows.weight
    )
    df = pd.DataFrame(
        {
            "c": rows.cascade,
            "start": rows.start,
            "stop": rows.stop,
            "x": rows.exposure,
            "e": rows.event,
            "w": rows.weight,
        }
    )
    ref = CoxTimeVaryingFitter().fit(
        df, event_col="e", start_col="start", stop_col="stop", weights_col="w", strata=["c"]
    )
    assert mine is not None
    assert mine.coef == pytest.approx(float(ref.params_["x"]), rel=1e-6, abs=1e-9)
    assert mine.se == pytest.approx(float(ref.standard_errors_["x"]), rel=1e-5)

    rng = np.random.default_rng(3)
    x = rng.integers(0, 6, 400).astype(float)
    t = rng.exponential(1 / np.exp(0.3 * x))
    e = (rng.random(400) < 0.8).astype(float)
    mine = fast_cox(x, t, e)
    ref2 = CoxPHFitter().fit(pd.DataFrame({"t": t, "e": e, "x": x}), "t", "e")
    assert mine is not None
    assert mine.coef == pytest.approx(float(ref2.params_["x"]), rel=1e-6)
    assert mine.se == pytest.approx(float(ref2.standard_errors_["x"]), rel=1e-5)
    # rows entered at 0 (no entry part: fast_cox skips it) in strata, with weights
    c = rng.integers(0, 4, 400)
    w = rng.integers(1, 4, 400).astype(float)
    mine = fast_cox(x, t, e, strata=c, weight=w)
    same = fast_cox(x, t, e, start=np.zeros(400), strata=c, weight=w)
    ref3 = CoxPHFitter().fit(
        pd.DataFrame({"t": t, "e": e, "x": x, "c": c, "w": w}), "t", "e", weights_col="w", strata=["c"]
    )
    assert mine is not None
    assert same == mine
    assert mine.coef == pytest.approx(float(ref3.params_["x"]), rel=1e-6)
    assert mine.se == pytest.approx(float(ref3.standard_errors_["x"]), rel=1e-5)
    assert fast_cox(np.ones(5), np.arange(5.0), np.ones(5)) is None


def test_null_summary_counts_the_lower_tail() -> None:
    got = null_summary(-1.0, [-2.0, -1.0, 0.0, 1.0, math.nan])
    assert got is not None
    assert got.p_value == (1 + 2) / (1 + 4)
    assert got.mean == pytest.approx(-0.5)
    assert got.permutations == 4
    assert null_summary(0.0, []) is None


def test_a_diverging_cox_fit_is_refused_not_overflowed(monkeypatch: pytest.MonkeyPatch) -> None:
    """A coefficient below the limit whose CI bound is beyond it (exp() overflows) is a diverging fit."""
    from molt_society.report import saturation

    monkeypatch.setattr(saturation, "efron_cox", lambda x, t: saturation.FastCox(650.0, 40.0, 3))
    d = null_diffusion(7, n=150, cascades=12)
    res = saturation.published_cox(d, structure(d), d.hours)
    assert isinstance(res, str)
    assert "converge" in res


@pytest.mark.parametrize("decimals", [None, 0], ids=["distinct-times", "heavy-ties"])
def test_the_published_cox_model_is_lifelines_coxph_fit(decimals: int | None) -> None:
    """``published_cox`` (``efron_cox``) against lifelines' ``CoxPHFitter`` on the same rows: coefficient,
    CI, p-value and concordance, with distinct times and with times rounded to whole hours (Efron ties)."""
    from lifelines import CoxPHFitter

    from molt_society.report.saturation import adopter_exposure, published_cox, since_seed

    d = null_diffusion(7, n=150, cascades=12)
    if decimals is not None:
        d = Diffusion(d.cascade, d.agent, np.round(d.hours, decimals), d.src, d.dst, d.n_nodes, d.n_cascades)
    s = structure(d)
    expo = adopter_exposure(d, s, d.hours)[s.graph_rows]
    dur = since_seed(d.hours[s.graph_rows], s.seed[d.cascade[s.graph_rows]])
    keep = dur > 0
    if decimals is not None:
        assert np.unique(dur[keep]).size < keep.sum() / 2  # the ties are there
    ref = CoxPHFitter().fit(
        pd.DataFrame({"duration": dur[keep], "event": 1, "exposure": expo[keep]}), "duration", "event"
    )
    got = published_cox(d, s, d.hours)
    assert isinstance(got, CoxResult)
    row = ref.summary.loc["exposure"]
    assert got.log_hr == pytest.approx(float(row["coef"]), rel=1e-6)
    assert math.log(got.ci_low) == pytest.approx(float(row["coef lower 95%"]), rel=1e-6)
    assert math.log(got.ci_high) == pytest.approx(float(row["coef upper 95%"]), rel=1e-6)
    assert got.p == pytest.approx(float(row["p"]), rel=1e-4, abs=1e-300)
    assert got.concordance == pytest.approx(float(ref.concordance_index_), abs=1e-9)
    assert got.rows == got.events == int(keep.sum())


def activity_diffusion(seed: int, n: int = 150, cascades: int = 40, horizon: float = 48.0) -> Diffusion:
    """No contagion, heterogeneous activity: agent i posts at its own rate and adopts a phrase at its first
    post using it (hours ~ Exponential(rate_i)); edges are drawn in proportion to both ends' activity."""
    rng = np.random.default_rng(seed)
    act = rng.lognormal(0.0, 1.2, n)
    p = act / act.sum()
    src, dst = rng.choice(n, 4 * n, p=p), rng.choice(n, 4 * n, p=p)
    keep = src != dst
    e = np.unique(np.column_stack([src[keep], dst[keep]]), axis=0)
    cas: list[int] = []
    ag: list[int] = []
    hours: list[float] = []
    for c in range(cascades):
        start = rng.uniform(0, 96)
        t = rng.exponential(1 / (act * 0.02))
        who = np.flatnonzero(t < horizon)
        cas += [c] * who.size
        ag += [int(a) for a in who]
        hours += list(start + t[who])
    return Diffusion(
        np.array(cas),
        np.array(ag),
        np.array(hours),
        e[:, 0].astype(np.int64),
        e[:, 1].astype(np.int64),
        n,
        cascades,
    )


def test_activity_without_contagion_passes_the_time_null_but_not_the_rewired_null() -> None:
    """Six societies without contagion: the time shuffle calls every one's square term saturating (p at
    its resolution); against the rewired null at most one in six falls below 0.05 (chance alone gives
    0.05 per society), and the time-varying model never does."""
    flagged = 0
    for seed in range(1, 7):
        d = activity_diffusion(seed)
        sat = analyse(d, permutations=50, seed=3, rewired_draws=50)
        rw = sat.rewired
        assert sat.logit_null is not None
        assert rw.logit is not None
        assert rw.tv is not None
        assert sat.logit_null.p_value == pytest.approx(1 / 51)
        flagged += rw.logit.p_value < 0.05
        assert rw.tv.p_value > 0.05
        assert rw.draws == 50
        assert rw.logit.permutations == 50
        assert rw.cascades == d.n_cascades  # small enough to need no sample
    assert flagged <= 1


def test_true_contagion_lies_beyond_the_rewired_null() -> None:
    d = contagion_diffusion(5)
    rw = analyse(d, permutations=5, seed=3, rewired_draws=40).rewired
    assert rw.tv is not None
    assert rw.tv.observed > rw.tv.p97_5  # more than the same activity on another graph gets
    assert rw.tv.p_value == 1.0


def test_rewiring_keeps_every_adoption_and_every_agents_degrees() -> None:
    d = activity_diffusion(2)
    r, dropped = rewired(d, np.random.default_rng(7))
    assert r.agent is d.agent
    assert r.cascade is d.cascade
    assert r.hours is d.hours
    edges = set(zip(r.src.tolist(), r.dst.tolist(), strict=True))
    assert len(edges) == r.src.size == d.src.size - dropped  # distinct, no edge lost but the dropped
    assert all(a != b for a, b in edges)
    assert edges != set(zip(d.src.tolist(), d.dst.tolist(), strict=True))
    out_before = np.bincount(d.src, minlength=d.n_nodes)
    in_before = np.bincount(d.dst, minlength=d.n_nodes)
    # each dropped edge costs one agent one out- and one in-degree: the degrees are kept up to them
    assert np.abs(np.bincount(r.src, minlength=d.n_nodes) - out_before).sum() == dropped
    assert np.abs(np.bincount(r.dst, minlength=d.n_nodes) - in_before).sum() == dropped
    assert dropped < 0.05 * d.src.size


def test_a_graph_beyond_the_edge_budget_gets_fewer_rewired_draws(monkeypatch: pytest.MonkeyPatch) -> None:
    """draws = edge budget // edges, between MIN_REWIRED_NULLS and the draws asked for; the null says it."""
    from molt_society.report import saturation

    d = contagion_diffusion(5)
    edges = int(d.src.size)
    monkeypatch.setattr(saturation, "MIN_REWIRED_NULLS", 7)
    monkeypatch.setattr(saturation, "REWIRED_EDGE_DRAWS", edges * 12 + edges // 2)
    assert analyse(d, permutations=3, seed=3, rewired_draws=40).rewired.draws == 12
    assert analyse(d, permutations=3, seed=3, rewired_draws=9).rewired.draws == 9
    monkeypatch.setattr(saturation, "REWIRED_EDGE_DRAWS", edges)
    rw = analyse(d, permutations=3, seed=3, rewired_draws=40).rewired
    assert rw.draws == 7
    assert rw.tv is not None
    assert rw.tv.permutations == 7
