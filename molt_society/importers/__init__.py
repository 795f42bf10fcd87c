"""Importers of real MoltBook dumps into the project's own events, with a report of what was done.

Public API: ``import_path(path, society) -> ImportResult``.

``path`` is a file or a folder (read recursively, files in sorted path order); a ``.tar.gz``, ``.zip`` or
``.gz`` (by content) is read member by member (``importers.containers``). Each file is streamed
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
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from molt_society.importers import containers, makers
from molt_society.importers.builder import Builder
from molt_society.importers.file_report import FileReport, ImportReport
from molt_society.importers.files import read_file
from molt_society.importers.records import FileRecords
from molt_society.importers.scratch import Scratch
from molt_society.importers.snapshot_folders import snapshot_time
from molt_society.importers.spill import RUN_SIZE, SortedSpill
from molt_society.schemas.events import Event

__all__ = ["FileReport", "ImportReport", "ImportResult", "ImportStream", "import_path", "import_stream"]

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


def _records(path: Path, society: str, store: Scratch) -> tuple[Path, list[FileRecords]]:
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
        for rec in _read_entry(file, name, 0, store):
            rec.snapshot_at = snapshot_time(rec.report.file)
            records.append(rec)
    return root, records


def _read_entry(file: Path, name: str, depth: int, store: Scratch) -> Iterator[FileRecords]:
    """The records of one file, or of each file of a container (``importers.containers``)."""
    kind = containers.kind_of(file) if depth < containers.MAX_NESTING else None
    if kind is None:
        yield read_file(file, name, store)
        return
    with tempfile.TemporaryDirectory(prefix="society-unpack-") as tmp:
        try:
            for member, path, why in containers.unpack(file, kind, Path(tmp)):
                label = f"{name}/{member}"
                if path is None:
                    skipped = FileRecords(FileReport(label))
                    skipped.report.skip_reason = why
                    yield skipped
                    continue
                yield from _read_entry(path, label, depth + 1, store)
                path.unlink()  # the disk a member took is freed once it is read
        except containers.ContainerError as exc:
            broken = FileRecords(FileReport(name))
            broken.report.error("file", f"{exc} (the members before it are read)")
            yield broken


def import_path(path: Path, society: str) -> ImportResult:
    """Import a MoltBook dump (a file, or a folder read recursively) as events of ``society``.

    Raises ``ValueError`` only for a bad call (a society name that is not a valid id, a path that does
    not exist); problems with the data are reported in ``ImportResult.report``.
    """
    events, report = _build(path, society, None)
    return ImportResult(events, report)


def _build(path: Path, society: str, spill: SortedSpill | None) -> tuple[list[Event], ImportReport]:
    """Read every file of ``path`` and make the events (kept, or written to ``spill``); the report."""
    store = Scratch()
    try:
        root, records = _records(path, society, store)
        builder = Builder(society, records, store, spill, makers.start)
        events = builder.build()
    finally:
        store.close()
    report = ImportReport(str(root), society, [r.report for r in records], builder.notes)
    return events, report


@dataclass
class ImportStream:
    """The events of an import encoded (wire JSON) and sorted on disk, and its report; ``close`` removes
    the sorted runs. Iterating ``spill`` gives the encoded events by (occurred_at, event_id)."""

    spill: SortedSpill
    report: ImportReport

    def close(self) -> None:
        self.spill.close()


def import_stream(path: Path, society: str, *, run_size: int = RUN_SIZE) -> ImportStream:
    """``import_path`` for dumps of any size: the events are not kept as objects but written, encoded,
    to an external sort (``importers.spill``), so they cost a few hundred bytes each on disk, not
    kilobytes in memory; the records they are made from are on disk too (``importers.scratch``)."""
    spill = SortedSpill(run_size, tally_ties=True)  # the direct replay's repeated ids (spill.repeated_ties)
    _, report = _build(path, society, spill)
    return ImportStream(spill, report)
