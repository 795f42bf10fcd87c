"""Bad input lands in the dead-letter topic (and table) with a readable reason; valid input is untouched."""

from __future__ import annotations

import asyncio
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import orjson
import pytest
from stack_helpers import make_settings, running_stack, sql

from molt_society.runtime import kafka
from molt_society.runtime.record_auth import RecordKeys
from molt_society.schemas import events as E
from molt_society.schemas.ids import uuid7
from molt_society.schemas.topics import Role, topic_name
from molt_society.schemas.wire import encode_event

pytestmark = pytest.mark.integration

AT = datetime(2026, 1, 28, 12, 0, tzinfo=UTC)


def _ev(
    model: type[E._Envelope], society: str, actor: str, body: dict[str, object], at: datetime = AT
) -> E.Event:
    return model(event_id=uuid7(at), society=society, actor=actor, occurred_at=at, body=body)  # type: ignore[return-value]


def test_each_kind_of_bad_input_is_dead_lettered_with_a_reason(
    broker: str, tmp_path: Path, society_name: str
):
    s = society_name
    settings = make_settings(broker, tmp_path, max_event_bytes=4096)
    post = _ev(E.PostCreated, s, "alice", {"post_id": "p1", "submolt": "general", "title": "Hello"})
    c1 = _ev(E.CommentCreated, s, "bob", {"comment_id": "c1", "post_id": "p1", "depth": 1, "content": "hi"})
    c2 = _ev(
        E.CommentCreated, s, "carol", {"comment_id": "c2", "post_id": "p1", "parent_id": "c1", "depth": 2}
    )
    vote = _ev(
        E.VoteCast, s, "dave", {"target_type": "comment", "target_id": "c2", "post_id": "p1", "value": 1}
    )
    reg = _ev(E.AgentRegistered, s, "alice", {"name": "Alice"})
    valid = [reg, post, c1]
    later_valid = [c2, vote]
    good = orjson.loads(encode_event(c1))
    bad: dict[str, bytes] = {}
    bad["malformed_json"] = b'{"event_id": "0190'
    bad["unknown_type"] = orjson.dumps({**good, "type": "post_deleted"})
    missing = {**good, "body": {k: v for k, v in good["body"].items() if k != "post_id"}}
    bad["invalid_fields:missing"] = orjson.dumps(missing)
    bad["invalid_fields:type"] = orjson.dumps({**good, "body": {**good["body"], "depth": "deep"}})
    big = _ev(
        E.CommentCreated, s, "eve", {"comment_id": "c9", "post_id": "p1", "depth": 1, "content": "x" * 5000}
    )
    bad["too_large"] = encode_event(big)
    orphan = _ev(
        E.CommentCreated, s, "eve", {"comment_id": "c8", "post_id": "p1", "parent_id": "nope", "depth": 2}
    )
    bad["unknown_parent"] = encode_event(orphan)
    nopost = _ev(E.CommentCreated, s, "eve", {"comment_id": "c7", "post_id": "p404", "depth": 1})
    bad["unknown_post"] = encode_event(nopost)
    future_at = datetime.now(UTC) + timedelta(days=365)
    fut = _ev(E.CommentCreated, s, "eve", {"comment_id": "c6", "post_id": "p1", "depth": 1}, at=future_at)
    bad["future_event_time"] = encode_event(fut)
    naive = orjson.loads(encode_event(c1))
    naive["occurred_at"] = "2026-01-28T12:00:00.000000"
    naive["event_id"] = str(uuid7(AT))
    bad["invalid_fields:naive"] = orjson.dumps(naive)

    async def produce() -> None:
        p = kafka.producer(broker, "control", keys=RecordKeys(settings.state_dir))
        await p.start()
        t = topic_name(s, Role.ACTIONS)
        try:
            for ev in valid:
                await p.send_and_wait(t, encode_event(ev), key=E.partition_key(ev).encode())
            for name, raw in bad.items():
                # each record under the key its post would have, so that what is tested is its own fault
                await p.send_and_wait(t, raw, key=b"p404" if name.startswith("unknown_post") else b"p1")
            await p.send_and_wait(
                t, encode_event(post), key=b"p1"
            )  # a redelivery: dropped, not dead-lettered
            for ev in later_valid:
                await p.send_and_wait(t, encode_event(ev), key=E.partition_key(ev).encode())
        finally:
            await p.stop()

    with running_stack(settings, s, agents=False) as stack:
        asyncio.run(produce())
        want = {str(e.event_id) for e in valid + later_valid}
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            stored = sql(stack, f"SELECT toString(event_id) FROM events WHERE society = '{s}'")
            dead = sql(
                stack, f"SELECT code, reason, origin_topic, value FROM dead_letters WHERE society = '{s}'"
            )
            if len(stored) >= len(want) and len(dead) >= len(bad):
                break
            time.sleep(0.3)
        assert stack.dead_children() == [], "a worker crashed on bad input"

    assert sorted(r[0] for r in stored) == sorted(want)  # every valid event exactly once, nothing else
    assert len(dead) == len(bad)
    by_code: dict[str, list[str]] = {}
    for code, reason, origin, _value in dead:
        assert origin == topic_name(s, Role.ACTIONS)
        by_code.setdefault(code, []).append(reason)
    expected_codes = sorted(k.split(":")[0] for k in bad)
    assert sorted(c for c, rs in by_code.items() for _ in rs) == expected_codes
    reasons = " | ".join(r for rs in by_code.values() for r in rs)
    for phrase in (
        "malformed JSON",
        "unknown event type 'post_deleted'",
        "missing field 'body.post_id'",
        "field 'body.depth'",
        "over the 4096-byte limit",
        "reply to comment nope, which does not exist in post p1",
        "comment on post p404, which does not exist",
        "in the future",
        "timestamp has no time zone",
    ):
        assert phrase in reasons, f"no dead letter says {phrase!r}: {reasons}"
    # the raw bytes are kept for replay, byte for byte
    assert any(v == bad["malformed_json"].decode() for *_, v in dead)
