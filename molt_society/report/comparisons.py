"""Published comparisons: per published figure, its verdict, its multiverse range with CIs, and its null.

Built from the finished report's scalars (every number is computed by its own section; nothing here reads
the warehouse), so a tool reading the JSON and a reader of the page see the same verdicts. For every
scalar that carries a published value (``report.published``), one ``Comparison``:

* the **study's reading**: the scalar itself, computed as the study computed it, with its 95% CI: the
  section's ``<key>_ci_low``/``_ci_high`` when it has them, else Wilson's interval when the figure is a
  share of a known number of units (``Spec.n_key``);
* the **multiverse**: the same quantity under the other definitions the sections compute, found by key
  (``<section>.variant_<name>.<quantity>``, e.g. ``roles.variant_graph_only.k``) or named in ``SPECS``;
  the range of all readings is shown next to the published value;
* the **null**: the value a society without the mechanism gets from the same method, where a section
  computes one (``Spec.null``);
* the **verdict** (``report.verdicts.judge``) and the null's flag, with the sentence that explains each.

``SPECS`` says, per published figure, what the generic rules cannot know: the published CI, the value of
no effect, the null, and when a comparison cannot mean anything here ("not comparable", with why).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field

from molt_society.report.model import Comparison, ComparisonReading, Scalar, Section, Table
from molt_society.report.published import PUBLISHED
from molt_society.report.verdicts import Interval, Reading, judge, null_flag, spread, wilson

Scalars = dict[str, Scalar]
Rule = Callable[[Scalars], str | None]

ROLES_K_RANGE = (3, 8)  # report.roles.K_RANGE, the public code's kmeans_k_range


def _population(s: Scalars) -> str:
    agents = s.get("roles.active_agents")
    who = f"{int(agents.value):,} active agents" if agents and agents.value is not None else "this society"
    return (
        "a count grows with the population and the period: the study's 90,704 active agents over three "
        f"weeks, {who} here"
    )


def _roles_k(s: Scalars) -> str | None:
    k = s.get("roles.k")
    if k is None or k.value is None:
        return None
    if int(k.value) in ROLES_K_RANGE:
        return (
            f"the best k = {int(k.value)} is an end of the searched range "
            f"{ROLES_K_RANGE[0]}-{ROLES_K_RANGE[1]}: the number of roles follows the search range, "
            "not the data"
        )
    return None


def _propagation(s: Scalars) -> str:
    return (
        _population(s)
        + "; and the paper does not define '10,323 propagation events': read as cascades (the published "
        "+/- 0.02 on alpha = 2.57 is (alpha - 1) / sqrt(n) for n = 10,323: 0.015) or as adoptions after a "
        "cascade's first (the events of the public code's Cox model); both readings are shown"
    )


@dataclass(frozen=True)
class Spec:
    figure: str
    published_ci: Interval | None = None
    reference: float | None = None  # the value of no effect ("same direction" is judged against it)
    n_key: str | None = None  # a share of this many units: Wilson's CI
    variants: tuple[str, ...] = ()  # further reading keys (their CIs at <key>_ci_low/_ci_high)
    null: str | None = None  # the null society's reading key
    not_comparable: Rule | None = None
    labels: dict[str, str] = field(default_factory=dict)  # reading key -> label, where the scalar's is long
    ci_of: dict[str, str] = field(default_factory=dict)  # reading key -> the prefix of its _ci_low/_ci_high
    study_key: str | None = None  # the study's own method, where it is not the published key's scalar


SPECS: dict[str, Spec] = {
    "cascades.alpha": Spec(
        "cascade-size power-law alpha (Molt Dynamics: 2.57 +/- 0.02)",
        published_ci=(2.55, 2.59),
        # the study's own method: its authors' code end to end (cascades and estimator)
        study_key="cascades.variant_public_code.alpha_hill",
        variants=("cascades.variant_public_code.alpha",),
        labels={
            "cascades.alpha": "ours: 3-5-grams, >= 10 adopters; Clauset discrete fit",
            "cascades.variant_hill.alpha": "ours, the public code's estimator (Hill, x_min = smallest)",
            "cascades.variant_public_code.alpha_hill": "the public code: 2-5-grams, >= 5 adopters; Hill",
            "cascades.variant_public_code.alpha": "the public code's cascades; Clauset discrete fit",
            "cascades.variant_network.alpha": "ours, network-following adoptions only; Clauset fit",
        },
    ),
    "cascades.propagation_events": Spec(
        "10,323 propagation events (Molt Dynamics)",
        variants=("cascades.count", "cascades.variant_public_code.count", "cascades.variant_network.count"),
        not_comparable=_propagation,
    ),
    "saturation.cox_hazard_ratio": Spec(
        "Cox hazard ratio of exposure, 0.53 (Molt Dynamics): saturation",
        reference=1.0,
        variants=("saturation.variant_tv_hazard_ratio",),
        # the null that keeps each agent's activity (the graph rewired, degrees kept): the time shuffle's
        # (saturation.null_cox_hazard_ratio) loses the link between activity and exposure
        null="saturation.null_rewired_cox_hazard_ratio",
        ci_of={
            "saturation.cox_hazard_ratio": "saturation.cox",
            "saturation.variant_tv_hazard_ratio": "saturation.variant_tv",
        },
    ),
    "saturation.cox_concordance": Spec("Cox concordance 0.78 (Molt Dynamics)", reference=0.5),
    "cooperation.events": Spec("164 cooperation events (Molt Dynamics)", not_comparable=_population),
    "cooperation.success_rate": Spec(
        "cooperation success 6.7% (Molt Dynamics)", n_key="cooperation.scored_events"
    ),
    "cooperation.cohens_d": Spec(
        "Cohen's d -0.88 against a single-agent baseline (Molt Dynamics)",
        reference=0.0,
        variants=(
            "cooperation.variant_single_agent_all.cohens_d",
            "cooperation.variant_public_code.cohens_d",
            "cooperation.variant_thread.cohens_d",
        ),
        labels={
            "cooperation.cohens_d": "the paper's text: vs a matched single-agent baseline (matching ours)",
            "cooperation.variant_single_agent_all.cohens_d": "against every single-agent attempt, unmatched",
            "cooperation.variant_public_code.cohens_d": "the public code: one-sample, vs the constant 0.5",
            "cooperation.variant_thread.cohens_d": "ours earlier: whole-thread quality vs technical posts",
        },
    ),
    "roles.k": Spec("6 structural roles (Molt Dynamics)", not_comparable=_roles_k, null="roles.null_k"),
    "roles.silhouette": Spec("silhouette 0.91 (Molt Dynamics)", null="roles.null_silhouette"),
    "roles.peripheral_share": Spec(
        "93.5% in the peripheral role (Molt Dynamics)",
        n_key="roles.active_agents",
        null="roles.null_peripheral_share",
    ),
    "individual.feedback_net_progress": Spec(
        "feedback adaptation near 0 (socialization study)", reference=0.0
    ),
    "individual.interaction_impact": Spec("interaction impact near 0 (socialization study)", reference=0.0),
    "superminds.depth_8plus": Spec(
        "mean thread depth 1.5 of posts with 8+ upvotes (Superminds, Figure 5)",
        null="superminds.null_depth_8plus",
        labels={"superminds.depth_8plus": "the paper's text: deepest comment, all posts with 8+ upvotes"},
    ),
    "superminds.repliers_8plus": Spec(
        "9.8 unique repliers of posts with 8+ upvotes (Superminds, Figure 5)",
        null="superminds.null_repliers_8plus",
        labels={"superminds.repliers_8plus": "the paper's text: distinct commenters, posts with 8+ upvotes"},
    ),
    "rhythm.autonomous_share": Spec(
        "26.5% 'autonomous' authors, inter-post CoV < 0.5 (The Moltbook Illusion)",
        n_key="rhythm.agents",
        null="rhythm.null_autonomous_share",
    ),
    "rhythm.cv_median": Spec(
        "median inter-post CoV 0.86 (The Moltbook Illusion)", null="rhythm.null_cv_median"
    ),
    "collective.top1_share_trend": Spec(
        "daily top-1 PageRank share 'drops rapidly' (socialization study): Kendall's tau < 0",
        published_ci=(-1.0, -1e-12),
        reference=0.0,
        null="collective.null_top1_share_trend",
    ),
}
SHARE_UNITS = {"threads.share_": "threads.comments", "rhythm.": "rhythm.agents", "reference.share_": None}
# the socialization study's claim has a sign, not a value: -1 stands for "falls" (tau's lower end)
CLAIMS: dict[str, tuple[float, str]] = {
    "collective.top1_share_trend": (
        -1.0,
        "socialization study (arXiv 2602.14299): 'drops rapidly' (sign only)",
    )
}


def _ci(s: Scalars, key: str) -> Interval | None:
    lo, hi = s.get(f"{key}_ci_low"), s.get(f"{key}_ci_high")
    if lo is None or hi is None or lo.value is None or hi.value is None:
        return None
    return (float(lo.value), float(hi.value))


def _reading(s: Scalars, key: str, spec: Spec, n_key: str | None) -> Reading | None:
    sc = s.get(key)
    if sc is None:
        return None
    value = float(sc.value) if sc.value is not None and math.isfinite(float(sc.value)) else None
    ci = _ci(s, spec.ci_of.get(key, key))
    n = s.get(n_key) if n_key else None
    if ci is None and value is not None and n is not None and n.value:
        ci = wilson(value, int(n.value))
    return Reading(spec.labels.get(key, sc.label), value, ci, sc.reason)


def _variant_keys(s: Scalars, key: str) -> list[str]:
    section, _, quantity = key.partition(".")
    return sorted(
        k
        for k in s
        if k.startswith(f"{section}.variant_") and k.endswith(f".{quantity}") and k.count(".") == 2
    )


def _n_key(key: str, spec: Spec) -> str | None:
    if spec.n_key:
        return spec.n_key
    return next(
        (unit for prefix, unit in SHARE_UNITS.items() if key.startswith(prefix) and "share" in key), None
    )


def compare(s: Scalars) -> list[Comparison]:
    """One comparison per scalar with a published value (and per published claim), in report order."""
    out: list[Comparison] = []
    keys = [k for k, sc in s.items() if sc.published is not None or (k in PUBLISHED and k not in CLAIMS)]
    keys += [k for k in CLAIMS if k in s]
    for key in keys:
        sc = s[key]
        spec = SPECS.get(key, Spec(sc.label))
        if key in CLAIMS:
            published, source = CLAIMS[key]
        elif sc.published is not None:
            published, source = float(sc.published), sc.published_source or ""
        else:  # the section cleared it (synthetic text): the comparison cannot mean anything here
            published, source = PUBLISHED[key]
        n_key = _n_key(key, spec)
        study_key = spec.study_key if spec.study_key in s else key
        study = _reading(s, study_key, spec, n_key)
        keys_more = [key, *_variant_keys(s, key), *spec.variants]
        others = [_reading(s, k, spec, None) for k in dict.fromkeys(keys_more) if k != study_key]
        readings = [r for r in [study, *others] if r is not None]
        # the null is of the same population: a share of it gets the same Wilson interval
        null = _reading(s, spec.null, spec, n_key) if spec.null else None
        why_not = spec.not_comparable(s) if spec.not_comparable else None
        if sc.published is None and key not in CLAIMS:
            why_not = "the society's texts are synthetic: a measure of what texts say means nothing here"
        verdict, why = judge(published, spec.published_ci, study, spec.reference, why_not)
        observed = study.value if study else None
        flag = null_flag(verdict, published, spec.published_ci, null, spec.reference, observed)
        out.append(
            Comparison(
                key=key,
                figure=spec.figure,
                published=published,
                published_ci=spec.published_ci,
                published_source=source,
                study=study,
                readings=readings,
                spread=spread(readings),
                null=null,
                verdict=verdict,
                why=why,
                null_flag=flag,
            )
        )
    return out


def _interval(ci: Interval | None) -> str:
    return f"[{ci[0]:.4g}, {ci[1]:.4g}]" if ci else ""


def _value(r: ComparisonReading | None) -> str:
    if r is None or r.value is None:
        return "-"
    return f"{r.value:.4g} {_interval(r.ci)}".strip()


def section(comparisons: list[Comparison]) -> Section:
    """The comparisons as the report's first section: a table a reader can scan."""
    rows: list[list[float | int | str | None]] = []
    for c in comparisons:
        span = c.spread
        multiverse = (
            f"{span[0]:.4g} - {span[1]:.4g} across {len(c.readings)} definitions"
            if span and len(c.readings) > 1
            else ""
        )
        published = f"{c.published:g} {_interval(c.published_ci)}".strip()
        null = _value(c.null) + (f" ({c.null_flag})" if c.null_flag else "") if c.null else ""
        rows.append([c.figure, c.key, published, _value(c.study), multiverse, null, c.verdict, c.why])
    counts = {
        v: sum(1 for c in comparisons if c.verdict == v)
        for v in ("reproduced", "same direction", "differs", "not comparable")
    }
    summary = ", ".join(f"{n} {v}" for v, n in counts.items())
    table = Table(
        "comparisons.verdicts",
        f"Each published figure: verdict ({summary}), the study's method with its 95% CI, the range across "
        "definitions, the null",
        [
            "published figure",
            "key",
            "published",
            "this society (study's method, 95% CI)",
            "multiverse",
            "null",
            "verdict",
            "why",
        ],
        rows,
        reason=None if rows else "no scalar of this report has a published value",
    )
    return Section(
        "comparisons",
        "Published comparisons: reproduction or artefact",
        "For each figure a study published: whether this society reproduces it under the study's own method "
        "('reproduced': inside the published CI, or the published value inside ours), lies on the same side "
        "of no effect ('same direction'), differs, or cannot be compared (with why); the same quantity under "
        "each definition this report computes (the multiverse); and what a null society gives, where one is "
        "computed ('not distinguishable from the null' when it gets the same verdict).",
        items=[table],
    )
