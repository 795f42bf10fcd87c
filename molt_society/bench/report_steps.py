"""The report benchmarks (``bench.report``, ``bench.crawl_report``): ``build_report`` timed on a stored
society, and the step table (how long each section took, and which failed)."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from rich.console import Console

from molt_society.report.build import build_report
from molt_society.report.model import Report
from molt_society.report.warehouse_source import ClientWarehouse

err = Console(stderr=True)


def timed_report(
    chdb: Path, society: str, before: Callable[[ClientWarehouse], dict[str, Any]], **options: Any
) -> tuple[Report, dict[str, Any]]:
    """Open the chDB in ``chdb``, read ``before``'s figures of the stored society, then build its report
    (``options`` to ``build_report``, progress to stderr); the report, and the figures with ``total_s``,
    the seconds the report took."""
    wh = ClientWarehouse.open(f"chdb://{chdb}")
    try:
        facts = before(wh)
        began = time.perf_counter()
        rep = build_report(wh, society, progress=lambda m: err.print(f"  {m}"), **options)
        facts["total_s"] = time.perf_counter() - began
    finally:
        wh.close()
    return rep, facts


def section_rows(rep: Report, error_chars: int | None = None) -> list[str]:
    """``| section (failed: error) | seconds |`` for every section of ``rep``; the error cut to
    ``error_chars`` characters if given."""
    rows = []
    for sec in rep.sections:
        flag = f" (failed: {sec.error[:error_chars]})" if sec.error else ""
        rows.append(f"| {sec.title}{flag} | {sec.seconds:.1f} |")
    return rows
