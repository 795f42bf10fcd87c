"""Build a society's report: every diagnostic in turn, each timed, each failing alone.

A diagnostic that raises does not stop the report: its section carries the error and the others run. The
embeddings the semantic and individual layers need are computed first (once per distinct text, stored in
ClickHouse; see ``report.embeddings``). When a society's texts are mostly synthetic (the stochastic brain's
word model: ``report.text_source``), the sections that read what the texts say carry a note and no published
value beside their figures.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import structlog

from molt_society.report import (
    cascades,
    collective,
    comparisons,
    cooperation,
    fidelity,
    individual,
    platform_patterns,
    roles,
    social,
    superminds,
)
from molt_society.report.embeddings import Encoder, ensure_embeddings
from molt_society.report.model import Item, Report, Scalar, Section
from molt_society.report.published import annotate
from molt_society.report.sample import agent_sample
from molt_society.report.text_source import TextSource, apply_caveat, text_source
from molt_society.report.warehouse_source import Warehouse, quoted

log = structlog.get_logger(__name__)

Diagnostic = Callable[[Warehouse, str], list[Item]]
Progress = Callable[[str], None]


@dataclass(frozen=True)
class Spec:
    key: str
    title: str
    description: str
    run: Diagnostic


SPECS: list[Spec] = [
    Spec(
        "activity",
        "Activity",
        "Posts, comments, votes cast and newly active agents per UTC day (view activity_daily).",
        social.activity,
    ),
    Spec(
        "threads",
        "Threads",
        "Reply depth (a top-level comment has depth 1; a thread's depth is its deepest "
        "comment, 0 without comments) and thread size (view threads).",
        social.threads,
    ),
    Spec(
        "lexical",
        "Lexical turnover",
        "Births and deaths of 1- to 5-grams per day, among n-grams used at least "
        "twice (view lexical_turnover_daily).",
        social.lexical_turnover,
    ),
    Spec(
        "semantic",
        "Semantic stability",
        "all-MiniLM-L6-v2 embeddings: similarity of consecutive days' "
        "centroids, mean pairwise similarity and mean similarity to the 10 nearest neighbours per day (view "
        "semantic_daily; the neighbours in numpy); above SOCIETY_REPORT_SAMPLE_TEXTS texts on a random "
        "sample of agents, with bootstrap intervals over them (report.sample).",
        social.semantic,
    ),
    Spec(
        "individual",
        "Individual layer",
        "Semantic drift of each agent's posts, adaptation to feedback "
        "(votes) and the impact of commenting on an agent's later posts; above SOCIETY_REPORT_SAMPLE_TEXTS "
        "texts on the same random sample of agents, with bootstrap intervals.",
        individual.items,
    ),
    Spec(
        "collective",
        "Collective layer",
        "PageRank on each window's interaction graph: share of the top nodes, churn of the top-k set, "
        "super-nodes and their persistence; the leaders of the whole observation period.",
        collective.items,
    ),
    Spec(
        "roles",
        "Structural roles",
        "Per active agent in-degree, out-degree, betweenness, clustering and PageRank on the interaction "
        "graph (0 for agents without an edge); k-means with k chosen by silhouette (Molt Dynamics); the "
        "graph-only population as a labelled variant.",
        roles.items,
    ),
    Spec(
        "cascades",
        "Information cascades and saturation",
        "Meme, skill and behavioural cascades, their power-law fit, and whether adoption saturates with "
        "exposure: the published logistic and Cox models, beside a Cox model with time-varying exposure and "
        "a permutation null (shuffled adoption times).",
        cascades.items,
    ),
    Spec(
        "cooperation",
        "Cooperation events",
        "Technical threads with at least 5 comments, 3 participants and "
        "30 minutes, scored for quality (Molt Dynamics).",
        cooperation.items,
    ),
    Spec(
        "superminds",
        "Superminds: threads and reply quality",
        "Thread depth and unique repliers by post popularity (upvote bins, the paper's Figure 5) and the "
        "quality of replies as the paper's LLM judge rates them (Superminds).",
        superminds.items,
    ),
    Spec(
        "patterns",
        "Clone swarms, posting rhythm and burstiness",
        "Near-duplicate texts across authors, the regularity of each agent's posting gaps and the "
        "burstiness of activity: MoltBook analyses beyond the three studies.",
        platform_patterns.items,
    ),
    Spec(
        "agreement",
        "Streaming vs batch",
        "The pipeline's streaming metrics against the same figures recomputed here from the stored events.",
        collective.agreement,
    ),
]


def build_report(
    wh: Warehouse,
    society: str,
    *,
    embed: bool = True,
    encoder: Encoder | None = None,
    progress: Progress | None = None,
    only: set[str] | None = None,
    reference: fidelity.Reference | None = None,
) -> Report:
    """The report of ``society`` (every diagnostic, or those in ``only``)."""
    say = progress or (lambda _msg: None)
    events = int(wh.query(f"SELECT count() FROM events FINAL WHERE society = {quoted(society)}").rows[0][0])
    sections: list[Section] = []
    settings: dict[str, Any] = {"embeddings": "all-MiniLM-L6-v2" if embed else "skipped"}
    src = _text_source(wh, society, events)
    settings["text_source"] = src.to_dict() if isinstance(src, TextSource) else {"error": src}
    if embed and (only is None or {"semantic", "individual"} & only):
        started = time.perf_counter()
        enc = encoder or Encoder()
        sample = agent_sample(wh, society)
        settings["embeddings_sample"] = sample.describe()
        n, _ = ensure_embeddings(
            wh,
            society,
            enc,
            progress=lambda done, todo: say(f"embedding texts {done:,}/{todo:,}"),
            agents=sample.where(),
        )
        settings["texts_embedded_now"] = n
        settings["embeddings_runtime"] = enc.runtime or "not loaded (nothing to embed)"
        settings["embedding_seconds"] = round(time.perf_counter() - started, 3)
    if reference is not None and (only is None or "fidelity" in only):
        say("Fidelity ...")
        sections.append(_fidelity(wh, society, reference))
    for spec in SPECS:
        if only is not None and spec.key not in only:
            continue
        if not embed and spec.key in ("semantic", "individual"):
            continue
        say(f"{spec.title} ...")
        section = Section(spec.key, spec.title, spec.description)
        started = time.perf_counter()
        try:
            section.items = [annotate(i) if isinstance(i, Scalar) else i for i in spec.run(wh, society)]
        except Exception as exc:  # one diagnostic failing must not lose the others
            log.exception("diagnostic_failed", diagnostic=spec.key, society=society)
            section.error = f"{type(exc).__name__}: {exc}"
        section.seconds = round(time.perf_counter() - started, 3)
        _explain_nans(section)
        if isinstance(src, TextSource):
            apply_caveat(section, src)
        sections.append(section)
        say(f"{spec.title}: {section.seconds:.1f} s")
    if events == 0:
        for s in sections:
            for i in s.items:
                if isinstance(i, Scalar) and i.value is None:
                    i.reason = f"the society {society!r} has no events stored. {i.reason or ''}".strip()
    report = Report(
        society=society,
        generated_at=datetime.now(UTC).isoformat(timespec="seconds"),
        events=events,
        sections=sections,
        settings=settings,
    )
    report.comparisons = comparisons.compare(report.scalars())  # over the sections that ran
    if only is None or report.comparisons:
        report.sections.insert(0, comparisons.section(report.comparisons))
    return report


def _text_source(wh: Warehouse, society: str, events: int) -> TextSource | str:
    """Who wrote the society's texts (``report.text_source``), or why that could not be read: then every
    section keeps its published values, as before."""
    if events == 0:
        return TextSource()
    try:
        return text_source(wh, society)
    except Exception as exc:  # the report goes on without the caveat
        log.exception("text_source_failed", society=society)
        return f"{type(exc).__name__}: {exc}"


def _fidelity(wh: Warehouse, society: str, reference: fidelity.Reference) -> Section:
    section = Section(
        "fidelity",
        "Fidelity to real MoltBook data",
        "Each moment the behaviour model is fitted on (calibration.moments), computed on this society's "
        f"stored events beside {reference.label}; the distance is in widths of the moment's stated band.",
    )
    started = time.perf_counter()
    try:
        section.items = fidelity.items(wh, society, reference)
    except Exception as exc:  # the other sections still run
        log.exception("diagnostic_failed", diagnostic="fidelity", society=society)
        section.error = f"{type(exc).__name__}: {exc}"
    section.seconds = round(time.perf_counter() - started, 3)
    return section


def _explain_nans(section: Section) -> None:
    """No NaN reaches the report without a word: a non-finite scalar becomes None with a reason."""
    for item in section.items:
        if isinstance(item, Scalar) and isinstance(item.value, float) and not math.isfinite(item.value):
            item.value = None
            item.reason = item.reason or "the computation gave no finite number (too little varied data)"
