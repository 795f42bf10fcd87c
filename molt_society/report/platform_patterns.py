"""MoltBook analyses beyond the three studies (issue 14), one report section.

- ``report.clones``: clone swarms, near-duplicate texts across agents (MinHash / LSH, views in
  warehouse/patterns.sql); no published value.
- ``report.rhythm``: the coefficient of variation of each agent's inter-post gaps as Li 2026 computed it
  (the basis of the published 26.5% "autonomous"), a labelled variant over posts and comments, and
  burstiness per agent and for the whole society.
- ``report.reference_stats``: comparators from Li 2026's 91,792-post crawl
  (``../shared/data/moltbook/reference-stats``), computed on that crawl's population definitions.
"""

from __future__ import annotations

import structlog

from molt_society.report import clones, reference_stats, rhythm
from molt_society.report.model import Item
from molt_society.report.warehouse_source import Warehouse

log = structlog.get_logger(__name__)


def items(wh: Warehouse, society: str) -> list[Item]:
    out: list[Item] = []
    for part in (rhythm, clones, reference_stats):
        got = part.items(wh, society)
        log.debug("patterns part done", part=part.__name__, items=len(got))
        out += got
    return out
