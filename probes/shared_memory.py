"""The socialization study's shared-memory probe: who does the society say is influential?

Each reply's answer is the set of agents it names (their id, or their registered name). The probe
reports how many replies name anyone, how far the answers agree with each other (mean pairwise Jaccard
of the named sets) and with the measured PageRank leaders of the newest window (share of named agents
among the top k, and share of the top k named by anyone).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from itertools import combinations

from probes.score import Reply

_TOKEN = re.compile(r"[A-Za-z0-9_\-]+")


@dataclass(frozen=True)
class MemoryResult:
    replies: int
    naming: int  # replies that name at least one agent
    agreement: float | None  # mean pairwise Jaccard between the named sets
    precision: float | None  # named agents (distinct) that are PageRank leaders
    recall: float | None  # leaders named by at least one reply
    named: dict[str, int]  # agent -> replies naming it
    leaders: list[str]


def named_agents(text: str, aliases: Mapping[str, str]) -> set[str]:
    """Agents named in ``text``: ``aliases`` maps ids and names (case-insensitive) to agent ids."""
    return {aliases[t.casefold()] for t in _TOKEN.findall(text) if t.casefold() in aliases}


def score_memory(
    replies: Sequence[Reply], aliases: Mapping[str, str], leaders: Sequence[str]
) -> MemoryResult:
    sets = [named_agents(r.content, aliases) for r in replies]
    naming = [s for s in sets if s]
    pairs = list(combinations(naming, 2))
    agreement = sum(len(a & b) / len(a | b) for a, b in pairs) / len(pairs) if pairs else None
    named: dict[str, int] = {}
    for s in naming:
        for a in s:
            named[a] = named.get(a, 0) + 1
    top = set(leaders)
    precision = sum(1 for a in named if a in top) / len(named) if named else None
    recall = sum(1 for a in top if a in named) / len(top) if top else None
    return MemoryResult(
        len(replies), len(naming), agreement, precision, recall, dict(sorted(named.items())), list(leaders)
    )
