"""Test helper: store events in a real chDB through the sink's own row builders."""

from __future__ import annotations

from typing import Any, NamedTuple

from molt_society.schemas.events import Event
from molt_society.schemas.wire import encode_event
from molt_society.sinks.clickhouse import EVENT_COLUMNS, EVENTS_TABLE, rows_for_events
from molt_society.warehouse.client import connect
from molt_society.warehouse.schema import ensure_schema


class Rec(NamedTuple):
    topic: str
    partition: int
    offset: int
    key: bytes | None
    value: bytes
    headers: list[tuple[str, bytes]]
    timestamp: int


def store_events(client: Any, events: list[Event]) -> None:
    """Insert ``events`` (any societies) into the ``events`` table as the sink would."""
    recs = [
        Rec(f"society.{e.society}.events", 0, i, None, encode_event(e), [], 0) for i, e in enumerate(events)
    ]
    for start in range(0, len(recs), 50_000):
        client.insert(
            EVENTS_TABLE, rows_for_events(recs[start : start + 50_000]), column_names=list(EVENT_COLUMNS)
        )


def open_chdb(path: str) -> Any:
    """A chDB client on ``path`` with the schema applied (close it before opening another path)."""
    client = connect(f"chdb://{path}")
    ensure_schema(client)
    return client
