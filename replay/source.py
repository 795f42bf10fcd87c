"""What ``society replay`` replays: an archive or a MoltBook dump, as events in event-time order.

``load_source`` reads the history (an archive's wire dicts as they are, a dump through the importers),
sorts it and cuts it to a time range; ``society.replay_run`` publishes it through the local stack.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from molt_society.replay.archive import ArchiveHeader, is_archive, read_archive, read_jsonl_docs
from molt_society.schemas.control import to_us
from molt_society.schemas.events import Event


@dataclass
class Source:
    """A history to replay: its archive header (None for a dump), its events, an import report."""

    header: ArchiveHeader | None
    events: list[Event] | list[dict[str, Any]]  # models from importers, wire dicts from archives
    report: Any = None  # importers.ImportReport for dumps


def _us(ev: Event | dict[str, Any]) -> int:
    """The event time to order by; an archive line without a readable zoned one sorts first, and the
    stream worker dead-letters it with the reason (replay does not judge records itself)."""
    if isinstance(ev, dict):
        try:
            t = datetime.fromisoformat(ev["occurred_at"])
            return to_us(t) if t.tzinfo is not None else -(2**62)
        except (KeyError, TypeError, ValueError, OverflowError):
            return -(2**62)
    return to_us(ev.occurred_at)


def _eid(ev: Event | dict[str, Any]) -> str:
    return str(ev.get("event_id")) if isinstance(ev, dict) else str(ev.event_id)


def load_source(path: Path, *, since: datetime | None = None, until: datetime | None = None) -> Source:
    """Events of an archive or of a MoltBook dump (through the importers), sorted, within [since, until)."""
    events: list[Any]
    if path.is_file() and path.name.endswith((".jsonl", ".jsonl.gz")):
        # the fast path: wire dicts, validated by the stream workers they are published to
        header, docs = read_jsonl_docs(path)
        events, report = list(docs), None
    elif path.is_file() and is_archive(path):
        header, it = read_archive(path)
        events, report = list(it), None
    else:
        from molt_society.importers import import_path

        result = import_path(path, society="import")
        header, events, report = None, list(result.events), result.report
    events.sort(key=lambda e: (_us(e), _eid(e)))
    if since is not None or until is not None:
        lo = to_us(since) if since else None
        hi = to_us(until) if until else None
        events = [e for e in events if (lo is None or _us(e) >= lo) and (hi is None or _us(e) < hi)]
        if header is not None:  # a sub-range has its own span
            header = ArchiveHeader(
                society=header.society, events=len(events), window_seconds=header.window_seconds
            )
    return Source(header, events, report)
