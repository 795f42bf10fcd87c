"""Every event type walked through the stream processor and the sink: a type the processor has no handler
for, or whose typed columns are not declared (schemas.event_columns), fails here instead of being stored
with silently empty columns."""

from __future__ import annotations

import re
import typing
import uuid
from pathlib import Path
from typing import Any

import pytest
from test_events import AT, EID, sample_events

from molt_society.schemas.event_columns import COLUMNS, EMPTY, INT_COLUMNS, TYPED_COLUMNS, Const, Field
from molt_society.schemas.events import EVENT_TYPES, CommentCreated, CommentCreatedBody, Event
from molt_society.schemas.wire import encode_event
from molt_society.sinks import clickhouse
from molt_society.sinks.clickhouse import EVENT_COLUMNS, event_row
from molt_society.streams.partition_state import Accepted, PartitionState

TABLES_SQL = Path(clickhouse.__file__).resolve().parents[1] / "warehouse" / "tables.sql"
HOUR_US = 3600 * 10**6


class _Record:
    def __init__(self, value: bytes, offset: int) -> None:
        self.value, self.topic, self.partition, self.offset = value, "s.events", 0, offset
        self.key, self.timestamp, self.headers = None, 0, ()


def _union_members() -> list[Any]:
    union = typing.get_args(Event)[0]
    return list(typing.get_args(union))


def _walk() -> list[Event]:
    """One event of every type, in an order the processor accepts (the reply's parent comes first)."""
    events = sample_events()
    parent = CommentCreated(
        event_id=uuid.UUID(int=EID.int + 100),
        society="soc-1",
        actor="agent-000002",
        occurred_at=AT,
        body=CommentCreatedBody(comment_id="comment-1", post_id="post-1", depth=1, content="first"),
    )
    at = next(i for i, e in enumerate(events) if e.type == "comment_created")
    return [*events[:at], parent, *events[at:]]


def test_every_event_type_is_declared_once_and_its_fields_exist() -> None:
    assert set(COLUMNS) == set(EVENT_TYPES)
    members = {m.model_fields["type"].default: m for m in _union_members()}
    assert set(members) == set(EVENT_TYPES)
    for etype, spec in COLUMNS.items():
        assert set(spec) <= set(TYPED_COLUMNS), etype
        body = members[etype].model_fields["body"].annotation
        for source in spec.values():
            if isinstance(source, Field):
                assert source.name in body.model_fields, f"{etype}: its body has no field {source.name!r}"


def test_the_typed_columns_are_the_tables_in_order() -> None:
    start = EVENT_COLUMNS.index(TYPED_COLUMNS[0])
    assert EVENT_COLUMNS[start : start + len(TYPED_COLUMNS)] == TYPED_COLUMNS
    sql = TABLES_SQL.read_text()
    events_table = sql[sql.index("CREATE TABLE IF NOT EXISTS events") :].split(")\nENGINE", 1)[0]
    declared = re.findall(r"^\s+(\w+)\s+\S", events_table, flags=re.MULTILINE)
    assert [c for c in declared if c in TYPED_COLUMNS] == list(TYPED_COLUMNS)


def test_the_processor_has_a_handler_for_every_body() -> None:
    bodies = {m.model_fields["body"].annotation for m in _union_members()}
    assert bodies == set(PartitionState._BY_BODY)


def test_every_event_type_goes_through_the_processor_and_fills_its_declared_columns() -> None:
    state = PartitionState(
        0, 1, window_us=HOUR_US, feed_size=5, max_event_bytes=65536, max_future_us=300 * 10**6
    )
    now = int(AT.timestamp() * 10**6) + HOUR_US
    walked = _walk()
    assert {e.type for e in walked} == set(EVENT_TYPES)
    rows: dict[str, list[Any]] = {}
    for offset, ev in enumerate(walked):
        raw = encode_event(ev)
        out = state.accept_action(raw, now)
        assert isinstance(out, Accepted), (ev.type, out)
        row = event_row(_Record(raw, offset))
        assert len(row) == len(EVENT_COLUMNS)
        typed = dict(zip(TYPED_COLUMNS, row[EVENT_COLUMNS.index(TYPED_COLUMNS[0]) :], strict=False))
        for i, column in enumerate(TYPED_COLUMNS):
            source = COLUMNS[ev.type].get(column)
            if source is None:
                expected: Any = EMPTY[i]
            elif isinstance(source, Const):
                expected = source.value
            else:
                value = getattr(ev.body, source.name)
                expected = EMPTY[i] if value is None else int(value) if column in INT_COLUMNS else value
            assert typed[column] == expected, (ev.type, column)
        rows[ev.type] = row
    # read off the events by hand, not through the declaration
    col = {c: EVENT_COLUMNS.index(c) for c in EVENT_COLUMNS}
    post = rows["post_created"]
    assert (post[col["post_id"]], post[col["submolt"]], post[col["title"]]) == (
        "post-1",
        "general",
        "Hello ünïcode 🦀",
    )
    reply = rows["comment_created"]
    assert (reply[col["comment_id"]], reply[col["parent_id"]], reply[col["depth"]]) == (
        "comment-2",
        "comment-1",
        2,
    )
    assert rows["vote_cast"][col["vote"]] == -1
    banned = rows["agent_banned"]
    assert (banned[col["target_type"]], banned[col["target_id"]]) == ("agent", "agent-000009")
    assert rows["agent_followed"][col["post_id"]] == ""


def test_an_undeclared_event_type_is_an_error_not_an_empty_row(monkeypatch: pytest.MonkeyPatch) -> None:
    raw = encode_event(next(e for e in sample_events() if e.type == "vote_cast"))
    fillers = {k: v for k, v in clickhouse._FILLERS.items() if k != "vote_cast"}
    monkeypatch.setattr(clickhouse, "_FILLERS", fillers)
    with pytest.raises(ValueError, match="'vote_cast' has no columns declared"):
        event_row(_Record(raw, 0))
