"""``society export``: a society's events (or a time range of them) from ClickHouse to an archive."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from datetime import datetime
from pathlib import Path
from typing import Any
from uuid import UUID

import orjson

from molt_society.importers.spill import SortedSpill
from molt_society.replay.archive import ArchiveHeader, write_archive
from molt_society.replay.export_rows import count_types, iter_keyset, quote
from molt_society.runtime.settings import Settings
from molt_society.schemas.control import from_us, to_us
from molt_society.schemas.events import EVENT_ADAPTER, Event
from molt_society.warehouse.reader import run_query


def _range(since: datetime | None, until: datetime | None) -> str:
    cond = ""
    if since is not None:
        cond += f" AND toUnixTimestamp64Micro(occurred_at) >= {to_us(since)}"
    if until is not None:
        cond += f" AND toUnixTimestamp64Micro(occurred_at) < {to_us(until)}"
    return cond


def count_events(settings: Settings, society: str, since: datetime | None, until: datetime | None) -> int:
    sql = f"SELECT count() FROM events FINAL WHERE society = {quote(society)}{_range(since, until)}"
    return int(run_query(settings, sql).rows[0][0])


def society_span(settings: Settings, society: str) -> tuple[int | None, int | None, float | None]:
    """(first window start, last window start, window seconds) of the society's metrics, if any."""
    sql = (
        "SELECT toUnixTimestamp64Micro(min(window_start)), toUnixTimestamp64Micro(max(window_start)), "
        "toUnixTimestamp64Micro(any(window_end)) - toUnixTimestamp64Micro(any(window_start)), count() "
        f"FROM metrics WHERE society = {quote(society)} AND metric = 'events_total'"
    )
    first, last, width, n = run_query(settings, sql).rows[0]
    if not n:
        return None, None, None
    return int(first), int(last), int(width) / 1e6


_ENVELOPE = (
    "type, toString(event_id), schema_version, society, actor, toUnixTimestamp64Micro(occurred_at), "
    "causation_id, body"
)


def _clickhouse_order(event_id: UUID) -> bytes:
    """What orders equal times as ClickHouse's ``ORDER BY occurred_at, event_id`` does (the order exports
    and forks have always had): ClickHouse compares a UUID's second 8 bytes before its first."""
    raw = event_id.bytes
    return raw[8:] + raw[:8]


def iter_events(
    settings: Settings, society: str, since: datetime | None = None, until: datetime | None = None
) -> Iterator[Event]:
    """The society's events in event-time order (ties by event id), rebuilt in wire form from the events
    table. Each event type is read in pages along the table's own order (``export_rows.iter_keyset``) and
    put in time order by a sort on disk (``SortedSpill``): the cost of a page does not grow with the
    history, nor memory with its length."""
    spill = SortedSpill()
    try:
        for etype in count_types(settings, society):
            for etype_, eid, version, soc, actor, us, cause, body in iter_keyset(
                settings, society, etype, _ENVELOPE, _range(since, until)
            ):
                doc: dict[str, Any] = {
                    "event_id": eid,
                    "type": etype_,
                    "schema_version": int(version),
                    "society": soc,
                    "actor": actor,
                    "occurred_at": from_us(int(us)).strftime("%Y-%m-%dT%H:%M:%S.%fZ"),
                    "causation_id": cause or None,
                    "body": orjson.loads(body),
                }
                spill.add(int(us), _clickhouse_order(UUID(str(eid))), orjson.dumps(doc))
        for raw in spill:
            yield EVENT_ADAPTER.validate_json(raw, strict=True)
    finally:
        spill.close()


def export_society(
    settings: Settings,
    society: str,
    out: Path,
    *,
    since: datetime | None = None,
    until: datetime | None = None,
    on_event: Callable[[int], None] = lambda n: None,
) -> ArchiveHeader:
    """Write the archive of ``society`` to ``out`` (``.jsonl.gz``, ``.jsonl`` or ``.parquet``)."""
    total = count_events(settings, society, since, until)
    first, last, width = (
        society_span(settings, society) if since is None and until is None else (None, None, None)
    )
    header = ArchiveHeader(
        society=society, events=total, origin_us=first, last_window_us=last, window_seconds=width
    )

    def counted() -> Iterator[Event]:
        for i, ev in enumerate(iter_events(settings, society, since, until), start=1):
            if i % 5000 == 0:
                on_event(i)
            yield ev

    out.parent.mkdir(parents=True, exist_ok=True)
    n = write_archive(out, header, counted())
    on_event(n)
    return header
