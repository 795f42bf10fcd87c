"""Interventions of an experiment in the stream processor and the sink: ``intervention_applied``,
``content_removed`` and ``agent_banned`` are stored and counted, their actor is no agent, a removed post
leaves the feeds for good (also after a snapshot or a replay) and a removed comment its post's ``recent``."""

from __future__ import annotations

import math
import random
import uuid
from collections import Counter
from typing import Any, Literal

import orjson
import pytest
from test_clickhouse import _blank, _record
from test_partition_state import (
    HOUR,
    NOW,
    ORIGIN,
    SEC,
    _at,
    apply,
    apply_ok,
    close_all,
    comment,
    new_state,
    post,
    vote,
)

from molt_society.schemas.control import FeedItem, WindowPartial
from molt_society.schemas.events import (
    AgentBanned,
    AgentBannedBody,
    ContentRemoved,
    ContentRemovedBody,
    Event,
    InterventionApplied,
    InterventionAppliedBody,
)
from molt_society.schemas.wire import encode_event
from molt_society.sinks.clickhouse import EVENT_COLUMNS, rows_for_events
from molt_society.streams.aggregate import InfluenceMemory, window_metrics
from molt_society.streams.feed_updates import FeedState
from molt_society.streams.partition_state import (
    RECENT_COMMENTS,
    Accepted,
    Duplicate,
    PartitionState,
    Rejected,
)

_rng = random.Random(17)


def _eid() -> uuid.UUID:
    return uuid.UUID(int=_rng.getrandbits(128))


def removal(
    target_type: Literal["post", "comment"], target: str, pid: str, us: int, actor: str = "moderator"
) -> ContentRemoved:
    return ContentRemoved(
        event_id=_eid(),
        society="s",
        actor=actor,
        occurred_at=_at(us),
        body=ContentRemovedBody(
            target_type=target_type, target_id=target, post_id=pid, rule="spam_score", reason="score 0.93"
        ),
    )


def remove_post(pid: str, us: int) -> ContentRemoved:
    return removal("post", pid, pid, us)


def ban(agent: str, us: int) -> AgentBanned:
    return AgentBanned(
        event_id=_eid(),
        society="s",
        actor="moderator",
        occurred_at=_at(us),
        body=AgentBannedBody(agent_id=agent, rule="ban_top_pagerank", reason="rank 1"),
    )


def intervention(us: int) -> InterventionApplied:
    return InterventionApplied(
        event_id=_eid(),
        society="s",
        actor="experiment",
        occurred_at=_at(us),
        body=InterventionAppliedBody(
            experiment="e1", arm="treated", kind="feed_policy", params='{"policy": "chronological"}'
        ),
    )


def _code(out: object) -> str:
    assert isinstance(out, Rejected), out
    return out.code


def _hot(score: int, created_us: int) -> float:
    """Reddit's hot formula, written out here (not ``algorithms.feeds.hot_score``)."""
    sign = 1 if score > 0 else -1 if score < 0 else 0
    return round(sign * math.log10(max(abs(score), 1)) + (created_us / 1e6 - 1_134_028_003) / 45000, 7)


def _ids(items: list[FeedItem]) -> list[str]:
    return [i["post_id"] for i in items]


# ------------------------------------------------------------------------------------ post removals
def _society(
    n_posts: int, n_votes: int, seed: int
) -> tuple[list[Event], dict[str, int], Counter[str], random.Random]:
    """Posts in one submolt and votes on them, with the creation times and scores they give."""
    rng = random.Random(seed)
    events: list[Event] = []
    created: dict[str, int] = {}
    score: Counter[str] = Counter()
    for i in range(n_posts):
        pid = f"post-{i:02d}"
        created[pid] = ORIGIN + rng.randrange(0, 8) * 300 * SEC  # ties on purpose
        events.append(post(pid, f"a{i % 5}", created[pid]))
    for _ in range(n_votes):
        pid = rng.choice(sorted(created))
        v: Literal[1, -1] = 1 if rng.random() < 0.7 else -1
        score[pid] += v
        events.append(vote(pid, f"v{rng.randrange(9)}", ORIGIN + HOUR, value=v))
    return events, created, score, rng


def _expected(created: dict[str, int], score: Counter[str], keep: set[str], n: int) -> dict[str, list[str]]:
    new = sorted(keep, key=lambda p: (-created[p], p))[:n]
    hot = sorted(keep, key=lambda p: (-_hot(score[p], created[p]), p))[:n]
    return {"new": new, "hot": hot}


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_removed_posts_leave_both_feeds_for_good(seed: int) -> None:
    events, created, score, rng = _society(16, 150, seed)
    state = new_state(feed_size=6)
    reader = FeedState()
    for ev in events:
        apply_ok(state, ev)
    reader.apply(state.feed_update(0))
    first = state.feed_snapshot(0)["submolts"]["general"]
    shown = sorted(set(_ids(first["hot"])) | set(_ids(first["new"])))
    gone = set(rng.sample(shown, 3))  # posts the feeds showed: removing them changes what they show
    for pid in sorted(gone):
        assert apply_ok(state, remove_post(pid, ORIGIN + HOUR + SEC)).event_type == "content_removed"
    keep = set(created) - gone
    feed = state.feed_snapshot(1)["submolts"]["general"]
    assert {k: _ids(v) for k, v in feed.items()} == _expected(created, score, keep, 6)
    reader.apply(state.feed_update(1))
    assert {k: _ids(v) for k, v in reader.view()["general"].items()} == _expected(created, score, keep, 6)
    assert not gone & set(reader.items)

    # the log is the truth: comments and votes on a removed post are accepted, the post stays out
    for i, pid in enumerate(sorted(gone)):
        apply_ok(state, comment(f"late-{i}", pid, "bob", ORIGIN + HOUR + 2 * SEC))
        for _ in range(30):
            apply_ok(state, vote(pid, "bob", ORIGIN + HOUR + 3 * SEC))
            score[pid] += 1
    survivor = sorted(keep)[0]
    apply_ok(state, vote(survivor, "bob", ORIGIN + HOUR + 3 * SEC))
    score[survivor] += 1
    feed = state.feed_snapshot(2)["submolts"]["general"]
    assert {k: _ids(v) for k, v in feed.items()} == _expected(created, score, keep, 6)
    reader.apply(state.feed_update(2))
    assert not gone & {pid for items in reader.view()["general"].values() for pid in _ids(items)}

    # the same feed as a partition that never saw the removed posts (nor anything about them)
    never = new_state(feed_size=6)
    for ev in events:
        if getattr(ev.body, "post_id", None) not in gone:
            apply_ok(never, ev)
    apply_ok(never, vote(survivor, "bob", ORIGIN + HOUR + 3 * SEC))
    assert state.feed_snapshot(3)["submolts"] == never.feed_snapshot(3)["submolts"]


def test_a_removal_is_idempotent() -> None:
    state = new_state()
    apply_ok(state, post("p1", "alice", ORIGIN))
    apply_ok(state, post("p2", "alice", ORIGIN + SEC))
    first = remove_post("p1", ORIGIN + 2 * SEC)
    apply_ok(state, first)
    assert apply(state, first) == Duplicate(str(first.event_id))  # a redelivery: dropped as ever
    again = apply_ok(state, remove_post("p1", ORIGIN + 3 * SEC))  # another moderator's: stored, no effect
    assert again.event_type == "content_removed"
    assert _ids(state.feed_snapshot(0)["submolts"]["general"]["new"]) == ["p2"]
    (partial,) = close_all(state, ORIGIN + HOUR)
    assert partial["counts"]["content_removed"] == 2
    assert partial["removed"] == {"post": 1}


# ---------------------------------------------------------------------------------- comment removals
def test_a_removed_comment_leaves_recent_and_stays_out() -> None:
    state = new_state()
    apply_ok(state, post("p", "op", ORIGIN))
    rows: list[list[Any]] = []
    for i in range(RECENT_COMMENTS + 2):
        c = comment(f"c{i:02d}", "p", f"u{i}", ORIGIN + (i + 1) * SEC)
        apply_ok(state, c)
        rows.append([f"c{i:02d}", f"u{i}", 1, ORIGIN + (i + 1) * SEC, c.body.content[:120]])
    item = state.feed_snapshot(0)["submolts"]["general"]["new"][0]
    assert item["recent"] == rows[-RECENT_COMMENTS:]
    apply_ok(state, removal("comment", "c05", "p", ORIGIN + 20 * SEC))
    apply_ok(state, removal("comment", "c00", "p", ORIGIN + 20 * SEC))  # already out of recent
    item = state.feed_snapshot(1)["submolts"]["general"]["new"][0]
    # one fewer: the comments older than the recent ones are not kept, so none moves up
    assert item["recent"] == [r for r in rows[-RECENT_COMMENTS:] if r[0] != "c05"]
    assert item["post_id"] == "p"  # the post stays in the feeds

    reply = comment("r1", "p", "zed", ORIGIN + 30 * SEC, parent="c05", depth=2)  # replies still count
    apply_ok(state, reply)
    apply_ok(state, vote("p", "zed", ORIGIN + 31 * SEC, target="c05"))
    item = state.feed_snapshot(2)["submolts"]["general"]["new"][0]
    assert "c05" not in [r[0] for r in item["recent"]]
    assert item["recent"][-1][0] == "r1"
    assert item["comments"] == RECENT_COMMENTS + 3  # the thread's size keeps every comment of the log
    (partial,) = close_all(state, ORIGIN + HOUR)
    assert partial["removed"] == {"comment": 2}
    assert partial["counts"]["content_removed"] == 2
    assert ["p", RECENT_COMMENTS + 3, RECENT_COMMENTS + 3, 2] in partial["threads_touched"]


@pytest.mark.parametrize(
    ("make", "code"),
    [
        (lambda: remove_post("ghost", ORIGIN + 5 * SEC), "unknown_post"),
        (lambda: removal("comment", "ghost", "p1", ORIGIN + 5 * SEC), "unknown_target"),
        (lambda: removal("comment", "c1", "ghost", ORIGIN + 5 * SEC), "unknown_post"),
        (lambda: removal("post", "p2", "p1", ORIGIN + 5 * SEC), "bad_target"),
    ],
)
def test_removals_of_what_does_not_exist_are_rejected(make: Any, code: str) -> None:
    state = new_state()
    apply_ok(state, post("p1", "alice", ORIGIN))
    apply_ok(state, comment("c1", "p1", "bob", ORIGIN + SEC))
    before = state.feed_snapshot(0)
    out = apply(state, make())
    assert _code(out) == code
    assert isinstance(out, Rejected)
    assert "does not exist" in out.reason or "must equal" in out.reason
    assert state.feed_snapshot(1)["submolts"] == before["submolts"]


def test_a_removal_in_an_archived_thread_is_stored_and_changes_nothing() -> None:
    state = PartitionState(
        0, 1, window_us=HOUR, feed_size=5, max_event_bytes=65536, max_future_us=300 * SEC, thread_ttl_us=HOUR
    )
    apply_ok(state, post("old", "alice", ORIGIN))
    apply_ok(state, post("new", "alice", ORIGIN + 2 * HOUR))
    # idle beyond the TTL, not reclaimed yet: archived by event time alone
    out = apply_ok(state, remove_post("old", ORIGIN + 2 * HOUR + SEC))
    assert out.event_type == "content_removed"
    assert _code(apply(state, vote("old", "bob", ORIGIN + 2 * HOUR + 2 * SEC))) == "thread_archived"
    partials = close_all(state, ORIGIN + 3 * HOUR)
    assert partials[-1]["counts"]["content_removed"] == 1
    assert partials[-1]["removed"] == {}


# --------------------------------------------------------------------------- counting and metrics
def test_interventions_are_counted_but_their_actor_is_no_agent() -> None:
    state = new_state()
    apply_ok(state, post("p1", "alice", ORIGIN))
    apply_ok(state, comment("c1", "p1", "bob", ORIGIN + SEC))
    apply_ok(state, intervention(ORIGIN + 2 * SEC))
    apply_ok(state, ban("alice", ORIGIN + 2 * SEC))
    apply_ok(state, ban("bob", ORIGIN + 2 * SEC))
    apply_ok(state, removal("comment", "c1", "p1", ORIGIN + 3 * SEC))
    apply_ok(state, remove_post("p1", ORIGIN + 3 * SEC))
    apply_ok(state, post("p2", "carol", ORIGIN + HOUR + SEC))  # the next window
    first, second = close_all(state, ORIGIN + 2 * HOUR)
    assert first["counts"] == {
        "agent_banned": 2,
        "comment_created": 1,
        "content_removed": 2,
        "intervention_applied": 1,
        "post_created": 1,
    }
    assert first["active_agents"] == ["alice", "bob"]
    assert first["edges"] == [["bob", "alice", 1]]
    assert first["removed"] == {"comment": 1, "post": 1}
    assert first["banned"] == 2
    assert [t[0] for t in first["threads_touched"]] == ["p1"]
    assert (second["removed"], second["banned"], second["active_agents"]) == ({}, 0, ["carol"])

    metrics = {
        (m["metric"], m["dim"]): m["value"] for m in window_metrics("s", [first], InfluenceMemory(), top_k=3)
    }
    assert metrics[("events", "content_removed")] == 2
    assert metrics[("events", "agent_banned")] == 2
    assert metrics[("events", "intervention_applied")] == 1
    assert metrics[("removed", "post")] == 1
    assert metrics[("removed", "comment")] == 1
    assert metrics[("banned", "")] == 2
    assert metrics[("active_agents", "")] == 2
    assert metrics[("graph_nodes", "")] == 2  # no moderator in the interaction graph


def _partial(partition: int, **extra: Any) -> WindowPartial:
    p: WindowPartial = {
        "window_start_us": 0,
        "window_end_us": HOUR,
        "partition": partition,
        "partitions": 3,
        "counts": {},
        "active_agents": [],
        "edges": [],
        "size_hist": {},
        "participants_hist": {},
        "depth_hist": {},
        "threads_touched": [],
    }
    p.update(extra)  # type: ignore[typeddict-item]
    return p


def test_removed_and_banned_metrics_sum_partitions_and_default_to_zero() -> None:
    partials = [
        _partial(2, removed={"post": 2}, banned=1),
        _partial(0, removed={"comment": 4, "post": 1}, banned=0),
        _partial(1),  # a partial without the fields (an older worker): zeros
    ]
    out = window_metrics("s", partials, InfluenceMemory(), top_k=3)
    got = {(m["metric"], m["dim"]): m["value"] for m in out if m["metric"] in ("removed", "banned")}
    assert got == {("removed", "post"): 3.0, ("removed", "comment"): 4.0, ("banned", ""): 1.0}
    again = window_metrics("s", list(reversed(partials)), InfluenceMemory(), top_k=3)
    assert [(m["metric_id"], m["value"]) for m in again] == [(m["metric_id"], m["value"]) for m in out]
    quiet = window_metrics("s", [_partial(0)], InfluenceMemory(), top_k=3)
    zeros = {(m["metric"], m["dim"]): m["value"] for m in quiet if m["metric"] in ("removed", "banned")}
    assert zeros == {("removed", "post"): 0.0, ("removed", "comment"): 0.0, ("banned", ""): 0.0}


# ------------------------------------------------------------------------------ snapshots, replay
def _removal_log() -> list[Event]:
    events, _, _, _ = _society(12, 80, seed=9)
    return [
        *events,
        comment("c1", "post-03", "bob", ORIGIN + HOUR + SEC),
        comment("c2", "post-03", "eve", ORIGIN + HOUR + 2 * SEC),
        remove_post("post-01", ORIGIN + HOUR + 3 * SEC),
        removal("comment", "c1", "post-03", ORIGIN + HOUR + 3 * SEC),
        ban("eve", ORIGIN + HOUR + 3 * SEC),
    ]


def _later() -> list[Event]:
    """Events after the snapshot: activity on the removed post and comment, a repeated removal."""
    return [
        *(vote("post-01", f"v{i}", ORIGIN + HOUR + 10 * SEC) for i in range(40)),
        comment("c3", "post-01", "bob", ORIGIN + HOUR + 11 * SEC),
        vote("post-03", "bob", ORIGIN + HOUR + 12 * SEC, target="c1"),
        removal("comment", "c1", "post-03", ORIGIN + HOUR + 13 * SEC),
        remove_post("post-01", ORIGIN + HOUR + 13 * SEC),
    ]


def test_removals_survive_a_snapshot_and_a_replay() -> None:
    config: dict[str, Any] = {
        "window_us": HOUR,
        "feed_size": 5,
        "max_event_bytes": 65536,
        "max_future_us": 300 * SEC,
    }
    live = PartitionState(0, 1, **config)
    log = _removal_log()
    for ev in log:
        apply_ok(live, ev)
    restored = PartitionState.from_snapshot(live.to_snapshot(), 0, 1, **config)
    assert restored.to_snapshot() == live.to_snapshot()
    replayed = PartitionState(0, 1, **config)  # a rebuild without a snapshot: the log again
    for ev in log:
        apply_ok(replayed, ev)
    later = _later()
    for state in (live, restored, replayed):
        for ev in later:
            apply_ok(state, ev)
    feeds = [s.feed_snapshot(5)["submolts"] for s in (live, restored, replayed)]
    assert feeds[0] == feeds[1] == feeds[2]
    general = feeds[0]["general"]
    assert "post-01" not in _ids(general["new"]) + _ids(general["hot"])
    unmoderated = PartitionState(0, 1, **config)  # the same log without the removals would show it
    for ev in [*log, *later]:
        if not isinstance(ev, ContentRemoved):
            apply_ok(unmoderated, ev)
    assert "post-01" in _ids(unmoderated.feed_snapshot(5)["submolts"]["general"]["hot"])
    for state in (live, restored, replayed):  # post-03's feed item, in the feeds or not
        assert [r[0] for r in state.threads["post-03"].item()["recent"]] == ["c2"]
    partials = [close_all(s, ORIGIN + 2 * HOUR)[-1] for s in (live, restored, replayed)]
    assert partials[0] == partials[1] == partials[2]
    assert (partials[0]["removed"], partials[0]["banned"]) == ({"comment": 1, "post": 1}, 1)
    assert partials[0]["counts"]["content_removed"] == 4


def test_a_snapshot_without_removal_fields_still_restores() -> None:
    """Snapshots written before removals existed: thread rows of 12 fields, window rows of 6."""
    config: dict[str, Any] = {"window_us": HOUR, "feed_size": 5, "max_event_bytes": 65536, "max_future_us": 0}
    state = PartitionState(0, 1, **{**config, "max_future_us": 300 * SEC})
    apply_ok(state, post("p1", "alice", ORIGIN))
    apply_ok(state, comment("c1", "p1", "bob", ORIGIN + SEC))
    raw = state.to_snapshot()
    magic, size = raw[:8], int.from_bytes(raw[8:12], "big")
    doc = orjson.loads(raw[12 : 12 + size])
    doc["threads"] = [row[:12] for row in doc["threads"]]
    doc["windows"] = [row[:6] for row in doc["windows"]]
    head = orjson.dumps(doc)
    old = magic + len(head).to_bytes(4, "big") + head + raw[12 + size :]
    restored = PartitionState.from_snapshot(old, 0, 1, **config)
    assert restored.to_snapshot() == raw


# ----------------------------------------------------------------------------------- sink rows
def _row(event: Event) -> dict[str, Any]:
    (row,) = rows_for_events([_record(encode_event(event))])
    return dict(zip(EVENT_COLUMNS, row, strict=True))


def test_event_rows_of_interventions() -> None:
    removed_post = _row(remove_post("p7", ORIGIN))
    assert (removed_post["type"], removed_post["actor"]) == ("content_removed", "moderator")
    assert (removed_post["post_id"], removed_post["target_type"], removed_post["target_id"]) == (
        "p7",
        "post",
        "p7",
    )
    _blank(removed_post, "post_id", "target_type", "target_id")
    assert orjson.loads(removed_post["body"])["rule"] == "spam_score"

    removed_comment = _row(removal("comment", "c9", "p7", ORIGIN))
    assert (removed_comment["post_id"], removed_comment["target_type"], removed_comment["target_id"]) == (
        "p7",
        "comment",
        "c9",
    )
    _blank(removed_comment, "post_id", "target_type", "target_id")

    banned = _row(ban("agent-42", ORIGIN))
    assert (banned["type"], banned["target_type"], banned["target_id"]) == (
        "agent_banned",
        "agent",
        "agent-42",
    )
    _blank(banned, "target_type", "target_id")
    assert orjson.loads(banned["body"])["reason"] == "rank 1"

    applied = _row(intervention(ORIGIN))
    assert (applied["type"], applied["actor"]) == ("intervention_applied", "experiment")
    _blank(applied)
    body = orjson.loads(applied["body"])
    assert (body["experiment"], body["arm"], body["kind"]) == ("e1", "treated", "feed_policy")
    assert orjson.loads(body["params"]) == {"policy": "chronological"}


def test_events_are_accepted_through_the_wire() -> None:
    """The three types decode from their wire bytes, under their partition keys."""
    state = new_state()
    apply_ok(state, post("p1", "alice", ORIGIN))
    for ev in (intervention(ORIGIN + SEC), ban("alice", ORIGIN + SEC), remove_post("p1", ORIGIN + SEC)):
        out = state.accept_action(encode_event(ev), NOW)
        assert isinstance(out, Accepted)
        assert (out.event_type, out.late) == (ev.type, False)
