"""Importers of real MoltBook dumps into the project's own events, with a report of what was done.

Public API: ``import_path(path, society) -> ImportResult``.

``path`` is a file or a folder (read recursively, files in sorted path order). Each file is streamed
and read by what its content is (``importers.files``, ``importers.json_doc``), never by its name; files
of other shapes are left aside with an "unknown shape" entry. Bad data never raises: every problem is
in the report, per file: what was read, what was made of it and what was left and why.

Symbolic links inside a folder are not followed out of it: a link whose target lies outside the
imported folder (or is missing) is reported as a skipped entry, never read; a link to a file inside it
is read like the file; links to folders are not descended into (their files are read at their own path
when they are inside the folder).

The events say what the data says and nothing more (see ``importers.builder`` for the rules): posts,
comments, agents and submolts the dump shows, and votes only as counts (``vote_tallied``). Importing the
same files again gives identical events (ids and content).
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path

from molt_society.importers.builder import Builder
from molt_society.importers.files import read_file
from molt_society.importers.records import FileRecords
from molt_society.importers.report import FileReport, ImportReport
from molt_society.schemas.events import Event

__all__ = ["FileReport", "ImportReport", "ImportResult", "import_path"]

_SOCIETY = re.compile(r"^[A-Za-z0-9_.:@\-]{1,128}$")


@dataclass(frozen=True)
class ImportResult:
    """The events of an import, sorted by (occurred_at, event_id), and its report."""

    events: list[Event]
    report: ImportReport


def _entries(root: Path) -> list[tuple[Path, str | None]]:
    """Every file under ``root`` in sorted path order, with the reason it is not read (or ``None``)."""
    if not root.is_dir():
        return [(root, None)]
    inside = root.resolve()
    found: list[tuple[Path, str | None]] = []
    for folder, dirs, files in os.walk(root):  # does not follow links to folders
        here = Path(folder)
        for d in dirs:
            if (here / d).is_symlink():
                found.append((here / d, _link_reason(here / d, inside, folder_link=True)))
        for f in files:
            path = here / f
            reason = _link_reason(path, inside, folder_link=False) if path.is_symlink() else None
            if reason is None and not path.is_file():
                reason = "not a regular file"
            found.append((path, reason))
    return sorted(found, key=lambda e: e[0].relative_to(root).as_posix())


def _link_reason(path: Path, inside: Path, *, folder_link: bool) -> str:
    target = Path(os.path.realpath(path))
    if not target.exists():
        return f"symbolic link to {os.readlink(path)}, which does not exist (not followed)"
    if not target.is_relative_to(inside):
        return "symbolic link to a path outside the imported folder (not followed)"
    if folder_link:
        return "symbolic link to a folder inside the import (not followed; its files are read at their path)"
    return ""  # a link to a file inside the folder: read


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
    for file, reason in _entries(root):
        name = file.name if not root.is_dir() else file.relative_to(root).as_posix()
        if reason:
            skipped = FileRecords(FileReport(name))
            skipped.report.skip_reason = reason
            records.append(skipped)
            continue
        records.append(read_file(file, name))
    builder = Builder(society, records)
    events = builder.build()
    report = ImportReport(str(root), society, [r.report for r in records], builder.notes)
    return ImportResult(events, report)
