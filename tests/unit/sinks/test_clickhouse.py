"""Row builders of the sink: Kafka records -> ClickHouse column lists, on hand-made records."""

from __future__ import annotations

import random
import uuid
from datetime import UTC, datetime
from typing import Any, NamedTuple

import orjson
import pytest

from molt_society.schemas.control import MetricEvent, metric_id, to_us
from molt_society.schemas.events import (
    AgentFollowed,
    AgentFollowedBody,
    AgentRegistered,
    AgentRegisteredBody,
    AgentSubscribed,
    AgentSubscribedBody,
    CommentCreated,
    CommentCreatedBody,
    Event,
    PostCreated,
    PostCreatedBody,
    SubmoltCreated,
    SubmoltCreatedBody,
    VoteCast,
    VoteCastBody,
)
from molt_society.schemas.ids import uuid7
from molt_society.schemas.topics import (
    DLQ_CODE,
    DLQ_KEY,
    DLQ_OFFSET,
    DLQ_PARTITION,
    DLQ_REASON,
    DLQ_TOPIC,
    HEADER_KIND,
    KIND_WATERMARK,
)
from molt_society.schemas.wire import encode_event
from molt_society.sinks.clickhouse import (
    DEAD_LETTER_COLUMNS,
    EVENT_COLUMNS,
    METRIC_COLUMNS,
    METRICS_TABLE,
    SINK_REJECT_CODE,
    record_identity,
    rows_for_dead_letters,
    rows_for_events,
    rows_for_metrics,
    society_of_topic,
    uuid_int,
)
from molt_society.warehouse.schema import schema_statements

TOPIC = "society.s1.events"
AT = datetime(2026, 1, 28, 12, 30, 45, 123456, tzinfo=UTC)


class Record(NamedTuple):
    topic: str
    partition: int
    offset: int
    key: bytes | None
    value: bytes | None
    headers: list[tuple[str, bytes]]
    timestamp: int | None = None


def _record(value: bytes | None, offset: int = 7, headers: list[tuple[str, bytes]] | None = None) -> Record:
    return Record(TOPIC, 2, offset, b"k", value, headers or [])


def _envelope() -> dict[str, Any]:
    return {"event_id": uuid7(AT), "society": "s1", "actor": "agent-1", "occurred_at": AT}


def _row(event: Event) -> dict[str, Any]:
    rows = rows_for_events([_record(encode_event(event))])
    assert len(rows) == 1
    assert len(rows[0]) == len(EVENT_COLUMNS)
    return dict(zip(EVENT_COLUMNS, rows[0], strict=True))


def _blank(row: dict[str, Any], *except_: str) -> None:
    """Every type-specific column not in ``except_`` is empty."""
    optional = EVENT_COLUMNS[EVENT_COLUMNS.index("post_id") : EVENT_COLUMNS.index("content") + 1]
    for name in optional:
        if name not in except_:
            assert row[name] in ("", 0), name


def test_envelope_columns() -> None:
    env = _envelope()
    event = AgentRegistered(
        **env, causation_id="p-9", body=AgentRegisteredBody(name="Ada", persona="curious")
    )
    row = _row(event)
    assert row["event_id"] == env["event_id"].int  # the column's 128 bits
    assert row["society"] == "s1"
    assert row["type"] == "agent_registered"
    assert row["schema_version"] == 1
    assert row["actor"] == "agent-1"
    assert row["occurred_at"] == AT
    assert row["occurred_at"].tzinfo is not None
    assert row["causation_id"] == "p-9"
    assert orjson.loads(row["body"]) == {
        "name": "Ada",
        "brain": "stochastic",
        "model": None,
        "persona": "curious",
    }
    assert (row["_topic"], row["_partition"], row["_offset"]) == (TOPIC, 2, 7)
    _blank(row)


def test_post_created() -> None:
    body = PostCreatedBody(post_id="p1", submolt="general", title="Hello", content="world")
    row = _row(PostCreated(**_envelope(), body=body))
    assert (row["post_id"], row["submolt"], row["title"], row["content"]) == (
        "p1",
        "general",
        "Hello",
        "world",
    )
    assert row["causation_id"] == ""
    _blank(row, "post_id", "submolt", "title", "content")


@pytest.mark.parametrize(("parent", "depth"), [(None, 1), ("c0", 3)])
def test_comment_created(parent: str | None, depth: int) -> None:
    body = CommentCreatedBody(comment_id="c1", post_id="p1", parent_id=parent, depth=depth, content="hi")
    row = _row(CommentCreated(**_envelope(), body=body))
    assert row["post_id"] == "p1"
    assert row["comment_id"] == "c1"
    assert row["parent_id"] == (parent or "")
    assert row["depth"] == depth
    assert row["content"] == "hi"
    _blank(row, "post_id", "comment_id", "parent_id", "depth", "content")


@pytest.mark.parametrize(("target_type", "target_id", "value"), [("post", "p1", 1), ("comment", "c1", -1)])
def test_vote_cast(target_type: str, target_id: str, value: int) -> None:
    body = VoteCastBody(target_type=target_type, target_id=target_id, post_id="p1", value=value)  # type: ignore[arg-type]
    row = _row(VoteCast(**_envelope(), body=body))
    assert (row["post_id"], row["target_type"], row["target_id"], row["vote"]) == (
        "p1",
        target_type,
        target_id,
        value,
    )
    _blank(row, "post_id", "target_type", "target_id", "vote")


def test_submolt_created_and_subscribed() -> None:
    row = _row(
        SubmoltCreated(**_envelope(), body=SubmoltCreatedBody(submolt="m1", title="Molt", description="d"))
    )
    assert row["submolt"] == "m1"
    assert orjson.loads(row["body"])["description"] == "d"
    _blank(row, "submolt")
    row = _row(AgentSubscribed(**_envelope(), body=AgentSubscribedBody(submolt="m1")))
    assert row["submolt"] == "m1"
    _blank(row, "submolt")


def test_agent_followed_keeps_target_in_body() -> None:
    row = _row(AgentFollowed(**_envelope(), body=AgentFollowedBody(target_agent="agent-2")))
    assert orjson.loads(row["body"]) == {"target_agent": "agent-2"}
    _blank(row)


def test_watermarks_skipped_order_kept() -> None:
    a = PostCreated(**_envelope(), body=PostCreatedBody(post_id="p1", submolt="m", title="a"))
    b = PostCreated(**_envelope(), body=PostCreatedBody(post_id="p2", submolt="m", title="b"))
    mark = orjson.dumps({"producer": "x", "producers": ["x"], "watermark_us": 1, "tick": 1})
    records = [
        _record(mark, 1, [(HEADER_KIND, KIND_WATERMARK)]),
        _record(encode_event(a), 2),
        _record(mark, 3, [("other", b"1"), (HEADER_KIND, KIND_WATERMARK)]),
        _record(encode_event(b), 4),
    ]
    rows = rows_for_events(records)
    assert [r[EVENT_COLUMNS.index("post_id")] for r in rows] == ["p1", "p2"]
    assert [r[EVENT_COLUMNS.index("_offset")] for r in rows] == [2, 4]
    assert rows_for_events(records[:1]) == []


def test_undecodable_event_raises_or_is_rejected() -> None:
    bad = [_record(b"{not json", 5), _record(b'{"type": "post_created"}', 6), _record(None, 8)]
    with pytest.raises(ValueError, match=r"society\.s1\.events:2:5"):
        rows_for_events(bad[:1])
    rejects: list[list[Any]] = []
    assert rows_for_events(bad, rejects) == []
    assert len(rejects) == 3
    first = dict(zip(DEAD_LETTER_COLUMNS, rejects[0], strict=True))
    assert first["code"] == SINK_REJECT_CODE
    assert (first["origin_topic"], first["origin_partition"], first["origin_offset"]) == (TOPIC, 2, 5)
    assert (first["_topic"], first["_partition"], first["_offset"]) == (TOPIC, 2, 5)
    assert first["value"] == "{not json"
    assert first["society"] == "s1"


def test_metric_rows() -> None:
    start, end = AT, datetime(2026, 1, 28, 13, 30, 45, 123456, tzinfo=UTC)
    event: MetricEvent = {
        "metric_id": metric_id("s1", "active_agents", to_us(start), ""),
        "society": "s1",
        "metric": "active_agents",
        "window_start_us": to_us(start),
        "window_end_us": to_us(end),
        "dim": "",
        "value": 42.0,
        "emitted_at": 1_769_600_000.25,
    }
    rec = Record("society.s1.metrics", 0, 11, b"active_agents", orjson.dumps(event), [])
    rows = rows_for_metrics([rec])
    row = dict(zip(METRIC_COLUMNS, rows[0], strict=True))
    assert row["metric_id"] == uuid.UUID(event["metric_id"]).int
    assert (row["society"], row["metric"], row["dim"], row["value"]) == ("s1", "active_agents", "", 42.0)
    assert row["window_start"] == start
    assert row["window_end"] == end
    assert row["emitted_at"] == datetime(2026, 1, 28, 11, 33, 20, 250000, tzinfo=UTC)
    assert (row["_topic"], row["_partition"], row["_offset"]) == ("society.s1.metrics", 0, 11)


def test_dead_letter_headers_mapped() -> None:
    headers = [
        (DLQ_REASON, b"malformed JSON: unexpected character"),
        (DLQ_CODE, b"malformed_json"),
        (DLQ_TOPIC, b"society.my.soc.actions"),
        (DLQ_PARTITION, b"3"),
        (DLQ_OFFSET, b"1234"),
    ]
    rec = Record("society.my.soc.deadletter", 0, 9, b"post-1", b"{bad \xff", headers, 1_769_600_000_250)
    row = dict(zip(DEAD_LETTER_COLUMNS, rows_for_dead_letters([rec])[0], strict=True))
    assert row["society"] == "my.soc"
    assert row["received_at"] == datetime(2026, 1, 28, 11, 33, 20, 250000, tzinfo=UTC)
    assert row["code"] == "malformed_json"
    assert row["reason"] == "malformed JSON: unexpected character"
    assert (row["origin_topic"], row["origin_partition"], row["origin_offset"]) == (
        "society.my.soc.actions",
        3,
        1234,
    )
    assert row["key"] == "post-1"
    assert row["value"] == "{bad \ufffd"
    assert (row["_topic"], row["_partition"], row["_offset"]) == ("society.my.soc.deadletter", 0, 9)


def test_dead_letter_missing_headers() -> None:
    rec = Record("society.s1.deadletter", 0, 1, None, None, [(DLQ_KEY, b"agent:a1")])
    row = dict(zip(DEAD_LETTER_COLUMNS, rows_for_dead_letters([rec])[0], strict=True))
    assert (row["code"], row["reason"], row["origin_topic"]) == ("", "", "")
    assert (row["origin_partition"], row["origin_offset"]) == (-1, -1)
    assert row["key"] == "agent:a1"
    assert row["value"] == ""
    assert row["received_at"].tzinfo is not None


def test_society_of_topic() -> None:
    assert society_of_topic("society.demo.events") == "demo"
    assert society_of_topic("society.a.b.deadletter") == "a.b"
    assert society_of_topic("other") == "other"


def test_schema_statements() -> None:
    statements = schema_statements()
    assert len(statements) == 32
    created = [
        next(line for line in s.splitlines() if line.startswith("CREATE")).split()[:6] for s in statements
    ]
    assert [c[2:6] for c in created[:5]] == [
        ["IF", "NOT", "EXISTS", name]
        for name in ("events", "metrics", "dead_letters", "threads", "metric_latest")
    ]
    # model_calls and the diagnostics views are replaced by their current definition at each start; the
    # embeddings they use are data, kept
    diagnostics = [
        "model_calls", "agents", "subscriptions", "interaction_edges", "activity_daily",
        "lexical_turnover_daily", "texts", "embeddings",
        "semantic_daily", "cascade_adoptions_sample", "cascade_adoptions", "cascades", "cascade_exposures",
        "cooperation_threads",
        "cooperation_events", "cooperation_baseline", "cooperation_md_events", "cooperation_single_agent",
        "superminds_posts",
        "superminds_depth_by_popularity", "rhythm_agents", "rhythm_platform", "clone_items", "clone_sets",
        "clone_pairs_at", "clone_pairs",
    ]  # fmt: skip
    assert [c[:5] for c in created[5:-1]] == [
        ["CREATE", "TABLE", "IF", "NOT", "EXISTS"]
        if name == "embeddings"
        else ["CREATE", "OR", "REPLACE", "VIEW", name]
        for name in diagnostics
    ]
    # last, the experiments table (society experiment), which only the runner writes, row by row
    assert created[-1] == ["CREATE", "TABLE", "IF", "NOT", "EXISTS", "experiments"]
    for s in statements:
        assert s.startswith("--")
        if "CREATE TABLE" in s and "EXISTS experiments" not in s:
            # the sink's tables: its inserts carry deduplication tokens, honoured only with this window
            assert "non_replicated_deduplication_window = 1000" in s


def test_metric_rows_from_an_array_record() -> None:
    """The aggregator sends one JSON array per metric and window: one row per element, same offset."""
    start = AT
    events: list[MetricEvent] = [
        {
            "metric_id": metric_id("s1", "depth_hist", to_us(start), str(d)),
            "society": "s1",
            "metric": "depth_hist",
            "window_start_us": to_us(start),
            "window_end_us": to_us(start) + 3_600_000_000,
            "dim": str(d),
            "value": float(10 - d),
            "emitted_at": 1_769_600_000.0,
        }
        for d in range(3)
    ]
    rec = Record("society.s1.metrics", 0, 7, b"depth_hist", orjson.dumps(events), [])
    rows = [dict(zip(METRIC_COLUMNS, r, strict=True)) for r in rows_for_metrics([rec])]
    assert [(r["dim"], r["value"], r["_offset"]) for r in rows] == [
        (str(d), float(10 - d), 7) for d in range(3)
    ]
    assert record_identity(METRICS_TABLE, rec) == min(e["metric_id"] for e in events)


@pytest.mark.parametrize(
    "occurred_at",
    ["0001-01-01T00:00:00Z", "0001-01-01T00:00:00+01:00", "9999-12-31T23:59:59Z", "1969-12-31T23:59:59Z",
     "2026-01-28T00:00:00"],
)  # fmt: skip
def test_an_event_time_clickhouse_cannot_store_is_dead_lettered_not_inserted(
    occurred_at: str, tmp_path: Any
) -> None:
    """A record on the events topic with an event time outside the contract's range (a forged
    0001-01-01 failed every insert of its batch for a minute) becomes a dead letter with the reason; the
    valid records of the same batch are stored."""
    from molt_society.warehouse.client import connect
    from molt_society.warehouse.schema import ensure_schema

    good = PostCreated(**_envelope(), body=PostCreatedBody(post_id="p1", submolt="general", title="t"))
    doc = orjson.loads(encode_event(good))
    forged = {**doc, "event_id": str(uuid.uuid4()), "occurred_at": occurred_at}
    rejects: list[list[Any]] = []
    rows = rows_for_events([_record(encode_event(good), 1), _record(orjson.dumps(forged), 2)], rejects)
    assert [r[EVENT_COLUMNS.index("_offset")] for r in rows] == [1]
    assert len(rejects) == 1
    reason = dict(zip(DEAD_LETTER_COLUMNS, rejects[0], strict=True))["reason"]
    assert "occurred_at" in reason
    client = connect(f"chdb://{tmp_path / 'ch'}")
    try:
        ensure_schema(client)
        client.insert("events", rows, column_names=list(EVENT_COLUMNS))
        client.insert("dead_letters", rejects, column_names=list(DEAD_LETTER_COLUMNS))
        assert client.query("SELECT count() FROM events").result_rows == [(1,)]
        assert client.query("SELECT count() FROM dead_letters").result_rows == [(1,)]
    finally:
        client.close()


def _uuid_or_error(text: Any, parse: Any) -> int | str:
    try:
        return int(parse(text))
    except (ValueError, TypeError, AttributeError) as exc:
        return type(exc).__name__


def test_uuid_int_is_uuid_int_and_refuses_what_uuid_refuses() -> None:
    rng = random.Random(5)
    values = [uuid.UUID(int=rng.getrandbits(128)) for _ in range(2_000)] + [uuid.UUID(int=0)]
    forms = [f(u) for u in values for f in (str, lambda u: str(u).upper(), lambda u: u.hex, lambda u: u.urn)]
    good = str(values[1])
    odd: list[Any] = [
        f"{{{good}}}",
        "",
        good[:-1],
        good + "0",
        "+" + good[1:],
        good[:9] + "_" + good[10:],
        good.replace("-", "_"),
        " " + good[1:],
        good[:35] + "g",
        good[:35] + "\u0663",  # a digit to int(), not hex to a UUID
        "0x" + good[2:],
        123,
        None,
    ]
    for text in forms + odd:
        assert _uuid_or_error(text, uuid_int) == _uuid_or_error(text, lambda t: uuid.UUID(t).int), text
    assert all(isinstance(_uuid_or_error(t, uuid_int), str) for t in ("", good + "0", 123, None))
