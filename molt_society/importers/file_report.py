"""The import report: what each file was, what was read, what became events, and what was not, and why.

Contract:

- One ``FileReport`` per file seen, in the order the files were read (sorted paths): what was read
  (``read``: records by kind, ``posts``, ``comments``, ``agents``, ``submolts``, ``other items``), what was
  made of it (``events`` by type: posts, comments, vote tallies, agents, submolts) and what was left and
  why (``skipped``, ``ignored_fields``, ``errors``, ``skip_reason``).
- ``ignored_fields`` counts, per field (``post.hot_score``, ``comment.author.karma``), the records whose
  field the import does not read: a field the importer does not know is left out of the events, never a
  reason to drop the record.
- ``skipped`` counts records that made no event, by reason, with up to ``MAX_EXAMPLES`` examples each
  (an example names the record's position: ``line 12`` in a CSV, ``posts[3]`` in JSON).
- ``notes`` counts records that made events but were changed or are worth knowing about (a title
  truncated, an author missing), same layout as ``skipped``.
- ``errors`` are problems with the file itself (it is not JSON, it is cut short, a CSV lacks columns),
  each with a position: line/column and character offset for JSON, a line number for CSV.
- ``skip_reason`` is set when the whole file was left aside (unknown shape, empty file).
- ``render()`` is text for a person, ``to_dict()`` is JSON-ready and stable in its keys.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

MAX_EXAMPLES = 3
MAX_FIELDS_SHOWN = 8


@dataclass
class ReasonTally:
    """How many records share one reason, with the first few as examples."""

    count: int = 0
    examples: list[str] = field(default_factory=list)

    def add(self, example: str) -> None:
        self.count += 1
        if len(self.examples) < MAX_EXAMPLES:
            self.examples.append(example)

    def to_dict(self) -> dict[str, Any]:
        return {"count": self.count, "examples": list(self.examples)}


@dataclass(frozen=True)
class FileError:
    """A problem with a file as a whole, at a position: ``line 3 column 7 (byte 41)`` (line and column
    1-based, the column counted in characters, the byte offset 0-based from the file's first byte, a
    byte order mark included), or ``line 12`` for a CSV row."""

    position: str
    message: str

    def to_dict(self) -> dict[str, str]:
        return {"position": self.position, "message": self.message}


def _example(position: str, detail: str) -> str:
    return f"{position}: {detail}" if detail else position


@dataclass
class FileReport:
    """Everything the import did with one file."""

    file: str
    shape: str = "unknown"
    read: Counter[str] = field(default_factory=Counter)
    events: Counter[str] = field(default_factory=Counter)
    ignored_fields: Counter[str] = field(default_factory=Counter)
    skipped: dict[str, ReasonTally] = field(default_factory=dict)
    notes: dict[str, ReasonTally] = field(default_factory=dict)
    errors: list[FileError] = field(default_factory=list)
    skip_reason: str | None = None

    def skip(self, reason: str, position: str, detail: str = "") -> None:
        """Count a record that made no event."""
        self.skipped.setdefault(reason, ReasonTally()).add(_example(position, detail))

    def note(self, reason: str, position: str, detail: str = "") -> None:
        """Count a record that made events but is worth a remark (changed, incomplete)."""
        self.notes.setdefault(reason, ReasonTally()).add(_example(position, detail))

    def error(self, position: str, message: str) -> None:
        """Record a problem with the file itself."""
        self.errors.append(FileError(position, message))

    def absorb(self, part: FileReport) -> None:
        """Count what ``part`` counted as if it had been counted here after this report's own (examples in
        that order): a part of this file read by another process (``importers.comment_parts``)."""
        self.read.update(part.read)
        self.events.update(part.events)
        self.ignored_fields.update(part.ignored_fields)
        for mine, theirs in ((self.skipped, part.skipped), (self.notes, part.notes)):
            for reason, tally in theirs.items():
                here = mine.setdefault(reason, ReasonTally())
                here.count += tally.count
                here.examples.extend(tally.examples[: MAX_EXAMPLES - len(here.examples)])
        self.errors.extend(part.errors)

    @property
    def records_read(self) -> int:
        """Records read from the file, of every kind."""
        return sum(self.read.values())

    @property
    def status(self) -> str:
        """``skipped`` (left aside), ``failed`` (errors, nothing read), ``partial`` or ``imported``."""
        if self.skip_reason is not None:
            return "skipped"
        if self.errors:
            return "failed" if self.records_read == 0 else "partial"
        return "imported"

    @property
    def skipped_count(self) -> int:
        return sum(t.count for t in self.skipped.values())

    def to_dict(self) -> dict[str, Any]:
        return {
            "file": self.file,
            "shape": self.shape,
            "status": self.status,
            "skip_reason": self.skip_reason,
            "records_read": self.records_read,
            "read": dict(sorted(self.read.items())),
            "events": dict(sorted(self.events.items())),
            "ignored_fields": dict(sorted(self.ignored_fields.items())),
            "skipped": {k: v.to_dict() for k, v in sorted(self.skipped.items())},
            "notes": {k: v.to_dict() for k, v in sorted(self.notes.items())},
            "errors": [e.to_dict() for e in self.errors],
        }

    def render(self) -> str:
        head = f"{self.file}  [{self.shape}, {self.status}]"
        lines = [head]
        if self.skip_reason is not None:
            lines.append(f"  skipped file: {self.skip_reason}")
            return "\n".join(lines)
        read = ", ".join(f"{k} {v}" for k, v in sorted(self.read.items())) or "nothing"
        made = ", ".join(f"{k} {v}" for k, v in sorted(self.events.items())) or "no events"
        lines.append(f"  read: {read}")
        lines.append(f"  made: {made}")
        for err in self.errors:
            lines.append(f"  ERROR at {err.position}: {err.message}")
        for title, tallies in (("skipped", self.skipped), ("note", self.notes)):
            for reason, tally in sorted(tallies.items(), key=lambda kv: (-kv[1].count, kv[0])):
                lines.append(f"  {title}: {reason}: {tally.count}")
                lines.extend(f"      e.g. {ex}" for ex in tally.examples)
        if self.ignored_fields:
            lines.append("  fields not imported: " + _top(self.ignored_fields))
        return "\n".join(lines)


def _top(counts: Counter[str], n: int = MAX_FIELDS_SHOWN) -> str:
    """The ``n`` most frequent entries as ``name count``, then how many more there are."""
    ranked = sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))
    shown = ", ".join(f"{k} {v}" for k, v in ranked[:n])
    return shown + (f" (+{len(ranked) - n} more)" if len(ranked) > n else "")


def _counts(tallies: dict[str, ReasonTally]) -> dict[str, int]:
    return {reason: tally.count for reason, tally in tallies.items()}


@dataclass
class ImportReport:
    """The report of one ``import_path`` call: per-file entries plus notes about the whole import."""

    source: str
    society: str
    files: list[FileReport] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def file(self, name: str) -> FileReport:
        """The entry of a file by the name it has in the report (its path relative to the source)."""
        for entry in self.files:
            if entry.file == name:
                return entry
        raise KeyError(name)

    def _total(self, of_entry: Callable[[FileReport], Mapping[str, int]]) -> Counter[str]:
        """The sum over the files of one count per key."""
        total: Counter[str] = Counter()
        for entry in self.files:
            total.update(of_entry(entry))
        return total

    def events_by_type(self) -> Counter[str]:
        return self._total(lambda entry: entry.events)

    def skipped_by_reason(self) -> Counter[str]:
        return self._total(lambda entry: _counts(entry.skipped))

    def read_by_kind(self) -> Counter[str]:
        return self._total(lambda entry: entry.read)

    def ignored_fields(self) -> Counter[str]:
        return self._total(lambda entry: entry.ignored_fields)

    def notes_by_reason(self) -> Counter[str]:
        return self._total(lambda entry: _counts(entry.notes))

    @property
    def error_count(self) -> int:
        return sum(len(entry.errors) for entry in self.files)

    def to_dict(self) -> dict[str, Any]:
        return {
            "source": self.source,
            "society": self.society,
            "totals": {
                "files": len(self.files),
                "files_by_status": dict(sorted(Counter(f.status for f in self.files).items())),
                "read": dict(sorted(self.read_by_kind().items())),
                "events": dict(sorted(self.events_by_type().items())),
                "ignored_fields": dict(sorted(self.ignored_fields().items())),
                "skipped": dict(sorted(self.skipped_by_reason().items())),
                "notes": dict(sorted(self.notes_by_reason().items())),
                "errors": self.error_count,
            },
            "notes": list(self.notes),
            "files": [entry.to_dict() for entry in self.files],
        }

    def render(self, max_files: int | None = None, full_report: str | None = None) -> str:
        """The totals, then each file's part; with ``max_files``, only the files that were not imported
        cleanly (skipped, failed, partial, with skipped records), at most that many, and a line saying
        how many more files there are and where the whole per-file report is (``full_report``)."""
        events = self.events_by_type()
        by_status = Counter(f.status for f in self.files)
        lines = [
            f"Import of {self.source} into society {self.society!r}",
            f"files: {len(self.files)} ("
            + ", ".join(f"{k} {v}" for k, v in sorted(by_status.items()))
            + f"); events: {sum(events.values())} ("
            + ", ".join(f"{k} {v}" for k, v in sorted(events.items()))
            + f"); skipped records: {sum(self.skipped_by_reason().values())}; errors: {self.error_count}",
        ]
        read = self.read_by_kind()
        lines.append("read: " + (", ".join(f"{k} {v}" for k, v in sorted(read.items())) or "nothing"))
        ignored = self.ignored_fields()
        if ignored:
            lines.append("fields not imported (left out of the events): " + _top(ignored))
        if self.notes:
            lines.append("notes:")
            lines.extend(f"  - {n}" for n in self.notes)
        lines.append("")
        shown = self.files
        if max_files is not None and len(self.files) > max_files:
            shown = [f for f in self.files if f.status != "imported" or f.skipped_count][:max_files]
        lines.extend(entry.render() for entry in shown)
        if len(shown) < len(self.files):
            clean = sum(1 for f in self.files if f.status == "imported" and not f.skipped_count)
            lines.append(
                f"... {len(self.files) - len(shown):,} more files not shown ({clean:,} of all "
                f"{len(self.files):,} imported cleanly)"
                + (f"; the per-file report of every file: {full_report}" if full_report else "")
            )
        return "\n".join(lines)
