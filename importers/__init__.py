"""Importers of real MoltBook dumps into the project's own events, with a report of what was done.

Public API: ``import_path(path, society) -> ImportResult``.

``path`` is a file or a folder (read recursively, files in sorted path order). Each file's shape is
detected from its content (see ``importers.detect``), never from its name; files of other shapes are
left aside with an "unknown shape" entry. Bad data never raises: every problem is in the report.

The events say what the data says and nothing more (see ``importers.builder`` for the rules): posts,
comments, agents and submolts the dump shows, and votes only as counts (``vote_tallied``). Importing the
same files again gives identical events (ids and content).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from importers.builder import Builder
from importers.files import read_file
from importers.report import FileReport, ImportReport
from schemas.events import Event

__all__ = ["FileReport", "ImportReport", "ImportResult", "import_path"]

_SOCIETY = re.compile(r"^[A-Za-z0-9_.:@\-]{1,128}$")


@dataclass(frozen=True)
class ImportResult:
    """The events of an import, sorted by (occurred_at, event_id), and its report."""

    events: list[Event]
    report: ImportReport


def _files(root: Path) -> list[Path]:
    if root.is_file():
        return [root]
    return sorted(p for p in root.rglob("*") if p.is_file())


def import_path(path: Path, society: str) -> ImportResult:
    """Import a MoltBook dump (a file, or a folder read recursively) as events of ``society``.

    Raises ``ValueError`` only for a bad call (a society name that is not a valid id, a path that does
    not exist); problems with the data are reported in ``ImportResult.report``.
    """
    if not _SOCIETY.match(society):
        raise ValueError(f"society {society!r} is not a valid id ([A-Za-z0-9_.:@-], at most 128)")
    root = Path(path)
    if not root.exists():
        raise ValueError(f"{root} does not exist")
    records = []
    for file in _files(root):
        name = file.name if root.is_file() else file.relative_to(root).as_posix()
        records.append(read_file(file, name))
    builder = Builder(society, records)
    events = builder.build()
    report = ImportReport(str(root), society, [r.report for r in records], builder.notes)
    return ImportResult(events, report)
