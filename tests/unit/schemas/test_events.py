"""The event contract: models, wire encoding, the decode gate, UUIDv7 ids, partition keys, JSON Schema."""

from __future__ import annotations

import importlib.util
import json
import random
import uuid
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import orjson
import pytest
from pydantic import ValidationError

from molt_society.schemas import control
from molt_society.schemas.events import (
    EVENT_TYPES,
    MAX_JOINED,
    AgentBanned,
    AgentBannedBody,
    AgentFollowed,
    AgentFollowedBody,
    AgentRegistered,
    AgentRegisteredBody,
    AgentsJoined,
    AgentsJoinedBody,
    AgentSubscribed,
    AgentSubscribedBody,
    CommentCreated,
    CommentCreatedBody,
    ContentRemoved,
    ContentRemovedBody,
    Event,
    InterventionApplied,
    InterventionAppliedBody,
    JoinedAgent,
    ModelCalled,
    ModelCalledBody,
    PostCreated,
    PostCreatedBody,
    SubmoltCreated,
    SubmoltCreatedBody,
    VoteCast,
    VoteCastBody,
    VoteTallied,
    VoteTalliedBody,
    partition_key,
    partition_key_of,
)
from molt_society.schemas.ids import uuid7, uuid7_time_ms
from molt_society.schemas.json_schema import event_json_schema
from molt_society.schemas.wire import InvalidEvent, decode_event, encode_event

MAX = 65_536
AT = datetime(2026, 1, 28, 12, 34, 56, 789, tzinfo=UTC)
EID = uuid.UUID("018f2a6b-1c2d-7e3f-8a4b-5c6d7e8f9a0b")
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def _us(value: datetime) -> int:
    return (value - _EPOCH) // timedelta(microseconds=1)


def sample_events() -> list[Event]:
    """One event of every type, with optional fields set to non-defaults where possible."""
    common: dict[str, Any] = {"society": "soc-1", "actor": "agent-000001", "occurred_at": AT}
    return [
        AgentRegistered(
            event_id=uuid.UUID(int=EID.int + 1),
            body=AgentRegisteredBody(name="Molty One", brain="llm", model="m-1", persona="curious crab"),
            **common,
        ),
        SubmoltCreated(
            event_id=uuid.UUID(int=EID.int + 2),
            body=SubmoltCreatedBody(submolt="general", title="General", description="all things"),
            **common,
        ),
        AgentSubscribed(
            event_id=uuid.UUID(int=EID.int + 3), body=AgentSubscribedBody(submolt="general"), **common
        ),
        AgentFollowed(
            event_id=uuid.UUID(int=EID.int + 4),
            causation_id="post-9",
            body=AgentFollowedBody(target_agent="agent-000002"),
            **common,
        ),
        PostCreated(
            event_id=uuid.UUID(int=EID.int + 5),
            body=PostCreatedBody(
                post_id="post-1", submolt="general", title="Hello ünïcode 🦀", content="x" * 500
            ),
            **common,
        ),
        CommentCreated(
            event_id=uuid.UUID(int=EID.int + 6),
            causation_id="comment-1",
            body=CommentCreatedBody(comment_id="comment-2", post_id="post-1", parent_id="comment-1", depth=2),
            **common,
        ),
        VoteCast(
            event_id=uuid.UUID(int=EID.int + 7),
            causation_id="comment-2",
            body=VoteCastBody(target_type="comment", target_id="comment-2", post_id="post-1", value=-1),
            **common,
        ),
        VoteTallied(
            event_id=uuid.UUID(int=EID.int + 8),
            body=VoteTalliedBody(
                target_type="post",
                target_id="post-1",
                post_id="post-1",
                upvotes=12,
                downvotes=3,
                reported_comments=40,
            ),
            **common,
        ),
        ModelCalled(
            event_id=uuid.UUID(int=EID.int + 9),
            body=ModelCalledBody(
                model="smollm2-135m",
                outcome="ok",
                prompt_tokens=310,
                completion_tokens=42,
                latency_ms=1834.5,
                attempts=2,
                decision="comment",
                action_event_id=str(uuid.UUID(int=EID.int + 6)),
            ),
            **common,
        ),
        AgentsJoined(
            event_id=uuid.UUID(int=EID.int + 10),
            body=AgentsJoinedBody(
                agents=(
                    JoinedAgent(agent_id="agent-000001", name="one", subscriptions=("general", "crypto")),
                    JoinedAgent(agent_id="agent-000009", name="nine", brain="llm", model="m", persona="p"),
                )
            ),
            **common,
        ),
        InterventionApplied(
            event_id=uuid.UUID(int=EID.int + 11),
            body=InterventionAppliedBody(
                experiment="exp-1",
                arm="random-feed",
                kind="feed_policy",
                params='{"kind": "feed_policy", "policy": "random"}',
                scope="share:0.5",
            ),
            **{**common, "actor": "experiment"},
        ),
        ContentRemoved(
            event_id=uuid.UUID(int=EID.int + 12),
            body=ContentRemovedBody(
                target_type="comment",
                target_id="comment-2",
                post_id="post-1",
                rule="terms",
                reason="'airdrop'",
            ),
            **{**common, "actor": "moderator"},
        ),
        AgentBanned(
            event_id=uuid.UUID(int=EID.int + 13),
            body=AgentBannedBody(agent_id="agent-000009", rule="ban_top_pagerank", reason="PageRank rank 1"),
            **{**common, "actor": "moderator"},
        ),
    ]


def test_agents_joined_rules() -> None:
    """A cohort is led by its actor, names each agent once, and holds 1 to MAX_JOINED agents."""
    one = JoinedAgent(agent_id="agent-000001", name="one")
    common: dict[str, Any] = {"society": "s", "occurred_at": AT, "event_id": EID}
    AgentsJoined(actor="agent-000001", body=AgentsJoinedBody(agents=(one,)), **common)
    with pytest.raises(ValidationError, match="first agent"):
        AgentsJoined(actor="agent-000002", body=AgentsJoinedBody(agents=(one,)), **common)
    with pytest.raises(ValidationError, match="twice"):
        AgentsJoinedBody(agents=(one, one))
    with pytest.raises(ValidationError):
        AgentsJoinedBody(agents=())
    many = tuple(JoinedAgent(agent_id=f"a{i}", name="n") for i in range(MAX_JOINED + 1))
    with pytest.raises(ValidationError):
        AgentsJoinedBody(agents=many)


def _doc(event: Event) -> dict[str, Any]:
    doc: dict[str, Any] = orjson.loads(encode_event(event))
    return doc


def _raw(doc: Any) -> bytes:
    return orjson.dumps(doc)


def _decode_error(raw: bytes | None, max_bytes: int = MAX) -> InvalidEvent:
    with pytest.raises(InvalidEvent) as info:
        decode_event(raw, max_bytes=max_bytes)
    return info.value


def _comment_doc(**body: Any) -> dict[str, Any]:
    doc = _doc(sample_events()[5])
    doc["body"] = {"comment_id": "c-1", "post_id": "p-1", "depth": 1, **body}
    return doc


# ------------------------------------------------------------------------------------------ round trip
def test_sample_covers_every_event_type() -> None:
    assert sorted(e.type for e in sample_events()) == sorted(EVENT_TYPES)
    assert len(EVENT_TYPES) == 13


@pytest.mark.parametrize("event", sample_events(), ids=lambda e: e.type)
def test_round_trip(event: Event) -> None:
    raw = encode_event(event)
    back = decode_event(raw, max_bytes=MAX)
    assert back == event
    assert type(back) is type(event)
    assert encode_event(back) == raw
    doc = orjson.loads(raw)
    assert doc["type"] == event.type
    assert doc["event_id"] == str(event.event_id)
    assert doc["body"] == event.body.model_dump(mode="json")


def test_round_trip_keeps_microseconds_and_defaults() -> None:
    ev = AgentFollowed(
        event_id=EID,
        society="s",
        actor="a",
        occurred_at=datetime(2026, 2, 1, 0, 0, 0, 1, tzinfo=UTC),
        body=AgentFollowedBody(target_agent="b"),
    )
    back = decode_event(encode_event(ev), max_bytes=MAX)
    assert back.occurred_at == datetime(2026, 2, 1, 0, 0, 0, 1, tzinfo=UTC)
    assert back.schema_version == 1
    assert back.causation_id is None


# ------------------------------------------------------------------------------------------ event time
@pytest.mark.parametrize(
    ("when", "wire"),
    [
        (datetime(2026, 1, 28, 12, 34, 56, 789, tzinfo=UTC), "2026-01-28T12:34:56.000789Z"),
        (datetime(2026, 1, 28, tzinfo=UTC), "2026-01-28T00:00:00.000000Z"),
        (datetime(2025, 12, 31, 23, 59, 59, 999_999, tzinfo=UTC), "2025-12-31T23:59:59.999999Z"),
    ],
)
def test_occurred_at_wire_format(when: datetime, wire: str) -> None:
    ev = AgentSubscribed(event_id=EID, society="s", actor="a", occurred_at=when, body={"submolt": "general"})
    assert _doc(ev)["occurred_at"] == wire


def test_naive_timestamp_rejected_by_model() -> None:
    with pytest.raises(ValidationError) as info:
        AgentSubscribed(
            event_id=EID,
            society="s",
            actor="a",
            occurred_at=datetime(2026, 1, 28, 12, 0, 0),  # naive on purpose
            body={"submolt": "general"},
        )
    assert "time zone" in str(info.value)


@pytest.mark.parametrize(
    "naive", ["2026-01-28T12:00:00", "2026-01-28T12:00:00.123456", "2026-01-28 12:00:00"]
)
def test_naive_timestamp_rejected_on_the_wire(naive: str) -> None:
    doc = _doc(sample_events()[2])
    doc["occurred_at"] = naive
    err = _decode_error(_raw(doc))
    assert err.code == "invalid_fields"
    assert "time zone" in err.reason
    assert "occurred_at" in err.reason


def test_non_utc_offsets_converted_to_utc() -> None:
    doc = _doc(sample_events()[2])
    doc["occurred_at"] = "2026-01-28T02:30:00.5+02:00"
    ev = decode_event(_raw(doc), max_bytes=MAX)
    assert ev.occurred_at == datetime(2026, 1, 28, 0, 30, 0, 500_000, tzinfo=UTC)
    assert ev.occurred_at.utcoffset() == timedelta(0)
    assert _doc(ev)["occurred_at"] == "2026-01-28T00:30:00.500000Z"

    doc["occurred_at"] = "2026-01-27T19:00:00-05:00"
    assert _doc(decode_event(_raw(doc), max_bytes=MAX))["occurred_at"] == "2026-01-28T00:00:00.000000Z"

    india = timezone(timedelta(hours=5, minutes=30))
    ev2 = AgentSubscribed(
        event_id=EID,
        society="s",
        actor="a",
        occurred_at=datetime(2026, 1, 28, 5, 30, tzinfo=india),
        body={"submolt": "general"},
    )
    assert ev2.occurred_at.utcoffset() == timedelta(0)
    assert (ev2.occurred_at.hour, ev2.occurred_at.minute) == (0, 0)
    assert _doc(ev2)["occurred_at"] == "2026-01-28T00:00:00.000000Z"


@pytest.mark.parametrize("value", [1769558400, 1769558400.5, "1769558400"], ids=["int", "float", "digits"])
def test_occurred_at_must_be_an_iso_string(value: Any) -> None:
    """The wire format (and the JSON Schema: string, date-time) is an ISO 8601 string.

    A Unix number is not a UTC timestamp "with a Z"; accepting it lets through bytes that the processor
    publishes as they are and that the ClickHouse sink cannot parse (``datetime.fromisoformat``).
    """
    doc = _doc(sample_events()[3])
    doc["occurred_at"] = value
    err = _decode_error(_raw(doc))
    assert err.code == "invalid_fields"
    assert "occurred_at" in err.reason


# ------------------------------------------------------------------------------------- decode errors
@pytest.mark.parametrize("raw", [b'{"type": ', b"{'type': 'vote_cast'}", b"not json", b""])
def test_malformed_json(raw: bytes) -> None:
    err = _decode_error(raw)
    assert err.code == "malformed_json"
    assert err.reason.startswith("malformed JSON")


@pytest.mark.parametrize(
    ("raw", "kind"), [(b"[1, 2]", "list"), (b'"post"', "str"), (b"42", "int"), (b"null", "None")]
)
def test_not_an_object(raw: bytes, kind: str) -> None:
    err = _decode_error(raw)
    assert err.code == "not_an_object"
    assert kind in err.reason


@pytest.mark.parametrize("etype", ["post_deleted", "", None, 7, "Post_Created"])
def test_unknown_type_lists_known_types(etype: Any) -> None:
    doc = _doc(sample_events()[4])
    doc["type"] = etype
    err = _decode_error(_raw(doc))
    assert err.code == "unknown_type"
    for known in EVENT_TYPES:
        assert known in err.reason


def test_missing_type_is_unknown_type() -> None:
    doc = _doc(sample_events()[4])
    del doc["type"]
    assert _decode_error(_raw(doc)).code == "unknown_type"


def test_missing_body_field_named_by_dotted_path() -> None:
    doc = _comment_doc()
    del doc["body"]["post_id"]
    err = _decode_error(_raw(doc))
    assert err.code == "invalid_fields"
    assert "'body.post_id'" in err.reason
    assert "missing" in err.reason
    assert "comment_created" in err.reason


def test_missing_envelope_field() -> None:
    doc = _doc(sample_events()[0])
    del doc["actor"]
    err = _decode_error(_raw(doc))
    assert err.code == "invalid_fields"
    assert "missing field 'actor'" in err.reason


@pytest.mark.parametrize(
    ("field", "value", "path"),
    [("depth", "deep", "body.depth"), ("depth", [1], "body.depth"), ("content", 5, "body.content")],
)
def test_wrong_type(field: str, value: Any, path: str) -> None:
    err = _decode_error(_raw(_comment_doc(**{field: value})))
    assert err.code == "invalid_fields"
    assert f"'{path}'" in err.reason


def test_wrong_envelope_type() -> None:
    doc = _doc(sample_events()[1])
    doc["event_id"] = "not-a-uuid"
    err = _decode_error(_raw(doc))
    assert err.code == "invalid_fields"
    assert "'event_id'" in err.reason


def test_unknown_extra_fields_rejected() -> None:
    err = _decode_error(_raw(_comment_doc(colour="red")))
    assert err.code == "invalid_fields"
    assert "unknown field 'body.colour'" in err.reason

    doc = _doc(sample_events()[6])
    doc["priority"] = 1
    err = _decode_error(_raw(doc))
    assert err.code == "invalid_fields"
    assert "unknown field 'priority'" in err.reason


def test_too_large_names_the_limit() -> None:
    raw = encode_event(sample_events()[4])
    assert decode_event(raw, max_bytes=len(raw)) == sample_events()[4]
    limit = len(raw) - 1
    err = _decode_error(raw, max_bytes=limit)
    assert err.code == "too_large"
    assert str(limit) in err.reason
    assert str(len(raw)) in err.reason


def test_too_large_checked_before_parsing() -> None:
    err = _decode_error(b"x" * 101, max_bytes=100)
    assert err.code == "too_large"


def test_empty_value() -> None:
    err = _decode_error(None)
    assert err.code == "empty"
    assert err.reason


def test_decode_raises_only_invalid_event() -> None:
    rng = random.Random(5)
    good = encode_event(sample_events()[5])
    codes: set[str] = set()
    for _ in range(300):
        cut = bytearray(good)
        for _ in range(rng.randint(1, 4)):
            cut[rng.randrange(len(cut))] = rng.randrange(256)
        try:
            decode_event(bytes(cut), max_bytes=MAX)
        except InvalidEvent as exc:
            codes.add(exc.code)
    assert codes <= {"malformed_json", "invalid_fields", "unknown_type", "not_an_object"}
    assert "malformed_json" in codes


# ---------------------------------------------------------------------------------------- field rules
@pytest.mark.parametrize("bad", ["has space", "a" * 129, "", "tab\there", "new\nline", "slash/no", "é"])
def test_bad_ids_rejected(bad: str) -> None:
    with pytest.raises(ValidationError):
        AgentFollowed(event_id=EID, society="s", actor=bad, occurred_at=AT, body={"target_agent": "b"})
    err = _decode_error(_raw(_comment_doc(post_id=bad)))
    assert err.code == "invalid_fields"
    assert "body.post_id" in err.reason


@pytest.mark.parametrize("good", ["a" * 128, "agent-000001", "user@host:1.2_x", "019b-uuid-like"])
def test_good_ids_accepted(good: str) -> None:
    ev = decode_event(_raw(_comment_doc(post_id=good)), max_bytes=MAX)
    assert isinstance(ev.body, CommentCreatedBody)
    assert ev.body.post_id == good


def _vote_doc(value: Any) -> dict[str, Any]:
    doc = _doc(sample_events()[6])
    doc["body"]["value"] = value
    return doc


@pytest.mark.parametrize("value", [1, -1])
def test_vote_values_accepted(value: int) -> None:
    ev = decode_event(_raw(_vote_doc(value)), max_bytes=MAX)
    assert isinstance(ev.body, VoteCastBody)
    assert ev.body.value == value


@pytest.mark.parametrize("value", [0, 2, -2, 10, "up", None])
def test_vote_values_rejected(value: Any) -> None:
    err = _decode_error(_raw(_vote_doc(value)))
    assert err.code == "invalid_fields"
    assert "body.value" in err.reason
    with pytest.raises(ValidationError):
        VoteCastBody(target_type="post", target_id="p", post_id="p", value=value)


def test_depth_at_least_one() -> None:
    assert decode_event(_raw(_comment_doc(depth=1)), max_bytes=MAX).body == CommentCreatedBody(
        comment_id="c-1", post_id="p-1", depth=1
    )
    for depth in (0, -1):
        err = _decode_error(_raw(_comment_doc(depth=depth)))
        assert err.code == "invalid_fields"
        assert "body.depth" in err.reason
    with pytest.raises(ValidationError):
        CommentCreatedBody(comment_id="c", post_id="p", depth=0)


@pytest.mark.parametrize(
    ("doc", "path"),
    [
        (_vote_doc(True), "body.value"),  # JSON Schema: integer, enum [1, -1]; a boolean is not an integer
        (_comment_doc(depth="2"), "body.depth"),  # JSON Schema: integer
    ],
    ids=["vote-true", "depth-string"],
)
def test_decode_rejects_values_the_json_schema_rejects(doc: dict[str, Any], path: str) -> None:
    """The gate publishes accepted bytes as they are, so it must not accept what the contract forbids."""
    err = _decode_error(_raw(doc))
    assert err.code == "invalid_fields"
    assert path in err.reason


# ------------------------------------------------------------------------------------------- uuid7
def test_uuid7_layout() -> None:
    rng = random.Random(1)
    for i in range(500):
        at = AT + timedelta(microseconds=rng.randrange(10**12))
        u = uuid7(at, rng) if i % 2 else uuid7(at)
        assert u.version == 7
        assert (u.int >> 76) & 0xF == 0x7
        assert (u.int >> 62) & 0b11 == 0b10
        assert u.variant == uuid.RFC_4122
        assert u.hex[12] == "7"
        assert u.hex[16] in "89ab"


def test_uuid7_timestamp_round_trips_to_the_millisecond() -> None:
    rng = random.Random(2)
    for _ in range(2000):
        at = AT + timedelta(microseconds=rng.randrange(-(10**13), 10**13))
        expected_ms = _us(at) // 1000
        u = uuid7(at, rng)
        assert uuid7_time_ms(u) == expected_ms
        assert int(u.hex[:12], 16) == expected_ms
    # exact millisecond boundaries
    for ms in range(0, 1000, 7):
        at = datetime(2026, 1, 28, tzinfo=UTC) + timedelta(milliseconds=ms)
        assert uuid7_time_ms(uuid7(at)) == 1_769_558_400_000 + ms


def test_uuid7_non_utc_input_uses_the_instant() -> None:
    at = datetime(2026, 1, 28, 2, 0, tzinfo=timezone(timedelta(hours=2)))
    assert uuid7_time_ms(uuid7(at)) == 1_769_558_400_000


def test_uuid7_seeded_is_reproducible() -> None:
    times = [AT + timedelta(milliseconds=i) for i in range(50)]
    a = [uuid7(t, random.Random(42)) for t in times]
    b = [uuid7(t, random.Random(42)) for t in times]
    assert a == b
    r1, r2 = random.Random(42), random.Random(42)
    assert [uuid7(t, r1) for t in times] == [uuid7(t, r2) for t in times]
    r3 = random.Random(43)
    assert [uuid7(t, r3) for t in times] != a
    # unseeded ids at the same instant differ
    assert len({uuid7(AT) for _ in range(100)}) == 100


def test_uuid7_sorts_by_time() -> None:
    rng = random.Random(3)
    t = AT
    ids = []
    for _ in range(500):
        t += timedelta(microseconds=rng.randint(1000, 5_000_000))
        ids.append(uuid7(t, rng))
    assert sorted(ids) == ids
    assert sorted(str(u) for u in ids) == [str(u) for u in ids]


# ----------------------------------------------------------------------------------- partition keys
def test_partition_keys() -> None:
    keys = {e.type: partition_key(e) for e in sample_events()}
    assert keys == {
        "agent_registered": "agent:agent-000001",
        "submolt_created": "submolt:general",
        "agent_subscribed": "agent:agent-000001",
        "agent_followed": "agent:agent-000001",
        "post_created": "post-1",
        "comment_created": "post-1",
        "vote_cast": "post-1",
        "vote_tallied": "post-1",
        "model_called": "agent:agent-000001",
        "agents_joined": "agent:agent-000001",
        "intervention_applied": "agent:experiment",
        "content_removed": "post-1",
        "agent_banned": "agent:moderator",
    }


def test_partition_key_of_post_vote_and_reply_is_the_thread() -> None:
    post_vote = VoteCast(
        event_id=EID,
        society="s",
        actor="voter",
        occurred_at=AT,
        body=VoteCastBody(target_type="post", target_id="thread-7", post_id="thread-7", value=1),
    )
    reply = CommentCreated(
        event_id=EID,
        society="s",
        actor="x",
        occurred_at=AT,
        body=CommentCreatedBody(comment_id="c-9", post_id="thread-7", parent_id="c-8", depth=5),
    )
    created = SubmoltCreated(
        event_id=EID, society="s", actor="founder", occurred_at=AT, body=SubmoltCreatedBody(submolt="crypto")
    )
    assert partition_key(post_vote) == "thread-7"
    assert partition_key(reply) == "thread-7"
    assert partition_key(created) == "submolt:crypto"


# ------------------------------------------------------------------------------------- JSON Schema
_TYPE_DEFS = {
    "agent_registered": "AgentRegistered",
    "submolt_created": "SubmoltCreated",
    "agent_subscribed": "AgentSubscribed",
    "agent_followed": "AgentFollowed",
    "post_created": "PostCreated",
    "comment_created": "CommentCreated",
    "vote_cast": "VoteCast",
    "vote_tallied": "VoteTallied",
    "model_called": "ModelCalled",
    "agents_joined": "AgentsJoined",
    "intervention_applied": "InterventionApplied",
    "content_removed": "ContentRemoved",
    "agent_banned": "AgentBanned",
}


def test_json_schema_structure() -> None:
    schema = event_json_schema()
    assert schema["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    disc = schema["discriminator"]
    assert disc["propertyName"] == "type"
    assert set(disc["mapping"]) == set(EVENT_TYPES)
    refs = {r["$ref"] for r in schema["oneOf"]}
    assert refs == set(disc["mapping"].values())
    defs = schema["$defs"]
    for etype, name in _TYPE_DEFS.items():
        assert disc["mapping"][etype] == f"#/$defs/{name}"
        d = defs[name]
        assert {"event_id", "society", "actor", "occurred_at", "body"} <= set(d["required"])
        assert d["properties"]["type"]["const"] == etype
        assert d["additionalProperties"] is False
        assert d["properties"]["body"]["$ref"] == f"#/$defs/{name}Body"
        assert defs[f"{name}Body"]["additionalProperties"] is False
    assert set(defs["CommentCreatedBody"]["required"]) == {"comment_id", "post_id", "depth"}
    assert defs["CommentCreatedBody"]["properties"]["depth"]["minimum"] == 1
    assert sorted(defs["VoteCastBody"]["properties"]["value"]["enum"]) == [-1, 1]
    assert defs["PostCreated"]["properties"]["occurred_at"]["type"] == "string"
    assert defs["PostCreated"]["properties"]["actor"]["maxLength"] == 128


def test_json_schema_requires_the_discriminator() -> None:
    """decode_event rejects a document without ``type`` (unknown_type); the published schema must agree."""
    defs = event_json_schema()["$defs"]
    for name in _TYPE_DEFS.values():
        assert "type" in defs[name]["required"], name


def test_json_schema_validates_samples_when_jsonschema_is_available() -> None:
    """With the ``jsonschema`` package, encoded samples validate and a broken one does not.

    Without it, check the same through the schema's own structure: every sample's keys are allowed
    properties and every required key is present.
    """
    schema = event_json_schema()
    docs = [_doc(e) for e in sample_events()]
    bad = _comment_doc(depth=0)
    if importlib.util.find_spec("jsonschema") is not None:
        import jsonschema

        validator = jsonschema.Draft202012Validator(schema)
        for doc in docs:
            validator.validate(doc)
        assert not validator.is_valid(bad)
        assert not validator.is_valid({**docs[0], "type": "post_deleted"})
    defs = schema["$defs"]
    for doc in docs:
        d = defs[_TYPE_DEFS[doc["type"]]]
        assert set(d["required"]) <= set(doc)
        assert set(doc) <= set(d["properties"])
        body_def = defs[d["properties"]["body"]["$ref"].rsplit("/", 1)[1]]
        assert set(body_def.get("required", [])) <= set(doc["body"])
        assert set(doc["body"]) <= set(body_def["properties"])
    assert bad["body"]["depth"] < defs["CommentCreatedBody"]["properties"]["depth"]["minimum"]


def test_parentless_reply_needs_parent_unknown() -> None:
    """Without a parent id a comment is top-level, unless an importer marks its parent as unknown."""
    doc = _doc(sample_events()[5])
    assert doc["type"] == "comment_created"
    doc["body"] = {**doc["body"], "parent_id": None, "depth": 2}
    err = _decode_error(_raw(doc))
    assert err.code == "invalid_fields"
    assert "top-level" in err.reason
    doc["body"]["parent_unknown"] = True
    ev = decode_event(_raw(doc), max_bytes=65536)
    assert isinstance(ev.body, CommentCreatedBody)
    assert (ev.body.depth, ev.body.parent_unknown) == (2, True)
    doc["body"]["parent_id"] = "comment-1"
    assert _decode_error(_raw(doc)).code == "invalid_fields"


# ------------------------------------------------------------------------------ bounds (issue 13)
# 2**53 - 1 written out: the largest integer an IEEE double (a JSON number in JavaScript) holds exactly.
_MAX_SAFE = 9_007_199_254_740_991


def _tally_doc(**body: Any) -> dict[str, Any]:
    doc = _doc(sample_events()[7])
    doc["body"] = {**doc["body"], **body}
    return doc


def _call_doc(**body: Any) -> dict[str, Any]:
    doc = _doc(sample_events()[8])
    doc["body"] = {**doc["body"], **body}
    return doc


@pytest.mark.parametrize("field", ["upvotes", "downvotes", "reported_comments"])
def test_vote_counts_are_bounded(field: str) -> None:
    ev = decode_event(_raw(_tally_doc(**{field: _MAX_SAFE})), max_bytes=MAX)
    assert getattr(ev.body, field) == _MAX_SAFE
    for bad in (_MAX_SAFE + 1, 10**20, 2**64, -1):
        err = _decode_error(json.dumps(_tally_doc(**{field: bad})).encode())  # orjson stops at 64 bits
        assert err.code == "invalid_fields"
        assert f"body.{field}" in err.reason
    counts: dict[str, Any] = {"upvotes": 0, "downvotes": 0, field: 10**20}
    with pytest.raises(ValidationError):
        VoteTalliedBody(target_type="post", target_id="p", post_id="p", **counts)


@pytest.mark.parametrize("field", ["prompt_tokens", "completion_tokens"])
def test_token_counts_are_bounded(field: str) -> None:
    assert (
        getattr(decode_event(_raw(_call_doc(**{field: _MAX_SAFE})), max_bytes=MAX).body, field) == _MAX_SAFE
    )
    err = _decode_error(_raw(_call_doc(**{field: _MAX_SAFE + 1})))
    assert err.code == "invalid_fields"
    assert f"'body.{field}'" in err.reason
    assert str(_MAX_SAFE) in err.reason


def test_huge_integer_literal_is_an_invalid_field_not_a_crash() -> None:
    raw = _raw(_tally_doc(upvotes=1)).replace(b'"upvotes":1', b'"upvotes":' + b"9" * 400)
    err = _decode_error(raw)
    assert err.code == "invalid_fields"
    assert "body.upvotes" in err.reason


@pytest.mark.parametrize("literal", [b"1e999", b"-1e999", b"NaN", b"Infinity", b"-Infinity"])
def test_latency_must_be_finite(literal: bytes) -> None:
    raw = _raw(_call_doc(latency_ms=1.5)).replace(b'"latency_ms":1.5', b'"latency_ms":' + literal)
    assert literal in raw
    err = _decode_error(raw)
    assert err.code == "invalid_fields"
    assert "'body.latency_ms'" in err.reason
    assert "finite" in err.reason


@pytest.mark.parametrize("value", [float("inf"), float("nan"), -1.0, 1e300])
def test_latency_bounds_in_the_model(value: float) -> None:
    with pytest.raises(ValidationError):
        ModelCalledBody(model="m", outcome="ok", decision="post", latency_ms=value)


@pytest.mark.parametrize("field", ["content", "title"])
def test_nul_in_text_rejected(field: str) -> None:
    doc = _doc(sample_events()[4])
    doc["body"][field] = "before\u0000after"
    raw = _raw(doc)
    assert b"\\u0000" in raw  # escaped: valid JSON, but not text anyone can keep
    err = _decode_error(raw)
    assert err.code == "invalid_fields"
    assert f"'body.{field}'" in err.reason
    assert "NUL" in err.reason
    texts = {"title": "t", field: "a\x00b"}
    with pytest.raises(ValidationError) as info:
        PostCreatedBody(post_id="p", submolt="s", **texts)
    assert "NUL" in str(info.value)


def test_raw_nul_byte_is_malformed_json() -> None:
    raw = _raw(_doc(sample_events()[4])).replace(b"Hello", b"Hel\x00lo")
    assert _decode_error(raw).code == "malformed_json"


@pytest.mark.parametrize("escape", [b"\\ud800", b"\\udfff", b"\\udc00\\ud800"])
def test_lone_surrogate_rejected(escape: bytes) -> None:
    raw = _raw(_doc(sample_events()[4])).replace(b"Hello", b"Hel" + escape + b"lo")
    err = _decode_error(raw)
    assert err.code == "malformed_json"
    assert "surrogate" in err.reason or "escape" in err.reason


def test_lone_surrogate_rejected_by_the_model() -> None:
    """An event built in Python (an LLM agent's text) cannot carry one either: orjson could not encode it."""
    with pytest.raises(ValidationError):
        CommentCreatedBody(comment_id="c", post_id="p", depth=1, content="x\ud800y")
    # a proper pair is text
    assert CommentCreatedBody(comment_id="c", post_id="p", depth=1, content="\U0001f980").content == "🦀"


@pytest.mark.parametrize(
    ("when", "ok"),
    [
        ("1970-01-01T00:00:00Z", True),
        ("2199-12-31T23:59:59.999999Z", True),
        ("1969-12-31T23:59:59.999999Z", False),
        ("2200-01-01T00:00:00Z", False),
        ("1970-01-01T00:30:00+01:00", False),  # 1969-12-31T23:30 in UTC
        ("0001-01-01T00:00:00+01:00", False),  # before year 1 in UTC: must not overflow
        ("9999-12-31T23:59:59-01:00", False),  # after year 9999 in UTC: must not overflow
    ],
)
def test_event_time_range(when: str, ok: bool) -> None:
    doc = _doc(sample_events()[2])
    doc["occurred_at"] = when
    if ok:
        assert decode_event(_raw(doc), max_bytes=MAX).type == "agent_subscribed"
    else:
        err = _decode_error(_raw(doc))
        assert err.code == "invalid_fields"
        assert "outside the supported range 1970-01-01 to 2200-01-01" in err.reason


def test_reasons_quote_hostile_input_briefly() -> None:
    doc = _doc(sample_events()[4])
    doc["type"] = "x" * 50_000
    err = _decode_error(_raw(doc), max_bytes=1 << 20)
    assert err.code == "unknown_type"
    assert len(err.reason) < 400
    assert "50,002 characters" in err.reason  # the repr, quotes included
    err = _decode_error(_raw(_comment_doc(**{"k" * 30_000: 1})), max_bytes=1 << 20)
    assert err.code == "invalid_fields"
    assert len(err.reason) < 400
    assert "unknown field 'body.kkk" in err.reason


def test_deeply_nested_json_is_malformed() -> None:
    for raw in (b"[" * 100_000, b'{"a":' * 20_000 + b"1" + b"}" * 20_000):
        err = _decode_error(raw, max_bytes=1 << 20)
        assert err.code == "malformed_json"
        assert "recursion" in err.reason


def test_top_level_nan_is_not_an_object() -> None:
    assert _decode_error(b"NaN").code == "not_an_object"


def test_hostile_corpus_raises_only_invalid_event() -> None:
    """Random mutations of every event type with hostile fragments spliced in."""
    rng = random.Random(13)
    fragments = [
        b"NaN",
        b"1e999",
        b"\\ud800",
        b"\\u0000",
        b"9" * 30,
        b"[" * 300,
        b"\x00",
        b"\xff",
        b'"',
        b"{",
    ]
    errors: list[InvalidEvent] = []
    for _ in range(2_000):
        raw = bytearray(encode_event(rng.choice(sample_events())))
        at = rng.randrange(len(raw))
        raw[at : at + rng.randint(0, 6)] = rng.choice(fragments)
        try:
            decode_event(bytes(raw), max_bytes=MAX)
        except InvalidEvent as exc:
            errors.append(exc)
    assert len(errors) > 1_500
    assert {"malformed_json", "invalid_fields"} <= {e.code for e in errors}
    for e in errors:
        assert e.reason
        e.reason.encode()  # printable in a header


def test_json_schema_states_the_bounds() -> None:
    defs = event_json_schema()["$defs"]
    tally = defs["VoteTalliedBody"]["properties"]
    for name in ("upvotes", "downvotes"):
        assert (tally[name]["minimum"], tally[name]["maximum"]) == (0, _MAX_SAFE)
    call = defs["ModelCalledBody"]["properties"]
    assert call["prompt_tokens"]["maximum"] == _MAX_SAFE
    assert call["latency_ms"]["maximum"] == _MAX_SAFE
    for body, name in (
        ("PostCreatedBody", "content"),
        ("PostCreatedBody", "title"),
        ("CommentCreatedBody", "content"),
    ):
        assert defs[body]["properties"][name]["pattern"] == "^[^\\x00]*$"
    assert "1970-01-01" in defs["PostCreated"]["properties"]["occurred_at"]["description"]


def test_published_json_schema_is_current() -> None:
    """docs/event.schema.json is what ``society schema`` prints (regenerate it when the contract changes)."""
    path = Path(__file__).resolve().parents[3] / "docs" / "event.schema.json"
    assert json.loads(path.read_text()) == event_json_schema()


# ------------------------------------------------------------------------------------- watermarks
_NOW_US = _us(datetime(2026, 3, 1, tzinfo=UTC))
_SKEW_US = 300 * 1_000_000
_SHARDS3 = frozenset({"shard-0", "shard-1", "shard-2", "replay"})


def _mark_doc(**over: Any) -> dict[str, Any]:
    doc: dict[str, Any] = {
        "producer": "shard-1",
        "producers": ["shard-0", "shard-1", "shard-2"],
        "watermark_us": _NOW_US - 3_600_000_000,
        "tick": 12,
        "origin_us": _NOW_US - 7_200_000_000,
        "final": False,
        "handoff": False,
    }
    doc.update(over)
    return doc


def _parse(raw: bytes | None) -> control.Watermark:
    return control.parse_watermark(raw, registered=_SHARDS3, now_us=_NOW_US, max_future_us=_SKEW_US)


def test_registered_producers_are_the_shards_and_the_publisher() -> None:
    assert control.registered_producers(3) == _SHARDS3
    assert control.describe_producers(_SHARDS3) == "shard-0 to shard-2 and replay"
    assert control.describe_producers({"shard-4", "replay"}) == "shard-4 and replay"
    # the names the producers really use
    from molt_society.agents.worker import shard_producer
    from molt_society.replay.publisher import PRODUCER

    assert [shard_producer(k) for k in range(3)] == ["shard-0", "shard-1", "shard-2"]
    assert control.REPLAY_PRODUCER == PRODUCER


def test_valid_watermarks_parse() -> None:
    worker = control.watermark("shard-2", ["shard-0", "shard-1", "shard-2"], _NOW_US, 5, _NOW_US - 10)
    assert _parse(control.dumps(worker)) == worker
    hand = control.watermark("replay", ["shard-0", "shard-1", "shard-2"], 10, -1, 0, handoff=True)
    assert _parse(control.dumps(hand)) == hand
    at_limit = _mark_doc(watermark_us=_NOW_US + _SKEW_US)
    assert _parse(_raw(at_limit))["watermark_us"] == _NOW_US + _SKEW_US
    assert (
        control.parse_watermark(
            _raw(_mark_doc(producer="anyone", producers=["anyone"])),
            registered=None,
            now_us=_NOW_US,
            max_future_us=_SKEW_US,
        )["producer"]
        == "anyone"
    )


@pytest.mark.parametrize(
    ("raw", "phrase"),
    [
        (None, "no value"),
        (b"[1, 2]", "a watermark is a JSON object, got list"),
        (b'"shard-0"', "got str"),
        (b"42", "got int"),
        (b"null", "got NoneType"),
        (b'{"producer": ', "not valid JSON"),
        (b"x" * 70_000, "over the 65536-byte limit"),
        (_raw({k: v for k, v in _mark_doc().items() if k != "watermark_us"}), "no 'watermark_us' field"),
        (_raw({k: v for k, v in _mark_doc().items() if k != "producers"}), "no 'producers' field"),
        (_raw({k: v for k, v in _mark_doc().items() if k != "producer"}), "no 'producer' field"),
        (_raw(_mark_doc(colour="red")), "unknown field 'colour'"),
        (_raw(_mark_doc(producer=5)), "'producer' must be a string"),
        (_raw(_mark_doc(producers="shard-0")), "'producers' must be a non-empty list"),
        (_raw(_mark_doc(producers=[])), "'producers' must be a non-empty list"),
        (_raw(_mark_doc(producers=[1])), "'producers' must be a non-empty list"),
        (_raw(_mark_doc(watermark_us="1")), "'watermark_us' must be an integer"),
        (_raw(_mark_doc(watermark_us=1.5)), "'watermark_us' must be an integer"),
        (_raw(_mark_doc(watermark_us=True)), "'watermark_us' must be an integer"),
        (_raw(_mark_doc(tick=None)), "'tick' must be an integer"),
        (_raw(_mark_doc(origin_us=[0])), "'origin_us' must be an integer"),
        (_raw(_mark_doc(final="yes")), "'final' must be true or false"),
        (_raw(_mark_doc(handoff=1)), "'handoff' must be true or false"),
        (_raw(_mark_doc(watermark_us=-1)), "'watermark_us' is -1, before the Unix epoch"),
        (_raw(_mark_doc(origin_us=-5)), "'origin_us' is -5, before the Unix epoch"),
        (_raw(_mark_doc(watermark_us=2**62)), "beyond the latest event time allowed now"),
        (_raw(_mark_doc(watermark_us=_NOW_US + _SKEW_US + 1)), "beyond the latest event time"),
        (_raw(_mark_doc(origin_us=2**62)), "'origin_us' is"),
        (_raw(_mark_doc(tick=-2)), "tick -2 is outside"),
        (_raw(_mark_doc(tick=2**53)), "outside -1..9007199254740991"),
        (
            _raw(_mark_doc(producer="intruder")),
            "names producer 'intruder' that this society did not register",
        ),
        (_raw(_mark_doc(producers=["shard-0", "shard-9", "x"])), "names producers 'shard-9', 'x'"),
        (_raw(_mark_doc(producers=["shard-0", "shard-1", "shard-2", "shard-3"])), "producer 'shard-3'"),
    ],
)
def test_bad_watermarks_rejected_with_a_reason(raw: bytes | None, phrase: str) -> None:
    with pytest.raises(control.InvalidControl) as info:
        _parse(raw)
    assert phrase in info.value.reason
    assert len(info.value.reason) < 300


def test_unknown_producer_reason_lists_the_registered_ones() -> None:
    with pytest.raises(control.InvalidControl) as info:
        _parse(_raw(_mark_doc(producer="p" * 5_000)))
    assert "its producers are shard-0 to shard-2 and replay" in info.value.reason
    assert len(info.value.reason) < 300


def test_partition_key_of_a_record_that_is_no_event_is_still_a_key() -> None:
    # the replay publisher keys every record; the stream worker then dead-letters it with the reason
    assert partition_key_of({"type": "post_created", "actor": "a", "body": {"title": 3}}) == "agent:a"
    assert partition_key_of({"type": "submolt_created", "body": {}}) == "agent:None"
    assert partition_key_of({"type": "comment_created", "body": {"post_id": "p-1"}}) == "p-1"
