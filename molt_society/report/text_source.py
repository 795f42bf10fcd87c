"""Who wrote a society's texts: the stochastic brain, LLM agents, or someone else (imported real data).

A simulated society's stochastic agents write synthetic text from a word model (a closed vocabulary, no
meaning). Every diagnostic that reads what the texts say (lexical turnover, semantic stability, the
individual layer, cascades and saturation, cooperation events, clone swarms, the Superminds reply judge)
then describes that word model, not what agents say, and a published MoltBook value beside it would
mislead. ``report.build`` asks ``text_source`` once per report and, when the texts are mostly synthetic
(``TextSource.synthetic``), says so in those sections and shows no published value beside them.

Counted: posts and comments (``post_created``, ``comment_created``) by their author's brain in the
``agents`` view (``agent_registered`` and ``agents_joined``; an agent registered twice counts with its
latest registration). ``stochastic`` and ``llm`` are the simulator's brains; ``other`` is every other
author: agents an importer registered (brain ``imported``: real MoltBook text), probes and injected
agents, and actors no event registered.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from molt_society.report.model import Scalar, Section, Table
from molt_society.report.superminds import REPLY_RATINGS_ROW
from molt_society.report.warehouse_source import Warehouse, quoted

SYNTHETIC_BRAIN = "stochastic"
LLM_BRAIN = "llm"
SYNTHETIC_MIN_SHARE = 0.5
"""A society whose share of texts by the stochastic brain is at least this has synthetic text."""


@dataclass(frozen=True)
class TextSource:
    """Posts and comments of a society by who wrote them (see module docstring)."""

    stochastic: int = 0
    llm: int = 0
    other: int = 0

    @property
    def total(self) -> int:
        return self.stochastic + self.llm + self.other

    @property
    def synthetic_share(self) -> float:
        """Share of all texts written by the stochastic brain (0.0 without texts)."""
        return self.stochastic / self.total if self.total else 0.0

    @property
    def synthetic(self) -> bool:
        """Mostly synthetic text: the text-reading sections describe the word model, not what agents say."""
        return self.total > 0 and self.synthetic_share >= SYNTHETIC_MIN_SHARE

    def to_dict(self) -> dict[str, Any]:
        """A small JSON-ready summary (the report's ``settings["text_source"]``)."""
        return {
            **asdict(self),
            "synthetic_share": round(self.synthetic_share, 4),
            "synthetic": self.synthetic,
        }


def text_source_sql(society: str) -> str:
    """One aggregate query: texts counted per author first (a row per author), then joined to the agents'
        brains (a row per agent), so its cost is one pass over the society's posts and comments. An author
    without a registration joins an empty brain (``ifNull`` too, should ``join_use_nulls`` be set)."""
    soc = quoted(society)  # the brains are this module's constants, the society name is checked
    return f"""
SELECT
    sumIf(t.n, ifNull(a.brain, '') = '{SYNTHETIC_BRAIN}') AS stochastic,
    sumIf(t.n, ifNull(a.brain, '') = '{LLM_BRAIN}')        AS llm,
    sumIf(t.n, ifNull(a.brain, '') NOT IN ('{SYNTHETIC_BRAIN}', '{LLM_BRAIN}')) AS other
FROM
(
    SELECT actor, count() AS n
    FROM events FINAL
    WHERE society = {soc} AND type IN ('post_created', 'comment_created')
    GROUP BY actor
) AS t
LEFT JOIN
(
    SELECT agent_id, argMax(brain, registered_at) AS brain
    FROM agents
    WHERE society = {soc}
    GROUP BY agent_id
) AS a ON t.actor = a.agent_id
"""


def text_source(wh: Warehouse, society: str) -> TextSource:
    """Counts of ``society``'s posts and comments by the stochastic brain, by LLM agents and by others."""
    rows = wh.query(text_source_sql(society)).rows
    if not rows:
        return TextSource()
    stochastic, llm, other = (int(v or 0) for v in rows[0])
    return TextSource(stochastic=stochastic, llm=llm, other=other)


# --- what a report says of synthetic text ------------------------------------------------------------------

WHOLE = None
TEXT_SECTIONS: dict[str, tuple[str, ...] | None] = {
    "lexical": WHOLE,
    "semantic": WHOLE,
    "individual": WHOLE,
    "cascades": WHOLE,  # meme, skill and behavioural cascades, their power law and saturation
    "cooperation": WHOLE,  # technical threads and solution quality are found in the text
    "patterns": ("clones.",),  # clone swarms; posting rhythm, burstiness and the crawl's reference do not
    # the LLM judge's ratings of agents' replies; depth and repliers by popularity do not read the text
    "superminds": ("superminds.reply_quality", "superminds.figure5_right", "superminds.comment_quality"),
}
"""Report sections whose figures depend on what the texts say: the whole section (``WHOLE``) or its
items whose keys start with one of the prefixes."""

PART_NOTES = {
    "patterns": (
        "the clone-swarm figures describe that model, not what agents say; no published value is shown "
        "beside them. Posting rhythm, burstiness and the crawl's reference figures do not depend on the "
        "text and keep theirs."
    ),
    "superminds": (
        "the LLM judge's ratings and categories of replies describe that model, not what agents say; no "
        "published value is shown beside them. Thread depth and repliers by popularity do not depend on the "
        "text and keep theirs."
    ),
}
WHOLE_NOTE = (
    "these figures describe that model, not what agents say; no published value is shown beside them."
)


def _percent(share: float) -> str:
    """A share as a percentage that never reads 100% or 0% unless it is."""
    text = f"{share:.0%}"
    if (text == "100%" and share < 1) or (text == "0%" and share > 0):
        text = f"{share:.1%}"
    return text


def note(section_key: str, src: TextSource) -> str:
    """The sentence a text-reading section carries when ``src`` is synthetic."""
    head = (
        f"{_percent(src.synthetic_share)} of this society's texts were written by the stochastic brain "
        "(synthetic text from a word model): "
    )
    return head + PART_NOTES.get(section_key, WHOLE_NOTE)


def _affected(key: str, prefixes: tuple[str, ...] | None) -> bool:
    return prefixes is WHOLE or key.startswith(prefixes)


def apply_caveat(section: Section, src: TextSource) -> None:
    """On synthetic text, the section's text-reading items keep their numbers but lose every published
    value (filled by ``published.annotate`` or set by the diagnostic), and the section says why."""
    if not src.synthetic or section.key not in TEXT_SECTIONS:
        return
    prefixes = TEXT_SECTIONS[section.key]
    hit = False
    for item in section.items:
        if not _affected(item.key, prefixes):
            continue
        hit = True
        if isinstance(item, Scalar):
            item.published = None
            item.published_source = None
    if section.key == "superminds":
        for item in section.items:
            if isinstance(item, Table) and item.key == "superminds.published":
                item.rows = [r for r in item.rows if not (r and r[0] == REPLY_RATINGS_ROW)]
    if hit:
        section.note = note(section.key, src)
