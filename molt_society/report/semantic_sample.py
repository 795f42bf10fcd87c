"""Semantic stability per day on the report's sample of agents (``report.sample``), with bootstrap intervals.

The same measures as the ``semantic_daily`` view and ``social._knn_per_day``, computed here from the
sampled agents' texts (every occurrence of a text counts, texts with more than 1,000 copies in the society
left out, as in the view): with a day's unit vectors and their sum s over its n texts, the mean pairwise
similarity is (|s|^2 - n) / (n (n - 1)); the centroid similarity is the cosine between a day's sum and the
previous calendar day's; the 10-nearest-neighbour similarity is searched among the day's sampled texts
only, so it is lower than among all of a day's texts (fewer candidates), and said so.

The 95% intervals resample the sampled agents with replacement (``DRAWS`` draws, seed 0): a draw's daily
sums are those of its agents, each counted as often as it was drawn; the interval is that of the mean over
days. The neighbour measure has none (each draw would search again).
"""

from __future__ import annotations

import warnings
from collections import defaultdict
from dataclasses import dataclass, field
from datetime import date, timedelta

import numpy as np
import numpy.typing as npt

from molt_society.report.embeddings import vectors_for
from molt_society.report.sample import DRAWS, AgentSample
from molt_society.report.warehouse_source import Warehouse, quoted

F64 = npt.NDArray[np.float64]
DRAW_CHUNK = 100


@dataclass
class SampledDays:
    days: list[str] = field(default_factory=list)
    texts: list[int] = field(default_factory=list)
    pairwise: list[float | None] = field(default_factory=list)
    centroid: list[float | None] = field(default_factory=list)
    matrices: list[npt.NDArray[np.float32]] = field(default_factory=list)  # each day's vectors
    ci: dict[str, tuple[float, float] | None] = field(default_factory=dict)  # "pairwise", "centroid"


def _pairwise(total: F64, n: F64) -> F64:
    with np.errstate(invalid="ignore", divide="ignore"):
        out: F64 = np.where(n >= 2, ((total * total).sum(axis=-1) - n) / (n * (n - 1)), np.nan)
    return out


def _cosine(a: F64, b: F64) -> F64:
    den = np.linalg.norm(a, axis=-1) * np.linalg.norm(b, axis=-1)
    with np.errstate(invalid="ignore", divide="ignore"):
        out: F64 = np.where(den > 0, (a * b).sum(axis=-1) / den, np.nan)
    return out


def heavy_texts(society_sql: str, copies: int) -> str:
    """SQL of the (society, text_hash) pairs of texts with more than ``copies`` copies (left out)."""
    return (
        f"SELECT society, text_hash FROM texts WHERE society = {society_sql} GROUP BY society, text_hash "
        f"HAVING count() > {copies}"
    )


def sampled_days(wh: Warehouse, society: str, sample: AgentSample, heavy_copies: int) -> SampledDays:
    q = quoted(society)
    heavy = heavy_texts(q, heavy_copies)
    rows = wh.query(
        f"SELECT toString(toDate(occurred_at)), actor, text_hash FROM texts WHERE society = {q} "
        f"AND {sample.where()} AND (society, text_hash) NOT IN ({heavy})"
    ).rows
    vecs = vectors_for(wh, f"SELECT DISTINCT text_hash FROM texts WHERE society = {q} AND {sample.where()}")
    agents: dict[str, int] = {}
    per_day: dict[str, list[tuple[int, npt.NDArray[np.float32]]]] = defaultdict(list)
    for day, actor, h in rows:
        v = vecs.get(int(h))
        if v is not None:
            per_day[str(day)].append((agents.setdefault(str(actor), len(agents)), v))
    out = SampledDays()
    if not per_day:
        return out
    out.days = sorted(per_day)
    sums: list[F64] = []  # per day: (agents of the day) x dim sums, and their agent indices and counts
    who: list[npt.NDArray[np.int64]] = []
    counts: list[F64] = []
    for day in out.days:
        items = per_day[day]
        mat = np.stack([v for _, v in items])
        out.matrices.append(mat)
        idx = np.array([a for a, _ in items], dtype=np.int64)
        uniq, inv = np.unique(idx, return_inverse=True)
        s = np.zeros((len(uniq), mat.shape[1]))
        np.add.at(s, inv, mat.astype(np.float64))
        sums.append(s)
        who.append(uniq)
        counts.append(np.bincount(inv, minlength=len(uniq)).astype(np.float64))
    totals = np.stack([s.sum(axis=0) for s in sums])
    n = np.array([c.sum() for c in counts])
    prev = _previous(out.days)
    out.texts = [int(x) for x in n]
    out.pairwise = [None if np.isnan(x) else float(x) for x in _pairwise(totals, n)]
    out.centroid = [None if p is None else float(_cosine(totals[i], totals[p])) for i, p in enumerate(prev)]
    out.ci = _bootstrap(sums, who, counts, prev, len(agents))
    return out


def _previous(days: list[str]) -> list[int | None]:
    """For each day, the index of the calendar day before it when that day has text."""
    at = {d: i for i, d in enumerate(days)}
    return [at.get((date.fromisoformat(d) - timedelta(days=1)).isoformat()) for d in days]


def _bootstrap(
    sums: list[F64], who: list[npt.NDArray[np.int64]], counts: list[F64], prev: list[int | None], agents: int
) -> dict[str, tuple[float, float] | None]:
    if agents < 2:
        return {"pairwise": None, "centroid": None}
    rng = np.random.default_rng(0)
    pair_means: list[F64] = []
    cent_means: list[F64] = []
    for start in range(0, DRAWS, DRAW_CHUNK):
        k = min(DRAW_CHUNK, DRAWS - start)
        picks = rng.integers(0, agents, size=(k, agents))
        mult = np.stack([np.bincount(p, minlength=agents) for p in picks]).astype(np.float64)  # k x agents
        totals = np.stack([mult[:, w] @ s for s, w in zip(sums, who, strict=True)], axis=1)  # k x days x dim
        n = np.stack([mult[:, w] @ c for c, w in zip(counts, who, strict=True)], axis=1)  # k x days
        pair = _pairwise(totals, n)
        cent = np.full(n.shape, np.nan)
        for i, p in enumerate(prev):
            if p is not None:
                cent[:, i] = _cosine(totals[:, i], totals[:, p])
        with warnings.catch_warnings():  # a draw in which no day has two texts: NaN, dropped below
            warnings.simplefilter("ignore", RuntimeWarning)
            pair_means.append(np.nanmean(pair, axis=1))
            cent_means.append(np.nanmean(cent, axis=1))
    return {
        "pairwise": _interval(np.concatenate(pair_means)),
        "centroid": _interval(np.concatenate(cent_means)),
    }


def _interval(means: F64) -> tuple[float, float] | None:
    kept = means[np.isfinite(means)]
    if len(kept) < len(means) // 2 or not len(kept):
        return None
    lo, hi = np.quantile(kept, [0.025, 0.975])
    return float(lo), float(hi)
