"""Kafka records -> table rows: the sink's tables, their columns, and where each topic's records go.

The row builders are pure functions of the records (no clock, no I/O except for a record without a
timestamp), so a batch rebuilt for a retry yields the same rows and the same deduplication token.
Connecting and the schema are the access layer's (``warehouse.client``, ``warehouse.schema``).
"""

from __future__ import annotations

import functools
import re
import uuid
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Protocol

import orjson

from molt_society.runtime import kafka
from molt_society.runtime.record_auth import UNAUTHENTICATED
from molt_society.schemas import topics
from molt_society.schemas.control import from_us
from molt_society.schemas.event_columns import COLUMNS as EVENT_COLUMNS_OF
from molt_society.schemas.event_columns import EMPTY, INT_COLUMNS, TYPED_COLUMNS, Const, Source
from molt_society.schemas.events import require_event_time

EVENTS_TABLE = "events"
METRICS_TABLE = "metrics"
DEAD_LETTERS_TABLE = "dead_letters"

EVENT_COLUMNS: tuple[str, ...] = (
    "event_id",
    "society",
    "type",
    "schema_version",
    "actor",
    "occurred_at",
    "causation_id",
    *TYPED_COLUMNS,  # each event type's, as schemas.event_columns declares them
    "body",
    "_topic",
    "_partition",
    "_offset",
)
METRIC_COLUMNS: tuple[str, ...] = (
    "metric_id",
    "society",
    "metric",
    "window_start",
    "window_end",
    "dim",
    "value",
    "emitted_at",
    "_topic",
    "_partition",
    "_offset",
)
DEAD_LETTER_COLUMNS: tuple[str, ...] = (
    "society",
    "received_at",
    "code",
    "reason",
    "origin_topic",
    "origin_partition",
    "origin_offset",
    "key",
    "value",
    "_topic",
    "_partition",
    "_offset",
)

Check = Callable[["RecordLike"], str | None]
"""Why a record is not the stack's own (``runtime.record_auth.RecordKeys.problem``), None when it is."""

SINK_REJECT_CODE = "sink_undecodable"
"""Dead-letter code of a record of the events or metrics topic that the sink could not turn into a row."""


class RecordLike(Protocol):
    """What the row builders read from a record: the attributes of aiokafka's ``ConsumerRecord``."""

    @property
    def topic(self) -> str: ...
    @property
    def partition(self) -> int: ...
    @property
    def offset(self) -> int: ...
    @property
    def key(self) -> bytes | None: ...
    @property
    def value(self) -> bytes | None: ...
    @property
    def headers(self) -> Sequence[tuple[str, bytes]]: ...


# --- records -> rows -------------------------------------------------------------------------------------


def is_control(record: RecordLike) -> bool:
    """True for a control record (a watermark) travelling among events; it is never stored."""
    return kafka.is_watermark(record.headers)


def _text(value: bytes | None) -> str:
    return value.decode("utf-8", errors="replace") if value is not None else ""


def _str(value: Any) -> str:
    return "" if value is None else str(value)


def _storable(t: datetime, what: str) -> datetime:
    """``t`` in UTC when the event contract admits it (``schemas.events.require_event_time``: zoned, 1970
    to 2200, which ClickHouse's DateTime64 holds); ``ValueError`` naming ``what`` otherwise, so the record
    is dead-lettered with that reason instead of failing the whole batch's insert (a forged 0001-01-01
    stopped storage for a minute)."""
    try:
        return require_event_time(t)
    except ValueError as exc:
        raise ValueError(f"{what}: {exc}") from None


def _received_at(record: RecordLike) -> datetime:
    ts = getattr(record, "timestamp", None)
    if isinstance(ts, int) and ts >= 0:
        return datetime.fromtimestamp(ts / 1000, UTC)
    return datetime.now(UTC)


def society_of_topic(topic: str) -> str:
    """The society of a ``society.<name>.<role>`` topic (the topic itself when it has another form)."""
    if topic.startswith("society.") and topic.count(".") >= 2:
        return topic[len("society.") : topic.rindex(".")]
    return topic


IDENTITY_SQL: dict[str, str] = {
    EVENTS_TABLE: "toString(event_id)",
    METRICS_TABLE: "min(toString(metric_id))",  # a metrics record carries a list: its smallest id
    DEAD_LETTERS_TABLE: "value",
}
"""Per table, the SQL expression that identifies a stored row; ``record_identity`` computes the same."""


def record_identity(table: str, record: RecordLike) -> str:
    """What identifies ``record`` once stored in ``table`` (``IDENTITY_SQL``); ``''`` if undecodable.

    Events and metrics are identified by their id, dead letters (and records the sink rejected) by their
    value text. Used to check that the record at a stored offset is still the one that was stored there.
    """
    if table == DEAD_LETTERS_TABLE:
        return _text(record.value)
    try:
        doc = orjson.loads(record.value or b"")
        if table == METRICS_TABLE:
            docs = doc if isinstance(doc, list) else [doc]
            return min(str(uuid.UUID(d["metric_id"])) for d in docs)
        return str(uuid.UUID(doc["event_id"]))
    except (ValueError, KeyError, TypeError, AttributeError):
        return ""


def reject_row(record: RecordLike, reason: str, code: str = SINK_REJECT_CODE) -> list[Any]:
    """A ``dead_letters`` row for a record of the events/metrics topics that cannot become a row."""
    return [
        society_of_topic(record.topic),
        _received_at(record),
        code,
        reason,
        record.topic,
        record.partition,
        record.offset,
        _text(record.key),
        _text(record.value),
        record.topic,
        record.partition,
        record.offset,
    ]


_UUID_TEXT = re.compile(r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}")


def uuid_int(text: Any) -> int:
    """``uuid.UUID(text).int``, raising what it raises: the 128-bit value a UUID column stores (the
    insert writes an int as it writes a ``UUID``). The usual hyphenated form without building a ``UUID``:
    a replay stores one per event and per metric row."""
    if isinstance(text, str) and _UUID_TEXT.fullmatch(text):
        return int(text.replace("-", ""), 16)
    return uuid.UUID(text).int


Filler = Callable[[dict[str, Any]], list[Any]]


def _filler(spec: dict[str, Source]) -> Filler:
    """The typed columns (``TYPED_COLUMNS``, in order) of an event type declared as ``spec``."""
    consts: list[tuple[int, str | int]] = []
    fields: list[tuple[int, str, bool, bool]] = []  # index, body field, optional, an int column
    for column, source in spec.items():
        i = TYPED_COLUMNS.index(column)
        if isinstance(source, Const):
            consts.append((i, source.value))
        else:
            fields.append((i, source.name, source.optional, column in INT_COLUMNS))
    base = list(EMPTY)
    for i, value in consts:
        base[i] = value

    def fill(body: dict[str, Any]) -> list[Any]:
        row = base.copy()
        for i, name, optional, numeric in fields:
            value = body.get(name) if optional else body[name]
            if value is not None:
                row[i] = int(value) if numeric else value if type(value) is str else str(value)
        return row

    return fill


_FILLERS: dict[str, Filler] = {etype: _filler(spec) for etype, spec in EVENT_COLUMNS_OF.items()}


def event_row(record: RecordLike) -> list[Any]:
    """The ``events`` row of one event record (columns ``EVENT_COLUMNS``; the typed ones as
    ``schemas.event_columns`` declares them for its type). Raises on an undecodable value or an event type
    that is not declared."""
    if record.value is None:
        raise ValueError("record has no value")
    doc = orjson.loads(record.value)
    body = doc.get("body") or {}
    etype = doc["type"]
    fill = _FILLERS.get(etype)
    if fill is None:
        raise ValueError(f"event type {etype!r} has no columns declared (schemas.event_columns)")
    return [
        uuid_int(doc["event_id"]),
        doc["society"],
        etype,
        int(doc.get("schema_version") or 1),
        doc["actor"],
        _storable(datetime.fromisoformat(doc["occurred_at"]), "occurred_at"),
        _str(doc.get("causation_id")),
        *fill(body),
        orjson.dumps(body).decode(),
        record.topic,
        record.partition,
        record.offset,
    ]


def metric_rows(record: RecordLike) -> list[list[Any]]:
    """The ``metrics`` rows of one metric record (columns ``METRIC_COLUMNS``). Raises if undecodable.

    A record holds one ``MetricEvent`` or a JSON array of them (the aggregator sends one array per metric
    and window).
    """
    if record.value is None:
        raise ValueError("record has no value")
    doc = orjson.loads(record.value)
    docs = doc if isinstance(doc, list) else [doc]
    # the values of one record share their window and emission time: each converted once
    times: dict[tuple[str, Any], datetime] = {}

    def window(what: str, us: Any) -> datetime:
        if (t := times.get((what, us))) is None:
            t = times[(what, us)] = _storable(from_us(int(us)), what)
        return t

    def emitted(at: Any) -> datetime:
        if (t := times.get(("emitted_at", at))) is None:
            t = times[("emitted_at", at)] = _storable(datetime.fromtimestamp(float(at), UTC), "emitted_at")
        return t

    return [
        [
            uuid_int(d["metric_id"]),
            d["society"],
            d["metric"],
            window("window_start", d["window_start_us"]),
            window("window_end", d["window_end_us"]),
            _str(d.get("dim")),
            float(d["value"]),
            emitted(d["emitted_at"]),
            record.topic,
            record.partition,
            record.offset,
        ]
        for d in docs
    ]


def dead_letter_row(record: RecordLike) -> list[Any]:
    """The ``dead_letters`` row of one dead-letter record (columns ``DEAD_LETTER_COLUMNS``); never raises.

    The value is the rejected bytes as text (invalid UTF-8 replaced); reason, code and origin come from the
    ``dlq-*`` headers (``''`` / ``-1`` when missing); the key is the record key, else the origin-key header.
    """
    headers = {k: v for k, v in record.headers or ()}

    def header_int(name: str) -> int:
        try:
            return int(_text(headers.get(name)))
        except ValueError:
            return -1

    key = _text(record.key) if record.key is not None else _text(headers.get(topics.DLQ_KEY))
    return [
        society_of_topic(record.topic),
        _received_at(record),
        _text(headers.get(topics.DLQ_CODE)),
        _text(headers.get(topics.DLQ_REASON)),
        _text(headers.get(topics.DLQ_TOPIC)),
        header_int(topics.DLQ_PARTITION),
        header_int(topics.DLQ_OFFSET),
        key,
        _text(record.value),
        record.topic,
        record.partition,
        record.offset,
    ]


_UNDECODABLE = (ValueError, KeyError, TypeError, AttributeError, OverflowError, orjson.JSONDecodeError)


def _build(
    records: Iterable[RecordLike],
    build: Any,
    rejects: list[list[Any]] | None,
    skip_control: bool,
    many: bool = False,
    check: Check | None = None,
) -> list[list[Any]]:
    rows: list[list[Any]] = []
    for record in records:
        forged = check(record) if check is not None else None
        if forged is not None:
            if rejects is None:
                raise ValueError(f"{record.topic}:{record.partition}:{record.offset}: {forged}")
            rejects.append(reject_row(record, forged, UNAUTHENTICATED))
            continue
        if skip_control and is_control(record):
            continue
        try:
            built = build(record)
            if many:
                rows.extend(built)
            else:
                rows.append(built)
        except _UNDECODABLE as exc:
            if rejects is None:
                raise ValueError(f"{record.topic}:{record.partition}:{record.offset}: {exc!r}") from exc
            rejects.append(reject_row(record, f"sink could not decode the record: {exc!r}"))
    return rows


def rows_for_events(
    records: Iterable[RecordLike], rejects: list[list[Any]] | None = None, check: Check | None = None
) -> list[list[Any]]:
    """``events`` rows of event records, in record order; watermark control records are skipped.

    A record that is not a decodable event, or that ``check`` finds is not the stack's own (its reason),
    raises ``ValueError``, unless ``rejects`` is given: then its ``dead_letters`` row is appended there
    instead (code ``sink_undecodable`` or ``unauthenticated``).
    """
    return _build(records, event_row, rejects, skip_control=True, check=check)


def rows_for_metrics(
    records: Iterable[RecordLike], rejects: list[list[Any]] | None = None, check: Check | None = None
) -> list[list[Any]]:
    """``metrics`` rows of metric records (``schemas.control.MetricEvent``); errors as ``rows_for_events``."""
    return _build(records, metric_rows, rejects, skip_control=True, many=True, check=check)


def rows_for_dead_letters(records: Iterable[RecordLike]) -> list[list[Any]]:
    """``dead_letters`` rows of the records of a dead-letter topic, in record order."""
    return [dead_letter_row(r) for r in records]


# --- topics -> tables ------------------------------------------------------------------------------------

RowBuilder = Callable[[Sequence[RecordLike], list[list[Any]]], list[list[Any]]]
"""Rows of a batch of records; the rows of records that cannot be decoded go to the second argument."""


@dataclass(frozen=True)
class Target:
    """Where a topic's records go: the table, its columns, and the builder of its rows."""

    table: str
    columns: tuple[str, ...]
    build: RowBuilder


def _dead_letters(records: Sequence[RecordLike], rejects: list[list[Any]]) -> list[list[Any]]:
    return rows_for_dead_letters(records)  # a dead letter is never rejected


def targets(society: str, check: Check | None = None) -> dict[str, Target]:
    """The topics the sink of ``society`` consumes, each with its ``Target``; ``check`` (the society's
    ``RecordKeys.problem``) keeps events and metrics not signed by the stack out of the tables."""
    tables = {
        topics.Role.EVENTS: Target(
            EVENTS_TABLE, EVENT_COLUMNS, functools.partial(rows_for_events, check=check)
        ),
        topics.Role.METRICS: Target(
            METRICS_TABLE, METRIC_COLUMNS, functools.partial(rows_for_metrics, check=check)
        ),
        topics.Role.DEADLETTER: Target(DEAD_LETTERS_TABLE, DEAD_LETTER_COLUMNS, _dead_letters),
    }
    return {topics.topic_name(society, role): target for role, target in tables.items()}
