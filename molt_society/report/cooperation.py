"""Cooperation events (Molt Dynamics): technical threads worked on by several agents, and their quality.

Published definition (the keys that carry the published 164 events, 6.7% and d = -0.88), as the public
code computes it (YCRG-Labs/molt-dynamics, ``src/molt_dynamics/rq3_collaboration.py``):

- events: ``CollaborationIdentifier.identify_collaborative_events`` (>= 5 comments, >= 3 participants
  counting the post's author, >= 30 minutes from the first to the last time of the thread, a technical
  keyword anywhere in the thread's text); the view ``cooperation_md_events`` (warehouse/superminds.sql)
  writes the rule down and extracts each event's solution as ``_extract_solution`` does (the last comment
  with a backtick, else the last comment);
- quality: ``SolutionAssessor.assess_code_solution`` of that solution text alone (``assess_solution``
  below, the code's regular expressions verbatim): 0.3 has_code + 0.2 has_comments + 0.3 has_tests +
  0.2 syntax_valid (balanced brackets); an empty solution is not scored (``quality_score`` stays None);
- success: quality > 0.5; success rate = successes / scored events (``bootstrap_success_rate``);
- test against 0.5: ``BaselineComparator.compare_quality_distributions``: one-sample t-test of the scored
  qualities against 0.5 (scipy ``ttest_1samp``), the Wilcoxon signed-rank test of quality - 0.5, and
  Cohen's d = (mean - 0.5) / SD (ddof 1); the code refuses fewer than 5 scored events.

The published "6.7% (p = 0.057)" carries no published value here: a t-test of 164 events at d = -0.88
gives p of about 1e-22, and the code's other test (``BaselineComparator.permutation_test``) permutes the
scores and compares their mean with the observed one, which differs only by float rounding, so its p
depends on summation order and cannot be reproduced.

The published d = -0.88 is, in the paper's text, of cooperative outcomes "against a matched single-agent
baseline"; the public code's ``compare_quality_distributions`` computes d against the constant 0.5 instead,
its single-agent baseline (``collect_individual_baselines``) being a placeholder that returns nothing. So
``cooperation.cohens_d`` (beside -0.88) follows the text, with a matching rule of ours, said here:

- single-agent attempts: the view ``cooperation_single_agent`` (technical threads nobody but the post's
  author wrote in; the attempt is the author's last text with a backtick, else its last text, the post's
  body counting as its first), scored with the same assessor; empty attempts are not scored;
- matching: each scored event gets the scored attempt of its own submolt posted nearest in time (ties: the
  earlier, then the smaller post id), with replacement; from any submolt where its own has none (counted);
- d: the public code's two-group Cohen's d (``CollaborationModeler.compute_effect_sizes``: pooled SD,
  ddof 1) of event quality against the matched attempts' quality; 95% CI by resampling the events with
  their matches (1,000 draws).

Readings of the same d (labelled variants, each with its bootstrap CI): against every scored single-agent
attempt, unmatched (``variant_single_agent_all``); the public code's one-sample d against 0.5
(``variant_public_code``); and the earlier computation of this project, quality of the whole thread's text
(views ``cooperation_events`` / ``cooperation_baseline`` in molt_dynamics.sql) against technical posts
that are not events (``variant_thread``).
"""

from __future__ import annotations

import bisect
import math
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
from scipy import stats

from molt_society.report.model import Item, Scalar, Table
from molt_society.report.verdicts import ci_scalars
from molt_society.report.warehouse_source import Warehouse, quoted

FLAGS = ("has_code", "has_comments", "has_tests", "balanced")
SOLUTION_FLAGS = ("has_code", "has_comments", "has_tests", "syntax_valid")
BASELINE = 0.5  # compare_quality_distributions: "random chance would give 0.5 quality score"
MIN_SCORED = 5  # compare_quality_distributions returns 'insufficient_data' below this
DRAWS = 1_000  # bootstrap draws of every d's 95% CI
SEED = 0

_CODE = re.compile(r"```|`[^`]+`")
_COMMENT = re.compile(r"#.*|//.*|/\*.*\*/")
_TESTS = re.compile(r"test|assert|expect")
_BRACKETS = {"(": ")", "[": "]", "{": "}"}


@dataclass(frozen=True)
class SolutionScore:
    """``SolutionAssessor.assess_code_solution`` of one solution text."""

    has_code: bool
    has_comments: bool
    has_tests: bool
    syntax_valid: bool

    @property
    def quality(self) -> float:
        # the code's own sum, in its order (floats: 0.3 + 0.2 is exactly 0.5, so "> 0.5" has no edge)
        return sum(
            [self.has_code * 0.3, self.has_comments * 0.2, self.has_tests * 0.3, self.syntax_valid * 0.2]
        )


def check_syntax(code: str) -> bool:
    """``SolutionAssessor._check_syntax``: (), [] and {} balanced and properly nested."""
    stack: list[str] = []
    for char in code:
        if char in _BRACKETS:
            stack.append(_BRACKETS[char])
        elif char in _BRACKETS.values() and (not stack or stack.pop() != char):
            return False
    return not stack


def assess_solution(code: str) -> SolutionScore:
    """The flags of ``assess_code_solution`` (its regular expressions, on the whole solution text)."""
    return SolutionScore(
        has_code=bool(_CODE.search(code)),
        has_comments=bool(_COMMENT.search(code)),
        has_tests=bool(_TESTS.search(code.lower())),
        syntax_valid=check_syntax(code),
    )


@dataclass(frozen=True)
class Published:
    """The published statistics of a society's events (see module docstring); a reason where undefined."""

    events: int
    scores: list[float]
    flags: list[float | None]
    success_rate: float | str
    mean: float | str
    t_p: float | str
    wilcoxon_p: float | str
    cohens_d: float | str


def published_stats(events: int, solutions: list[SolutionScore]) -> Published:
    """Success rate, mean quality, the t-test and Wilcoxon p-values and Cohen's d against 0.5."""
    scores = [s.quality for s in solutions]
    n = len(scores)
    flags: list[float | None] = [
        float(np.mean([getattr(s, f) for s in solutions])) if n else None for f in SOLUTION_FLAGS
    ]
    none = (
        "no cooperation events (threads with >= 5 comments, >= 3 agents, >= 30 minutes, technical)"
        if not events
        else "no event has a solution text to score (every extracted solution is empty)"
    )
    if not n:
        return Published(events, scores, flags, none, none, none, none, none)
    arr = np.asarray(scores, dtype=float)
    rate = float(np.mean(arr > BASELINE))
    mean = float(arr.mean())
    if n < MIN_SCORED:
        few = f"the public code tests against 0.5 from {MIN_SCORED} scored events on ({n} here)"
        return Published(events, scores, flags, rate, mean, few, few, few)
    sd = float(arr.std(ddof=1))
    if not sd > 1e-12:  # qualities are sums of 0.2 and 0.3: any real spread is far above this
        same = f"every scored event has quality {mean:g}: no spread, the tests against 0.5 are undefined"
        return Published(events, scores, flags, rate, mean, same, same, same)
    t_p = float(stats.ttest_1samp(arr, BASELINE).pvalue)
    diffs = arr - BASELINE
    if np.all(np.abs(diffs) < 1e-12):
        w_p: float | str = "every quality is 0.5: the Wilcoxon test is undefined"
    else:
        w_p = float(stats.wilcoxon(diffs).pvalue)
    return Published(events, scores, flags, rate, mean, t_p, w_p, (mean - BASELINE) / sd)


@dataclass(frozen=True)
class Attempt:
    """One scored solution (an event's, or a single agent's attempt) with what matching needs."""

    post_id: str
    submolt: str
    at: float  # the post's time, seconds since the epoch
    quality: float


def attempts(wh: Warehouse, view: str, society: str) -> tuple[int, list[Attempt], list[SolutionScore]]:
    """The rows of ``view`` (``cooperation_md_events`` or ``cooperation_single_agent``), and those with a
    solution text scored here (text read as data), in post id order."""
    rows = wh.query(
        f"SELECT post_id, submolt, toUnixTimestamp64Micro(posted_at), solution FROM {view} "
        f"WHERE society = {quoted(society)} ORDER BY post_id"
    ).rows
    scored, scores = [], []
    for pid, sub, at_us, text in rows:
        if str(text):
            score = assess_solution(str(text))
            scores.append(score)
            scored.append(Attempt(str(pid), str(sub), int(at_us) / 1e6, score.quality))
    return len(rows), scored, scores


def _events(wh: Warehouse, society: str) -> tuple[Published, list[Attempt]]:
    """The published statistics and the scored events, from one read of ``cooperation_md_events``."""
    n, scored, solutions = attempts(wh, "cooperation_md_events", society)
    return published_stats(n, solutions), scored


def match(events: Sequence[Attempt], singles: Sequence[Attempt]) -> tuple[list[Attempt], int]:
    """Per event, the single-agent attempt of its submolt posted nearest in time (ties: the earlier, then
    the smaller post id), with replacement; from all submolts where its own has none. Also returns how many
    events were matched outside their submolt. Empty when there is no attempt at all."""
    if not singles:
        return [], 0
    everything = sorted(singles, key=lambda a: (a.at, a.post_id))
    pools: dict[str, list[Attempt]] = {}
    for a in everything:
        pools.setdefault(a.submolt, []).append(a)
    times = {sub: [a.at for a in pool] for sub, pool in pools.items()}
    all_times = [a.at for a in everything]
    matched, outside = [], 0
    for e in events:
        pool, at = pools.get(e.submolt), times.get(e.submolt)
        if pool is None or at is None:
            pool, at, outside = everything, all_times, outside + 1
        i = bisect.bisect_left(at, e.at)
        matched.append(min(pool[max(0, i - 1) : i + 1], key=lambda a: (abs(a.at - e.at), a.at, a.post_id)))
    return matched, outside


def two_group_d(a: np.ndarray, b: np.ndarray) -> float | str:
    """The public code's Cohen's d of ``a`` against ``b`` (pooled SD, ddof 1); a reason when undefined."""
    return cohens_d(
        len(a),
        float(a.mean()) if len(a) else 0.0,
        float(a.var(ddof=1)) if len(a) > 1 else 0.0,
        len(b),
        float(b.mean()) if len(b) else 0.0,
        float(b.var(ddof=1)) if len(b) > 1 else 0.0,
    )


def bootstrap_ci(
    groups: Sequence[np.ndarray], statistic: Callable[..., float | str], *, paired: bool = False
) -> tuple[float, float] | None:
    """Percentile 95% interval of ``statistic(*groups)`` over ``DRAWS`` resamples: each group drawn with
    replacement on its own, or (``paired``) the same rows of every group. None when fewer than half the
    draws give a value."""
    if not groups or any(len(g) < 2 for g in groups):
        return None
    rng = np.random.default_rng(SEED)
    got: list[float] = []
    for _ in range(DRAWS):
        if paired:
            rows = rng.integers(0, len(groups[0]), len(groups[0]))
            draw = [g[rows] for g in groups]
        else:
            draw = [g[rng.integers(0, len(g), len(g))] for g in groups]
        value = statistic(*draw)
        if not isinstance(value, str) and math.isfinite(value):
            got.append(value)
    if len(got) < DRAWS / 2:
        return None
    return (float(np.percentile(got, 2.5)), float(np.percentile(got, 97.5)))


def one_sample_d(a: np.ndarray) -> float | str:
    """``compare_quality_distributions``'s d: (mean - 0.5) / SD (ddof 1)."""
    if len(a) < 2:
        return "a one-sample d needs at least 2 scored events"
    sd = float(a.std(ddof=1))
    return (float(a.mean()) - BASELINE) / sd if sd > 1e-12 else "no spread: d undefined"


def _d_items(key: str, label: str, d: float | str, ci: tuple[float, float] | None) -> list[Item]:
    """A d and, where it has a value, its CI scalars (``report.comparisons`` finds them by key)."""
    return [_scalar(key, label, d), *([] if isinstance(d, str) else ci_scalars(key, label, ci))]


def single_agent_items(wh: Warehouse, society: str, events: list[Attempt]) -> list[Item]:
    """Cohen's d of the scored ``events``' solution quality against single-agent attempts: matched (the
    paper's text, beside -0.88) and unmatched (a variant), and the public code's d against 0.5 (a variant)."""
    n_single, singles, _ = attempts(wh, "cooperation_single_agent", society)
    ev = np.asarray([e.quality for e in events], dtype=float)
    matched, outside = match(events, singles)
    base = np.asarray([a.quality for a in matched], dtype=float)
    every = np.asarray([a.quality for a in singles], dtype=float)
    if not len(ev):
        d: float | str = "no scored cooperation event"
    elif not len(singles):
        d = "no scored single-agent attempt (a technical thread nobody but its author wrote in)"
    else:
        d = two_group_d(ev, base)
    all_d = two_group_d(ev, every) if len(ev) and len(every) else d
    label = (
        "Cohen's d of solution quality, cooperation events against a matched single-agent baseline (the "
        "paper's text; matching ours: the same submolt's single-agent attempt posted nearest in time)"
    )
    v = "cooperation.variant_"
    return [
        Scalar("cooperation.single_agent_threads", "Single-agent technical threads", n_single),
        Scalar("cooperation.single_agent_scored", "Single-agent attempts with a text to score", len(singles)),
        Scalar(
            "cooperation.matched_outside_submolt",
            "Events matched to an attempt of another submolt (their own has none)",
            outside if len(ev) and len(singles) else None,
            None if len(ev) and len(singles) else (d if isinstance(d, str) else None),
        ),
        Scalar(
            "cooperation.baseline_mean_quality",
            "Mean quality of the matched single-agent attempts",
            float(base.mean()) if len(base) and len(ev) else None,
            None if len(base) and len(ev) else str(d),
        ),
        *_d_items("cooperation.cohens_d", label, d, bootstrap_ci([ev, base], two_group_d, paired=True)),
        *_d_items(
            v + "single_agent_all.cohens_d",
            "variant: Cohen's d against every single-agent attempt, unmatched",
            all_d,
            bootstrap_ci([ev, every], two_group_d),
        ),
        *_d_items(
            v + "public_code.cohens_d",
            "variant: the public code's Cohen's d against the constant 0.5: (mean - 0.5) / SD",
            one_sample_d(ev) if len(ev) else "no scored cooperation event",
            bootstrap_ci([ev], one_sample_d),
        ),
    ]


# --- variant: quality of the whole thread against unmatched technical posts ----------------------------


@dataclass(frozen=True)
class Summary:
    n: int
    successes: int
    mean: float | None  # of quality; None without rows
    var: float | None  # sample variance of quality; None with fewer than 2 rows
    flags: list[float | None]  # share of rows with each of FLAGS

    @property
    def success_rate(self) -> float | None:
        return self.successes / self.n if self.n else None


def summary(wh: Warehouse, view: str, society: str) -> Summary:
    """Count, successes, mean and sample variance of quality, and the share of each flag in ``view``."""
    flags = ", ".join(f"avg({f})" for f in FLAGS)
    res = wh.query(
        f"SELECT count(), countIf(success), avg(quality), varSamp(quality), {flags} "
        f"FROM {view} WHERE society = {quoted(society)}"
    )
    if not res.rows:
        return Summary(0, 0, None, None, [None for _ in FLAGS])
    row = res.rows[0]
    n = int(row[0])
    vals = [_finite(v) if n else None for v in row[2:]]
    return Summary(n, int(row[1]), vals[0], vals[1] if n >= 2 else None, vals[2:])


def _finite(v: object) -> float | None:
    if v is None:
        return None
    f = float(v)  # type: ignore[arg-type]
    return f if math.isfinite(f) else None


def cohens_d(n1: int, mean1: float, var1: float, n2: int, mean2: float, var2: float) -> float | str:
    """Cohen's d of group 1 against group 2 (pooled sample SD); a reason string when undefined."""
    if n1 < 2 or n2 < 2:
        return f"Cohen's d needs at least 2 values per group ({n1} cooperation events, {n2} baseline posts)"
    pooled = ((n1 - 1) * var1 + (n2 - 1) * var2) / (n1 + n2 - 2)
    # qualities are multiples of 0.1: any real spread is far above 1e-12; below it is float rounding
    if not pooled > 1e-12:
        return "quality is the same value in both groups: no spread, Cohen's d undefined"
    return (mean1 - mean2) / math.sqrt(pooled)


def _scalar(key: str, label: str, value: float | int | str) -> Scalar:
    if isinstance(value, str):
        return Scalar(key, label, None, value)
    return Scalar(key, label, value)


def _published_items(pub: Published) -> list[Item]:
    n = len(pub.scores)
    return [
        Scalar("cooperation.events", "Cooperation events (public Molt Dynamics code)", pub.events),
        Scalar("cooperation.scored_events", "Events with a solution text to score", n),
        _scalar(
            "cooperation.success_rate",
            "Share of scored events whose extracted solution has quality > 0.5",
            pub.success_rate,
        ),
        _scalar("cooperation.mean_quality", "Mean quality of the extracted solutions", pub.mean),
        _scalar(
            "cooperation.p_value",
            "p-value against 0.5: one-sample t-test of solution quality (compare_quality_distributions; "
            "not the test behind the published p = 0.057, which 164 events at d = -0.88 could not give)",
            pub.t_p,
        ),
        _scalar(
            "cooperation.wilcoxon_p",
            "p-value against 0.5: Wilcoxon signed-rank test of quality - 0.5",
            pub.wilcoxon_p,
        ),
        Table(
            "cooperation.solution_flags",
            "Extracted solutions: share of scored events with each quality flag (public Molt Dynamics code)",
            ["scored events", "success rate", "mean quality", *SOLUTION_FLAGS],
            [
                [
                    n,
                    pub.success_rate if not isinstance(pub.success_rate, str) else None,
                    pub.mean if not isinstance(pub.mean, str) else None,
                    *pub.flags,
                ]
            ],
            None if n else (pub.success_rate if isinstance(pub.success_rate, str) else None),
        ),
    ]


def _over_rows(n: int, key: str, label: str, value: float | None, why: str) -> Scalar:
    """A figure computed over ``n`` rows; its reason is ``why`` when there is no row."""
    return Scalar(key, label, value, None if n else why)


def _variant_items(wh: Warehouse, society: str) -> list[Item]:
    ev = summary(wh, "cooperation_events", society)
    base = summary(wh, "cooperation_baseline", society)
    no_events = "no cooperation events (threads with >= 5 comments, >= 3 agents, >= 30 minutes, technical)"
    no_base = "no technical post outside cooperation events"
    if ev.mean is None or base.mean is None:
        d: float | str = no_events if not ev.n else no_base
    else:
        d = cohens_d(ev.n, ev.mean, ev.var or 0.0, base.n, base.mean, base.var or 0.0)
    v = "cooperation.variant_thread."
    return [
        Scalar(v + "events", "variant: cooperation events (keywords at word starts)", ev.n),
        _over_rows(
            ev.n,
            v + "success_rate",
            "variant: share of events whose whole thread has quality > 0.5",
            ev.success_rate,
            no_events,
        ),
        _over_rows(
            ev.n, v + "mean_quality", "variant: mean quality of the whole thread's text", ev.mean, no_events
        ),
        Scalar(v + "baseline_posts", "variant: technical posts that are not events (unmatched)", base.n),
        _over_rows(
            base.n,
            v + "baseline_mean_quality",
            "variant: mean quality of those posts' own text",
            base.mean,
            no_base,
        ),
        _scalar(v + "cohens_d", "variant: Cohen's d, thread quality vs unmatched technical posts", d),
        Table(
            v + "flags",
            "variant: quality flags of whole threads and of unmatched technical posts",
            ["group", "n", "success rate", "mean quality", *FLAGS],
            [
                ["cooperation events (whole thread)", ev.n, ev.success_rate, ev.mean, *ev.flags],
                ["unmatched technical posts", base.n, base.success_rate, base.mean, *base.flags],
            ],
        ),
    ]


def items(wh: Warehouse, society: str) -> list[Item]:
    """The published definition's items, d against single agents, then the labelled whole-thread variant."""
    pub, events = _events(wh, society)
    return [*_published_items(pub), *single_agent_items(wh, society, events), *_variant_items(wh, society)]
