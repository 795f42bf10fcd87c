"""What ``society replay`` replays: an archive or a MoltBook dump, as events in event-time order.

``load_source`` reads the history (an archive's records as they are, a dump through the importers) into
an external sort (``importers.spill``): the events are held encoded on disk, not as objects in memory,
so the size of a history is bounded by the disk, not by the memory of the process. ``Source.events``
iterates them as wire dicts by (event time, event id), cut to the time range asked for;
``society.replay_run`` publishes them through the local stack.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

import orjson

from molt_society.importers.spill import SortedSpill
from molt_society.replay.archive import (
    ArchiveHeader,
    is_archive,
    read_archive,
    read_header,
    read_jsonl_docs,
)
from molt_society.schemas.control import to_us
from molt_society.schemas.wire import encode_event

UNREADABLE_US = -(2**62)
"""Where a record without a readable zoned time sorts: first (the stream worker dead-letters it with the
reason; replay does not judge records itself)."""


def _us(doc: dict[str, Any]) -> int:
    try:
        t = datetime.fromisoformat(doc["occurred_at"])
        return to_us(t) if t.tzinfo is not None else UNREADABLE_US
    except (KeyError, TypeError, ValueError, OverflowError):
        return UNREADABLE_US


def _tie(event_id: object) -> bytes:
    """The order of equal times: by event id (a UUID's 16 bytes order as its text does)."""
    try:
        return uuid.UUID(str(event_id)).bytes
    except ValueError:
        return str(event_id).encode()[:64]


@dataclass
class SortedEvents:
    """The events of a spill between ``lo`` and ``hi`` (µs, half-open; None = unbounded) as wire dicts,
    in order; iterable more than once."""

    spill: SortedSpill
    lo: int | None = None
    hi: int | None = None
    count: int = -1  # known already (a reader of another process's spill); else counted

    def __post_init__(self) -> None:
        if self.count >= 0:
            return
        if self.lo is None and self.hi is None:
            self.count = len(self.spill)
        else:
            self.count = sum(1 for _ in self)

    def __iter__(self) -> Iterator[dict[str, Any]]:
        lo, hi = self.lo, self.hi
        for raw in self.spill:
            doc: dict[str, Any] = orjson.loads(raw)
            if lo is not None or hi is not None:
                us = _us(doc)
                if (lo is not None and us < lo) or (hi is not None and us >= hi):
                    continue
            yield doc

    def __len__(self) -> int:
        return self.count

    def __bool__(self) -> bool:
        return self.count > 0


@dataclass
class Source:
    """A history to replay: its archive header (None for a dump), its events, an import report."""

    header: ArchiveHeader | None
    events: SortedEvents
    report: Any = None  # importers.ImportReport for dumps

    def close(self) -> None:
        """Remove the sorted events from disk."""
        self.events.spill.close()

    def __enter__(self) -> Source:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _spill_archive(path: Path) -> tuple[ArchiveHeader | None, SortedSpill]:
    spill = SortedSpill(tally_ties=True)  # the direct replay's repeated ids (spill.repeated_ties)
    if path.name.endswith((".jsonl", ".jsonl.gz")):
        # the fast path: wire dicts, validated by the stream workers they are published to
        header, docs = read_jsonl_docs(path)
        for doc in docs:
            spill.add(_us(doc), _tie(doc.get("event_id")), orjson.dumps(doc))
        return header, spill
    header, events = read_archive(path)
    for ev in events:
        spill.add(to_us(ev.occurred_at), ev.event_id.bytes, encode_event(ev))
    return header, spill


def archive_header(path: Path) -> ArchiveHeader | None:
    """The header of an archive (its window length, span), read without its events; None for a dump."""
    return read_header(path) if path.is_file() and is_archive(path) else None


def load_source(path: Path, *, since: datetime | None = None, until: datetime | None = None) -> Source:
    """Events of an archive or of a MoltBook dump (through the importers), sorted, within [since, until)."""
    report = None
    if path.is_file() and is_archive(path):
        header, spill = _spill_archive(path)
    else:
        from molt_society.importers import import_stream

        imported = import_stream(path, society="import")
        header, spill, report = None, imported.spill, imported.report
    lo = to_us(since) if since else None
    hi = to_us(until) if until else None
    events = SortedEvents(spill, lo, hi)
    if header is not None and (lo is not None or hi is not None):  # a sub-range has its own span
        header = ArchiveHeader(
            society=header.society, events=len(events), window_seconds=header.window_seconds
        )
    return Source(header, events, report)
