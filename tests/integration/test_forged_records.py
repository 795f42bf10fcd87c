"""Records written to a society's topics from outside the stack cannot overwrite, pre-empt or stop it.

An attacker on the same machine can reach the broker (no ACLs on the local brokers) but not the society's
key (``runtime.record_auth``). Tried here, on a running society:

- on the actions topic, before the first tick: a genuine agent's future post (its id predicted from the
  seed) with another title, unsigned and signed with another key; a post by the reserved actor
  ``moderator``; a watermark of a ``replay`` producer at tick -1 on every partition (it used to close
  hundreds of thousands of windows and stall the barrier);
- on the events topic, after the run: a stored post's record with another title (it used to replace the
  stored row), the same signed with another key, an event dated 0001-01-01;
- on the metrics topic: a stored metric's window with another value;
- on the ticks and feeds topics (the agents' and the clock's inputs), before the first tick: garbage, a
  tick 5 of shard 0, and a feed of tick 1,000,000 on every partition (it would let the clock's barrier
  pass every tick at once). These are skipped with a warning, not dead-lettered.

Expected values come from an independent computation: the same seed run in one process without Kafka
(``agents.offline``) gives every event the society must store, with its contents.
"""

from __future__ import annotations

import asyncio
import time
from datetime import datetime
from pathlib import Path
from typing import Any

import orjson
import pytest
from stack_helpers import make_settings, offline_events, run_ticks, running_stack, sql

from molt_society.runtime.record_auth import SIGNATURE_HEADER, RecordKeys
from molt_society.schemas import control
from molt_society.schemas import events as E
from molt_society.schemas.topics import Role, topic_name
from molt_society.schemas.wire import event_to_dict
from molt_society.streams.feed_updates import FeedPublisher

pytestmark = pytest.mark.integration
TICKS = 24
PARTITIONS = 4
FORGED_ID_1 = "0190c1a4-7e2b-7c3d-8f00-000000000001"
FORGED_ID_2 = "0190c1a4-7e2b-7c3d-8f00-000000000002"


Outside = tuple[str, bytes | None, bytes, list[tuple[str, bytes]], int | None]
"""A record sent from outside: topic, key, value, headers, partition."""


async def _send(bootstrap: str, records: list[Outside]) -> None:
    """Send records as an outsider: a plain producer, headers as given (no signature unless given)."""
    from aiokafka import AIOKafkaProducer

    p = AIOKafkaProducer(bootstrap_servers=bootstrap)
    await p.start()
    try:
        for topic, key, value, headers, partition in records:
            await p.send_and_wait(topic, value, key=key, headers=headers or None, partition=partition)
    finally:
        await p.stop()


def _forged_post(ev: Any, title: str) -> bytes:
    doc = event_to_dict(ev)
    doc["body"] = {**doc["body"], "title": title}
    return orjson.dumps(doc)


def test_records_from_outside_are_dead_lettered_and_the_society_is_its_seed(
    broker: str, tmp_path: Path, society_name: str
) -> None:
    s = society_name
    settings = make_settings(broker, tmp_path, agents=150, partitions=PARTITIONS)
    expected = offline_events(settings, s, TICKS)
    posts = [e for e in expected if isinstance(e, E.PostCreated)]
    assert len(posts) > 10
    future = posts[len(posts) // 2]  # a post a genuine agent writes at a later tick
    other = RecordKeys(tmp_path / "another-state")  # a key that is not the society's
    actions, events, metrics = (topic_name(s, r) for r in (Role.ACTIONS, Role.EVENTS, Role.METRICS))
    fkey = E.partition_key(future).encode()
    pwned = _forged_post(future, "PWNED")
    moderator = dict(event_to_dict(posts[0]))
    moderator.update(actor="moderator", event_id=FORGED_ID_1)
    moderator["body"] = {**moderator["body"], "post_id": "forged-by-moderator", "title": "obey"}
    origin = control.to_us(datetime.fromisoformat(settings.sim_start))
    mark = control.dumps(control.watermark("replay", ["replay"], origin + 10**12, -1, origin))
    kind = [("society-kind", b"watermark")]
    ticks_topic, feeds_topic = topic_name(s, Role.TICKS), topic_name(s, Role.FEEDS)
    future_tick = {"tick": 5, "shard": 0, "sim_time_us": origin, "origin_us": origin, "final": False}
    item = {
        "post_id": "forged",
        "author": "a1",
        "submolt": "general",
        "title": "forged",
        "created_us": origin,
    }
    item.update(score=1, comments=0, hot=1.0, recent=[])
    far_feed = [
        FeedPublisher().update({"general": {"new": [item], "hot": [item]}}, 10**6, q, 0)
        for q in range(PARTITIONS)
    ]
    unstored = [  # the agents' and the clock's inputs: skipped (logged), never dead-lettered
        (ticks_topic, b"0", b"not a tick", [], 0),
        (ticks_topic, b"0", control.dumps({**future_tick, "wall_time": 0.0}), [], 0),
        *[(feeds_topic, str(q).encode(), b"{not json", [], q) for q in range(PARTITIONS)],
        *[(feeds_topic, str(q).encode(), control.dumps(u), [], q) for q, u in enumerate(far_feed)],
    ]
    before_run: list[Outside] = [
        (actions, fkey, pwned, [], None),
        (actions, fkey, pwned, other.headers(actions, fkey, pwned), None),
        (actions, b"forged-by-moderator", orjson.dumps(moderator), [], None),
        *[(actions, None, mark, kind, q) for q in range(PARTITIONS)],
    ]
    with running_stack(settings, s) as stack:
        asyncio.run(_send(stack.bootstrap, [*unstored, *before_run]))
        run_ticks(stack, TICKS)  # a forged watermark used to stall this at the first barrier
        stored_post = sql(
            stack,
            f"SELECT _partition, post_id FROM events FINAL WHERE society = '{s}' AND type = 'post_created' "
            "ORDER BY occurred_at LIMIT 1",
        )[0]
        genuine = next(e for e in posts if e.body.post_id == stored_post[1])
        gkey = E.partition_key(genuine).encode()
        overwrite = _forged_post(genuine, "PWNED")
        ancient = dict(event_to_dict(genuine))
        ancient.update(
            occurred_at="0001-01-01T00:00:00.000000Z", event_id="0190c1a4-7e2b-7c3d-8f00-000000000002"
        )
        metric = sql(
            stack,
            "SELECT toString(metric_id), metric, toUnixTimestamp64Micro(window_start), "
            f"toUnixTimestamp64Micro(window_end), dim FROM metrics FINAL WHERE society = '{s}' LIMIT 1",
        )[0]
        forged_metric = orjson.dumps(
            [
                {
                    "metric_id": metric[0],
                    "society": s,
                    "metric": metric[1],
                    "window_start_us": int(metric[2]),
                    "window_end_us": int(metric[3]),
                    "dim": metric[4],
                    "value": 999.0,
                    "emitted_at": time.time(),
                }
            ]
        )
        after_run: list[Outside] = [
            (events, gkey, overwrite, [], None),
            (events, gkey, overwrite, other.headers(events, gkey, overwrite), None),
            (events, gkey, orjson.dumps(ancient), [], None),
            (metrics, metric[1].encode(), forged_metric, [], None),
        ]
        asyncio.run(_send(stack.bootstrap, after_run))
        want = len(before_run) + len(after_run)
        deadline = time.monotonic() + 120
        dead: list[list[Any]] = []
        while time.monotonic() < deadline:
            dead = sql(stack, f"SELECT code, reason, origin_topic FROM dead_letters WHERE society = '{s}'")
            if len(dead) >= want:
                break
            time.sleep(0.5)
        stored = sql(
            stack,
            "SELECT toString(event_id), type, actor, title, content, toUnixTimestamp64Micro(occurred_at) "
            f"FROM events FINAL WHERE society = '{s}'",
        )
        raw_titles = sql(stack, f"SELECT count() FROM events WHERE society = '{s}' AND title = 'PWNED'")
        values = sql(stack, f"SELECT count() FROM metrics WHERE society = '{s}' AND value = 999")

    # every forged record dead-lettered as unauthenticated, with a reason naming the signature
    assert len(dead) == want, dead
    assert {d[0] for d in dead} == {"unauthenticated"}, dead
    assert all(SIGNATURE_HEADER in d[1] for d in dead), dead
    origins = sorted(d[2] for d in dead)
    assert origins == sorted([actions] * len(before_run) + [events] * 3 + [metrics])
    # the society is exactly its seed: every event, each with its own contents, nothing else
    by_id = {str(e.event_id): e for e in expected}
    assert {r[0] for r in stored} == set(by_id)
    for event_id, type_, actor, title, _content, at_us in stored:
        e = by_id[event_id]
        assert (type_, actor, at_us) == (e.type, e.actor, control.to_us(e.occurred_at)), event_id
        if isinstance(e, E.PostCreated):
            assert title == e.body.title, event_id
    assert raw_titles == [[0]]  # not even an unmerged row
    assert values == [[0]]
    assert not any(r[2] == "moderator" for r in stored)
    logs = "".join(p.read_text(errors="replace") for p in (settings.state_dir / s).glob("*.log"))
    assert logs.count('"agents.forged_tick"') >= 2
    assert logs.count('"feeds.forged"') >= 2 * PARTITIONS
