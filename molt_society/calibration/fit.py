"""Fit the MoltBook model to a dump by the method of simulated moments.

What the dump gives directly (``calibration.dump``) is taken as it is. The rest is estimated in two
stages, each a Nelder-Mead search (scipy) on the sum of squared band distances (``calibration.moments``)
between the dump's moments and a simulation's, with common random numbers (one seed throughout):

1. activity: the population, the post and comment rates per agent and hour, their spread over agents and
   their correlation, the share of heartbeat agents and their period, the newcomers' growth and the
   share present at the start, against posts and comments per author, their concentration, posting
   rhythm, the daily cycle and growth (``calibration.simulated.activity_moments``: no feed needed, a
   fraction of a second each);
2. attention and threads: the share of picks from "new", the rank exponent, the reply and chain
   probabilities, the sub-tick lead, the share of comments on an agent's posts it answers and the chance
   an agent's further comments in a tick stay in one thread, against
   thread sizes, commenters per post, depth, reciprocity, timing and PageRank concentration (the whole
   society offline, at ``scale`` times the population).

Every parameter is per agent and per hour of simulated time, so the fitted behaviour runs at any
population, tick length and seed; the benchmark (``bench/fit.py``) checks how far the moments move.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import structlog
from scipy.optimize import minimize

from molt_society.agents.behaviour import Behaviour, Population, Submolts, Targets, load_behaviour
from molt_society.calibration.dump import Dump
from molt_society.calibration.moments import distance
from molt_society.calibration.simulated import Figures, activity_moments, society_moments
from molt_society.runtime.settings import FEED_SIZE_MAX

log = structlog.get_logger(__name__)

ACTIVITY_KEYS = (
    "posts_per_author_gini",
    "posts_per_author_mean",
    "post_gap_cov_median",
    "regular_poster_share",
    "hourly_cv",
    "second_half_share",
    "agents_new_first_half",
    "top1pct_comment_share",
)
THREAD_KEYS = (
    "top_level_share",
    "depth_2_share",
    "depth_3_plus_share",
    "comments_per_commented_post_median",
    "comments_per_commented_post_mean",
    "commenters_per_commented_post_mean",
    "commenters_top_decile_mean",
    "reciprocity",
    "first_comment_median_s",
    "comment_delay_median_s",
    "pagerank_top1_daily",
    "top1pct_comment_share",  # fitted by the activity stage; kept there by this one
)
TOTALS_BAND = 0.1
"""Relative band of the totals (posts, comments, active agents) in the activity stage's objective."""

Progress = Callable[[str], None]


@dataclass
class FitResult:
    behaviour: Behaviour
    real: Figures
    simulated: Figures
    totals_real: dict[str, int]
    totals_simulated: dict[str, int]
    seconds: float
    evaluations: dict[str, int] = field(default_factory=dict)


def _logit(p: float) -> float:
    p = min(max(p, 1e-4), 1 - 1e-4)
    return math.log(p / (1 - p))


def _expit(x: float) -> float:
    return 1 / (1 + math.exp(-x))


def base_behaviour(dump: Dump, *, tick_seconds: float) -> Behaviour:
    """The starting point: the dump's direct estimates, defaults for the rest."""
    d = load_behaviour()
    hours = dump.hours
    per_agent_hour = 1 / (dump.agents * hours)
    pop = Population(
        agents=dump.agents,
        hours=hours,
        start=dump.start.isoformat(),
        tick_seconds=tick_seconds,
        post_per_hour=dump.posts * per_agent_hour * 3,
        post_sigma=0.8,
        comment_per_hour=dump.comments * per_agent_hour * 3,
        comment_sigma=2.0,
        vote_per_comment=min(dump.votes_per_comment, 5.0),
        heartbeat_share=0.2,
        heartbeat_hours=4.0,
        heartbeat_skip=0.1,
        initial_share=0.02,
        growth_per_day=max(-4.9, min(9.9, dump.growth_per_day)),
        hourly=dump.hourly,
        new_share=0.7,
        feed_size=max(15, min(FEED_SIZE_MAX, math.ceil(2 * dump.peak_posts_per_hour * tick_seconds / 3600))),
        return_share=0.05,
        repeat_share=0.2,
        rate_correlation=0.5,
        post_lead_seconds=20.0,
        first_delay_seconds=20.0,
    )
    names = [n for n, _ in dump.submolts]
    return d.model_copy(
        update={
            "population": pop,
            "submolts": Submolts(
                names=names,
                zipf_exponent=d.submolts.zipf_exponent,
                weights=[round(w, 6) for _, w in dump.submolts],
                subscriptions_min=1,
                subscriptions_max=min(4, len(names)),
            ),
            "targets": d.targets.model_copy(
                update={
                    "upvote_prob": round(dump.upvote_share, 4),
                    "rank_exponent": 0.5,
                    "reply_prob": max(0.01, min(0.9, 1.3 * (1 - (dump.moments["top_level_share"] or 0.94)))),
                }
            ),
        }
    )


def _with(
    b: Behaviour, pop: dict[str, Any] | None = None, targets: dict[str, Any] | None = None
) -> Behaviour:
    assert b.population is not None
    new_pop = b.population.model_copy(update=pop or {})
    new_t: Targets = b.targets.model_copy(update=targets or {})
    return b.model_copy(update={"population": new_pop, "targets": new_t})


def _objective(real: Figures, sim: Figures, keys: tuple[str, ...]) -> float:
    total = 0.0
    for k in keys:
        d = distance(k, sim.get(k), real.get(k))
        total += 25.0 if d is None else min(d, 5.0) ** 2
    return total


def _totals_penalty(real: dict[str, int], sim: dict[str, int]) -> float:
    return sum(((sim[k] / max(real[k], 1) - 1) / TOTALS_BAND) ** 2 for k in real)


def fit_activity(
    b: Behaviour, dump: Dump, *, seed: int, max_evals: int, say: Progress
) -> tuple[Behaviour, int]:
    """Stage 1 (see module docstring)."""
    pop = b.population
    assert pop is not None
    real_totals = {"posts": dump.posts, "comments": dump.comments, "agents": dump.agents}
    x0 = np.array(
        [
            math.log(pop.post_per_hour), pop.post_sigma, math.log(pop.comment_per_hour), pop.comment_sigma,
            _logit(pop.heartbeat_share), pop.growth_per_day, _logit(pop.initial_share), 0.0,
            math.log(pop.heartbeat_hours), pop.rate_correlation,
        ]
    )  # fmt: skip
    evals = 0

    def decode(x: np.ndarray) -> tuple[Behaviour, int]:
        b2 = _with(
            b,
            {
                "post_per_hour": math.exp(x[0]),
                "post_sigma": float(np.clip(x[1], 0, 6)),
                "comment_per_hour": math.exp(x[2]),
                "comment_sigma": float(np.clip(x[3], 0, 6)),
                "heartbeat_share": _expit(x[4]),
                "growth_per_day": float(np.clip(x[5], -4.9, 9.9)),
                "initial_share": _expit(x[6]),
                "heartbeat_hours": float(math.exp(np.clip(x[8], -1, 5))),
                "rate_correlation": float(np.clip(x[9], -0.95, 0.95)),
            },
        )
        return b2, max(10, round(dump.agents * math.exp(float(np.clip(x[7], -1, 2)))))

    def f(x: np.ndarray) -> float:
        nonlocal evals
        evals += 1
        b2, n = decode(x)
        sim, totals = activity_moments(b2, seed=seed, agents=n)
        loss = _objective(dump.moments, sim, ACTIVITY_KEYS) + _totals_penalty(real_totals, totals)
        if evals % 20 == 0:
            say(f"activity: evaluation {evals}/{max_evals}, loss {loss:.2f}")
        return loss

    for _ in range(3):  # start with the totals right: they scale with the rates
        b2, n = decode(x0)
        _sim, totals = activity_moments(b2, seed=seed, agents=n)
        x0[0] += math.log(real_totals["posts"] / max(totals["posts"], 1))
        x0[2] += math.log(real_totals["comments"] / max(totals["comments"], 1))
        x0[7] += math.log(real_totals["agents"] / max(totals["agents"], 1))
    steps = (0.5, 0.4, 0.5, 0.4, 1.5, 1.5, 1.5, 0.3, 0.7, 0.3)
    simplex = np.array([x0] + [x0 + np.eye(len(x0))[i] * s for i, s in enumerate(steps)])
    res = minimize(
        f, x0, method="Nelder-Mead",
        options={"maxfev": max_evals, "initial_simplex": simplex, "xatol": 1e-3, "fatol": 1e-3},
    )  # fmt: skip
    b2, n = decode(res.x)
    assert b2.population is not None
    return b2.model_copy(update={"population": b2.population.model_copy(update={"agents": n})}), evals


def fit_threads(
    b: Behaviour, dump: Dump, *, seed: int, scale: float, max_evals: int, say: Progress
) -> tuple[Behaviour, int]:
    """Stage 2 (see module docstring)."""
    pop = b.population
    assert pop is not None
    agents = max(50, round(pop.agents * scale))
    t = b.targets
    x0 = np.array(
        [
            _logit(pop.new_share), t.rank_exponent, _logit(t.reply_prob), _logit(t.chain_prob),
            math.log(pop.post_lead_seconds), _logit(pop.return_share), _logit(pop.repeat_share),
        ]
    )  # fmt: skip
    evals = 0

    def decode(x: np.ndarray) -> Behaviour:
        lead = float(math.exp(np.clip(x[4], -3, math.log(pop.tick_seconds))))
        return _with(
            b,
            {
                "new_share": _expit(x[0]),
                "post_lead_seconds": lead,
                "first_delay_seconds": lead,
                "return_share": _expit(x[5]),
                "repeat_share": _expit(x[6]),
            },
            {
                "rank_exponent": float(np.clip(x[1], 0, 6)),
                "reply_prob": _expit(x[2]),
                "chain_prob": _expit(x[3]),
            },
        )

    def f(x: np.ndarray) -> float:
        nonlocal evals
        evals += 1
        sim, _totals = society_moments(decode(x), seed=seed, agents=agents)
        loss = _objective(dump.moments, sim, THREAD_KEYS)
        say(f"threads: evaluation {evals}/{max_evals}, loss {loss:.2f}")
        return loss

    steps = (0.8, 0.3, 0.8, 0.8, 0.8, 1.5, 1.5)
    simplex = [x0] + [x0 + np.eye(len(x0))[i] * s for i, s in enumerate(steps)]
    res = minimize(
        f, x0, method="Nelder-Mead",
        options={"maxfev": max_evals, "initial_simplex": np.array(simplex), "xatol": 1e-2, "fatol": 1e-2},
    )  # fmt: skip
    return decode(res.x), evals


def fit(
    dump: Dump,
    *,
    seed: int = 1,
    tick_seconds: float = 300.0,
    scale: float = 1.0,
    activity_evals: int = 200,
    thread_evals: int = 32,
    progress: Progress | None = None,
) -> FitResult:
    """Fit the model to ``dump``; the result's ``simulated`` moments are of a full-size run of the fit."""
    say = progress or (lambda _m: None)
    started = time.perf_counter()
    b = base_behaviour(dump, tick_seconds=tick_seconds)
    say("activity: fitting rates, rhythm and growth")
    b, n1 = fit_activity(b, dump, seed=seed, max_evals=activity_evals, say=say)
    say("threads: fitting attention and replies")
    b, n2 = fit_threads(b, dump, seed=seed, scale=scale, max_evals=thread_evals, say=say)
    assert b.population is not None
    say("checking the fitted society at full size")
    sim, totals = society_moments(b, seed=seed, agents=b.population.agents)
    log.info("fit_done", seconds=round(time.perf_counter() - started, 1), activity_evals=n1, thread_evals=n2)
    return FitResult(
        behaviour=b,
        real=dump.moments,
        simulated=sim,
        totals_real={"posts": dump.posts, "comments": dump.comments, "agents": dump.agents},
        totals_simulated=totals,
        seconds=time.perf_counter() - started,
        evaluations={"activity": n1, "threads": n2},
    )
