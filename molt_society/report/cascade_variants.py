"""Cascade-size alpha under each reasonable definition: ours, the authors' public code, the paper's text.

The published alpha = 2.57 +/- 0.02 comes from Molt Dynamics; the paper says little of how cascades were
found, and its public code (YCRG-Labs/molt-dynamics ``src/molt_dynamics/rq2_diffusion.py``) differs from
our reading (``warehouse/molt_dynamics.sql``) in three places:

* **cascades** (``public_code_sizes``): memes are 2- to 5-grams of ``\\b\\w+\\b`` words of the lower-cased
  post and comment *bodies* (titles not read), every n-gram kept (no stopword or length filter), with at
  least 5 distinct adopters; skills are fenced blocks *or inline code* (```` ``` ... ``` ```` or
  `` `...` ``), at least 5 adopters; behaviours are six formatting patterns (emoji runs of 3+, bullet and
  numbered lists, headers, quotes, links), at least 5 adopters. A cascade's size is the number of
  distinct (author, time) texts that use it (``len(set(adoptions))`` in ``test_power_law``), not of
  adopters. Python's Unicode ``\\w`` is read as ``[\\p{L}\\p{N}_]`` (RE2's ``\\w`` is ASCII only).
* **estimator** (``hill_alpha``): the public code's ``alpha = 1 + n / sum(ln(x / x_min))`` with x_min the
  smallest size (a continuous Hill estimator over every cascade), where we fit the discrete law with x_min
  chosen by the KS distance (Clauset et al. 2009, ``algorithms.powerlaw_fit``), as the paper's text says
  ("Clauset methodology" in the code's docstring).

* **network-following cascades** (``network_sizes``, keys ``cascades.variant_network.*``): plain phrase
  counts call every user of a phrase an adopter; a cascade that spreads *through* the network counts only
  the adoptions exposed by an earlier adopter the agent interacted with (a predecessor in the interaction
  graph that used the phrase strictly earlier: the exposure of the published Cox model), plus the
  cascade's first adoption. Its size is 1 + those adoptions; cascades with none (size 1) are no network
  cascade; alpha is fitted on the others. Computed on the cascades the saturation models use (a hash
  sample of whole cascades above their cap, said in the label). Its null (``followed_null``, keys
  ``cascades.variant_network.null_*`` and ``beyond_null_p``): the same count with the interaction graph
  rewired, every agent's degrees kept (``saturation.rewired``), adoptions and times unchanged.

Each (definition, estimator) pair is one reading, with a bootstrap 95% interval (cascades resampled with
replacement, ``report.verdicts.bootstrap``). Keys: ``cascades.alpha_ci_*`` (ours), ``cascades.variant_hill.*``
(our cascades, the code's estimator), ``cascades.variant_public_code.*`` (the code's cascades, with its
estimator ``alpha_hill`` and with the Clauset fit ``alpha``).
"""

from __future__ import annotations

import math
from collections import Counter

import numpy as np

from molt_society.algorithms.powerlaw_fit import fit_discrete_power_law
from molt_society.report.model import Item, Scalar
from molt_society.report.saturation import Diffusion, Structure, adopter_exposure, adopter_pairs, rewired
from molt_society.report.verdicts import Interval, bootstrap
from molt_society.report.warehouse_source import Warehouse, quoted

REPLICATES = 200  # bootstrap replicates per reading (the interval's ends move by ~0.01 between seeds)
PUBLIC = "cascades.variant_public_code"
HILL = "cascades.variant_hill"
NETWORK = "cascades.variant_network"
NULL_DRAWS = 30  # rewirings for the network-following null (p resolution 1/31; 2.4 s a draw on the crawl)
NULL_SEED = 20260315
PER_MILLION = 1_000_000
"""A meme share (``cascades.meme_share``) keeping every n-gram."""


def meme_sample_label(share: int) -> str:
    """What a label adds when the meme cascades come from a hash sample of ``share`` per million n-grams."""
    return "" if share >= PER_MILLION else f" [memes: of a hash sample of {share / 1e4:.2f}% of the n-grams]"


def public_code_sizes(wh: Warehouse, society: str, share: int = PER_MILLION) -> dict[int, int]:
    """Histogram ``{size: cascades}`` of the public code's cascades (memes, skills, behaviours); the memes
    of the n-grams with ``cityHash64(n-gram) % 1000000 < share`` (all at 1,000,000; see
    ``cascades.meme_share``)."""
    q = quoted(society)
    keep = "" if share >= PER_MILLION else f" WHERE cityHash64(item) % {PER_MILLION} < {int(share)}"
    texts = (
        "SELECT actor, occurred_at, content FROM events FINAL "
        f"WHERE society = {q} AND type IN ('post_created', 'comment_created') AND content != ''"
    )
    grams = (
        "SELECT actor, occurred_at, arrayJoin(arrayDistinct(arrayFlatten(arrayMap(n -> arrayMap("
        "i -> arrayStringConcat(arraySlice(words, i, n), ' '), "
        "range(1, toUInt32(greatest(length(words) - n + 2, 1)))), [2, 3, 4, 5])))) AS item "
        "FROM (SELECT actor, occurred_at, extractAll(lowerUTF8(content), '[\\\\p{L}\\\\p{N}_]+') AS words "
        f"FROM ({texts})){keep}"
    )
    code = (
        "SELECT actor, occurred_at, arrayJoin(arrayDistinct("
        "extractAll(content, '```[\\\\s\\\\S]*?```|`[^`]+`'))) AS item "
        f"FROM ({texts})"
    )
    behaviours = (
        "SELECT actor, occurred_at, arrayJoin(arrayFilter(p -> p != '', ["
        "if(match(content, '[\\\\x{1F600}-\\\\x{1F64F}]{3,}'), 'emoji_heavy', ''), "
        "if(match(content, '(?m)^\\\\s*[-*]\\\\s+'), 'bullet_list', ''), "
        "if(match(content, '(?m)^\\\\s*\\\\d+\\\\.\\\\s+'), 'numbered_list', ''), "
        "if(match(content, '(?m)^#+\\\\s+'), 'header_style', ''), "
        "if(match(content, '(?m)^>\\\\s+'), 'quote_style', ''), "
        "if(match(content, '\\\\[.*?\\\\]\\\\(.*?\\\\)'), 'link_heavy', '')])) AS item "
        f"FROM ({texts})"
    )
    parts = [("meme", grams), ("skill", code), ("behaviour", behaviours)]
    union = " UNION ALL ".join(
        f"SELECT '{kind}' AS kind, actor, occurred_at, item FROM ({sql})" for kind, sql in parts
    )
    rows = wh.query(
        "SELECT size, count() FROM (SELECT uniqExact(actor, occurred_at) AS size FROM "
        f"({union}) GROUP BY kind, item HAVING uniqExact(actor) >= 5) GROUP BY size ORDER BY size"
    ).rows
    return {int(size): int(n) for size, n in rows}


def hill_alpha(histogram: dict[int, int]) -> float | None:
    """The public code's estimator: ``1 + n / sum(ln(x / x_min))``, x_min the smallest size; None for
    fewer than 10 cascades (the code's "insufficient_data") or sizes all equal."""
    n = sum(histogram.values())
    if n < 10:
        return None
    xmin = min(histogram)
    logs = sum(c * math.log(x / xmin) for x, c in histogram.items())
    return 1 + n / logs if logs > 0 else None


def clauset_alpha(histogram: dict[int, int]) -> float | None:
    fit = fit_discrete_power_law(histogram)
    return fit.alpha if fit else None


def _reading(key: str, label: str, histogram: dict[int, int], estimator: str, seed: int) -> list[Item]:
    stat = hill_alpha if estimator == "hill" else clauset_alpha
    value = stat(histogram) if histogram else None
    ci: Interval | None = bootstrap(histogram, stat, replicates=REPLICATES, seed=seed) if value else None
    why = None if value is not None else "too few cascades (or sizes all equal) for the estimator"
    ci_why = why or (None if ci else "the bootstrap replicates gave no fit")
    return [
        Scalar(key, label, value, why),
        Scalar(f"{key}_ci_low", f"{label}: bootstrap 95% CI, lower", ci[0] if ci else None, ci_why),
        Scalar(f"{key}_ci_high", f"{label}: bootstrap 95% CI, upper", ci[1] if ci else None, ci_why),
    ]


def items(wh: Warehouse, society: str, ours: dict[int, int], share: int = PER_MILLION) -> list[Item]:
    """Bootstrap CIs of our alpha, and alpha under the public code's estimator and cascades (memes of the
    n-grams kept ``share`` per million, as ours)."""
    out: list[Item] = []
    fit = clauset_alpha(ours) if ours else None
    ci = bootstrap(ours, clauset_alpha, replicates=REPLICATES, seed=1) if fit else None
    why = None if ci else "no power-law fit of our cascades" if fit is None else "the replicates gave no fit"
    out += [
        Scalar("cascades.alpha_ci_low", "alpha: bootstrap 95% CI, lower", ci[0] if ci else None, why),
        Scalar("cascades.alpha_ci_high", "alpha: bootstrap 95% CI, upper", ci[1] if ci else None, why),
    ]
    out += _reading(
        f"{HILL}.alpha",
        "variant: our cascades, the public code's estimator (Hill, x_min = smallest)",
        ours,
        "hill",
        2,
    )
    public = public_code_sizes(wh, society, share)
    label = "variant: the public code's cascades (2-5-grams of bodies, inline code, >= 5 adopters)"
    label += meme_sample_label(share)
    out.append(Scalar(f"{PUBLIC}.count", f"{label}: cascades", sum(public.values()), unit="cascades"))
    out += _reading(
        f"{PUBLIC}.alpha_hill", f"{label}, its estimator (Hill, x_min = smallest)", public, "hill", 3
    )
    out += _reading(f"{PUBLIC}.alpha", f"{label}, Clauset's discrete fit", public, "clauset", 4)
    return out


def network_sizes(d: Diffusion, s: Structure) -> tuple[dict[int, int], int]:
    """Histogram ``{size: cascades}`` of network-following cascade sizes (1 + adoptions exposed by an
    earlier adopting predecessor), sizes >= 2 only, and the number of such adoptions."""
    followed = adopter_exposure(d, s, d.hours) > 0
    sizes = 1 + np.bincount(d.cascade[followed], minlength=d.n_cascades)
    histogram = Counter(int(x) for x in sizes if x >= 2)
    return dict(sorted(histogram.items())), int(followed.sum())


def followed_adoptions(d: Diffusion) -> int:
    """Adoptions exposed by an earlier adopting predecessor (``network_sizes``'s count), from the
    adopter pairs alone (``saturation.adopter_pairs``: no non-adopter indexing)."""
    pair_i, pair_j = adopter_pairs(d)
    earlier = d.hours[pair_i] < d.hours[pair_j]
    return int(np.unique(pair_j[earlier]).size)


def followed_null(d: Diffusion, draws: int = NULL_DRAWS, seed: int = NULL_SEED) -> list[int]:
    """``followed_adoptions`` on ``draws`` rewirings of the graph with every agent's degrees kept
    (``saturation.rewired``; adoptions and times unchanged): how many adoptions would follow the
    network if who interacts with whom were random given how much each agent interacts."""
    rng = np.random.default_rng(seed)
    return [followed_adoptions(rewired(d, rng)[0]) for _ in range(draws)]


def network_items(d: Diffusion, s: Structure, sampled: bool, *, null_draws: int = NULL_DRAWS) -> list[Item]:
    """The network-following reading of the cascade count, propagation events and alpha, and the
    rewired null of the propagation events."""
    histogram, adoptions = network_sizes(d, s)
    label = "variant: network-following cascades (adoptions exposed by an earlier adopter interacted with)"
    if sampled:
        label += " [in the sampled cascades]"
    null = np.asarray(followed_null(d, null_draws), dtype=np.float64)
    lo, mid, hi = (float(v) for v in np.percentile(null, [2.5, 50, 97.5])) if null.size else (None,) * 3
    p = (1 + int(np.sum(null >= adoptions))) / (1 + null.size) if null.size else None
    null_label = f"null (interaction graph rewired with degrees kept, {null.size} seeded draws)"
    why = None if null.size else "no draw of the null (null_draws = 0)"
    return [
        Scalar(f"{NETWORK}.count", f"{label}: cascades", sum(histogram.values()), unit="cascades"),
        Scalar(
            f"{NETWORK}.propagation_events",
            f"{label}: adoptions after the first that followed the network",
            adoptions,
            unit="adoptions",
        ),
        Scalar(f"{NETWORK}.null_propagation_events", f"{null_label}: the same count, median", mid, why),
        Scalar(f"{NETWORK}.null_propagation_events_ci_low", f"{null_label}: 2.5%", lo, why),
        Scalar(f"{NETWORK}.null_propagation_events_ci_high", f"{null_label}: 97.5%", hi, why),
        Scalar(
            f"{NETWORK}.beyond_null_p",
            f"{null_label}: p = share of draws with at least as many network-following adoptions "
            f"(resolution {1 / (1 + null.size):.3g}); small: adoptions follow the actual ties more than "
            "the agents' degrees give (contagion and homophily both do that)",
            p,
            why,
        ),
        *_reading(f"{NETWORK}.alpha", f"{label}, Clauset's discrete fit", histogram, "clauset", 5),
    ]
