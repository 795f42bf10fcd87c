"""PartitionState: validation, redelivery, thread histograms, event-time windows and feeds."""

from __future__ import annotations

import asyncio
import json
import math
import random
import time
import tracemalloc
import uuid
from collections import Counter
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any, Literal

import orjson
import pytest
import structlog
from aiokafka import TopicPartition
from aiokafka.partitioner import DefaultPartitioner
from structlog.testing import capture_logs

from molt_society.runtime import kafka
from molt_society.runtime.settings import Settings
from molt_society.schemas import control
from molt_society.schemas.events import (
    AgentRegistered,
    AgentRegisteredBody,
    CommentCreated,
    CommentCreatedBody,
    Event,
    PostCreated,
    PostCreatedBody,
    VoteCast,
    VoteCastBody,
    VoteTallied,
    VoteTalliedBody,
    partition_key,
)
from molt_society.schemas.wire import encode_event
from molt_society.streams import processor
from molt_society.streams.partition_state import (
    RECENT_COMMENTS,
    Accepted,
    Duplicate,
    EventIds,
    MarkApplied,
    PartitionState,
    Rejected,
    kafka_partition,
)

SEC = 1_000_000
HOUR = 3600 * SEC
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
ORIGIN = (datetime(2026, 1, 28, tzinfo=UTC) - _EPOCH) // timedelta(microseconds=1)  # on an hour boundary
NOW = ORIGIN + 100 * HOUR  # processing time far enough ahead that nothing is "future"
PRODUCERS = ["w0", "w1"]

_ids = random.Random(0)


def new_state(feed_size: int = 5) -> PartitionState:
    return PartitionState(
        0, 1, window_us=3600 * 10**6, feed_size=feed_size, max_event_bytes=65536, max_future_us=300 * 10**6
    )


def _at(us: int) -> datetime:
    return _EPOCH + timedelta(microseconds=us)


def _eid() -> uuid.UUID:
    return uuid.UUID(int=_ids.getrandbits(128))


def post(pid: str, actor: str, us: int, submolt: str = "general", title: str = "t") -> PostCreated:
    return PostCreated(
        event_id=_eid(),
        society="s",
        actor=actor,
        occurred_at=_at(us),
        body=PostCreatedBody(post_id=pid, submolt=submolt, title=title),
    )


def comment(
    cid: str, pid: str, actor: str, us: int, parent: str | None = None, depth: int = 1
) -> CommentCreated:
    return CommentCreated(
        event_id=_eid(),
        society="s",
        actor=actor,
        occurred_at=_at(us),
        body=CommentCreatedBody(
            comment_id=cid, post_id=pid, parent_id=parent, depth=depth, content=f"{actor} wrote {cid} " * 9
        ),
    )


def vote(pid: str, actor: str, us: int, target: str | None = None, value: Literal[1, -1] = 1) -> VoteCast:
    return VoteCast(
        event_id=_eid(),
        society="s",
        actor=actor,
        occurred_at=_at(us),
        body=VoteCastBody(
            target_type="post" if target is None else "comment",
            target_id=pid if target is None else target,
            post_id=pid,
            value=value,
        ),
    )


def register(actor: str, us: int) -> AgentRegistered:
    return AgentRegistered(
        event_id=_eid(), society="s", actor=actor, occurred_at=_at(us), body=AgentRegisteredBody(name=actor)
    )


def apply(state: PartitionState, ev: Event, now_us: int = NOW) -> Accepted | Duplicate | Rejected:
    return state.accept_action(encode_event(ev), now_us=now_us, key=partition_key(ev).encode())


def apply_ok(state: PartitionState, ev: Event) -> Accepted:
    out = apply(state, ev)
    assert isinstance(out, Accepted), out
    return out


def mark(producer: str, wm_us: int, tick: int, final: bool = False) -> control.Watermark:
    return control.watermark(producer, PRODUCERS, wm_us, tick, ORIGIN, final=final)


def _counters(s: PartitionState) -> tuple[int, int, int, int]:
    return s.accepted, s.rejected, s.duplicates, s.late


def _hists(s: PartitionState) -> tuple[dict[int, int], dict[int, int], dict[int, int]]:
    return dict(s.size_hist), dict(s.participants_hist), dict(s.depth_hist)


def close_all(state: PartitionState, until_us: int) -> list[control.WindowPartial]:
    partials: list[control.WindowPartial] = []
    for p in PRODUCERS:
        partials += state.apply_watermark(mark(p, until_us, 99, final=True), ORIGIN)[0]
    return partials


# --------------------------------------------------------------------------------- accept / reject
def test_post_comment_reply_accepted() -> None:
    s = new_state()
    t = ORIGIN + 10 * SEC
    p = post("p1", "alice", t)
    out = apply_ok(s, p)
    assert out == Accepted(str(p.event_id), "post_created", t, False)
    c1 = comment("c1", "p1", "bob", t + SEC)
    assert apply_ok(s, c1).event_type == "comment_created"
    c2 = comment("c2", "p1", "carol", t + 2 * SEC, parent="c1", depth=2)
    apply_ok(s, c2)
    c3 = comment("c3", "p1", "alice", t + 3 * SEC, parent="c2", depth=3)
    apply_ok(s, c3)
    assert _counters(s) == (4, 0, 0, 0)
    item = s.feed_snapshot(0)["submolts"]["general"]["new"][0]
    assert item["post_id"] == "p1"
    assert item["author"] == "alice"
    assert item["comments"] == 3
    assert item["recent"] == [
        ["c1", "bob", 1, t + SEC, c1.body.content[:120]],
        ["c2", "carol", 2, t + 2 * SEC, c2.body.content[:120]],
        ["c3", "alice", 3, t + 3 * SEC, c3.body.content[:120]],
    ]
    assert _hists(s) == ({3: 1}, {3: 1}, {3: 1})


def _thread_state() -> PartitionState:
    s = new_state()
    apply_ok(s, post("p1", "alice", ORIGIN + SEC))
    apply_ok(s, comment("c1", "p1", "bob", ORIGIN + 2 * SEC))
    apply_ok(s, comment("c2", "p1", "carol", ORIGIN + 3 * SEC, parent="c1", depth=2))
    return s


@pytest.mark.parametrize(
    ("make", "code"),
    [
        (lambda: comment("cx", "nope", "bob", ORIGIN + 5 * SEC), "unknown_post"),
        (lambda: vote("nope", "bob", ORIGIN + 5 * SEC), "unknown_post"),
        (lambda: comment("cx", "p1", "bob", ORIGIN + 5 * SEC, parent="ghost", depth=2), "unknown_parent"),
        (lambda: comment("cx", "p1", "bob", ORIGIN + 5 * SEC, parent="c1", depth=1), "bad_depth"),
        (lambda: comment("cx", "p1", "bob", ORIGIN + 5 * SEC, parent="c2", depth=4), "bad_depth"),
        (lambda: comment("c1", "p1", "dave", ORIGIN + 5 * SEC), "duplicate_comment_id"),
        (lambda: post("p1", "dave", ORIGIN + 5 * SEC), "duplicate_post_id"),
        (lambda: vote("p1", "bob", ORIGIN + 5 * SEC, target="ghost"), "unknown_target"),
        (lambda: vote("p1", "bob", ORIGIN + 5 * SEC, target="p1"), "unknown_target"),
        (lambda: comment("cx", "p1", "bob", NOW + 301 * SEC), "future_event_time"),
        (lambda: post("p9", "bob", NOW + HOUR), "future_event_time"),
    ],
)
def test_rejections(make: Any, code: str) -> None:
    s = _thread_state()
    before_hists = _hists(s)
    before_feed = s.feed_snapshot(0)
    out = apply(s, make())
    assert isinstance(out, Rejected)
    assert out.code == code
    assert out.reason
    assert _counters(s) == (3, 1, 0, 0)
    assert _hists(s) == before_hists
    assert s.feed_snapshot(0) == before_feed


def test_future_limit_is_relative_to_now() -> None:
    s = new_state()
    now = ORIGIN + HOUR
    ok = post("p1", "a", now + 299 * SEC)
    assert isinstance(s.accept_action(encode_event(ok), now_us=now), Accepted)
    late_now = post("p2", "a", now + 600 * SEC)
    out = s.accept_action(encode_event(late_now), now_us=now)
    assert isinstance(out, Rejected)
    assert out.code == "future_event_time"
    # the same bytes are fine once processing time has caught up
    assert isinstance(s.accept_action(encode_event(late_now), now_us=now + 400 * SEC), Accepted)


def test_invalid_bytes_rejected_with_decode_code() -> None:
    s = new_state()
    out = s.accept_action(b"{nope", now_us=NOW)
    assert isinstance(out, Rejected)
    assert out.code == "malformed_json"
    out = s.accept_action(None, now_us=NOW)
    assert isinstance(out, Rejected)
    assert out.code == "empty"
    assert _counters(s) == (0, 2, 0, 0)


def test_redelivery_is_duplicate_and_changes_nothing() -> None:
    s = new_state()
    events: list[Event] = [
        register("alice", ORIGIN + SEC),
        post("p1", "alice", ORIGIN + 2 * SEC),
        comment("c1", "p1", "bob", ORIGIN + 3 * SEC),
        comment("c2", "p1", "carol", ORIGIN + 4 * SEC, parent="c1", depth=2),
        vote("p1", "carol", ORIGIN + 5 * SEC),
        vote("p1", "dave", ORIGIN + 6 * SEC, target="c1", value=-1),
    ]
    raws = [encode_event(e) for e in events]
    for raw in raws:
        assert isinstance(s.accept_action(raw, now_us=NOW), Accepted)
    counters, hists, feed = _counters(s), _hists(s), s.feed_snapshot(0)
    assert feed["submolts"]["general"]["hot"][0]["score"] == 1
    for rnd in range(2):
        for ev, raw in zip(events, raws, strict=True):
            out = s.accept_action(raw, now_us=NOW)
            assert out == Duplicate(str(ev.event_id))
        assert _counters(s) == (counters[0], counters[1], counters[2] + 6 * (rnd + 1), counters[3])
        assert _hists(s) == hists
        assert s.feed_snapshot(0) == feed
    partials = close_all(s, ORIGIN + HOUR)
    assert len(partials) == 1
    assert partials[0]["counts"] == {
        "agent_registered": 1,
        "comment_created": 2,
        "post_created": 1,
        "vote_cast": 2,
    }


# --------------------------------------------------------------------------------- histograms
@dataclass
class Forest:
    events: list[Event] = field(default_factory=list)
    posts: dict[str, str] = field(default_factory=dict)  # post -> author
    comments: dict[str, list[tuple[str, str, int, str | None]]] = field(default_factory=dict)
    # post -> [(comment id, author, depth, parent id)]


def random_forest(seed: int, n_events: int, t0: int = ORIGIN, span_us: int = 3 * HOUR) -> Forest:
    """A valid thread forest in a valid (causal) order, with non-decreasing event times."""
    rng = random.Random(seed)
    agents = [f"agent-{i}" for i in range(15)]
    submolts = ["general", "crypto", "ponderings"]
    f = Forest()
    times = sorted(t0 + rng.randrange(span_us) for _ in range(n_events))
    for i, t in enumerate(times):
        actor = rng.choice(agents)
        r = rng.random()
        if not f.posts or r < 0.15:
            pid = f"p{i}"
            f.posts[pid] = actor
            f.comments[pid] = []
            f.events.append(post(pid, actor, t, rng.choice(submolts)))
        elif r < 0.8:
            pid = rng.choice(sorted(f.posts))
            existing = f.comments[pid]
            if existing and rng.random() < 0.4:
                parent = rng.choice(existing)
                cid, depth, par = f"c{i}", parent[2] + 1, parent[0]
            else:
                cid, depth, par = f"c{i}", 1, None
            existing.append((cid, actor, depth, par))
            f.events.append(comment(cid, pid, actor, t, parent=par, depth=depth))
        elif r < 0.95:
            pid = rng.choice(sorted(f.posts))
            existing = f.comments[pid]
            target = rng.choice(existing)[0] if existing and rng.random() < 0.5 else None
            f.events.append(vote(pid, actor, t, target=target, value=rng.choice((1, -1))))
        else:
            f.events.append(register(actor, t))
    return f


def recount(f: Forest) -> tuple[dict[int, int], dict[int, int], dict[int, int]]:
    size: Counter[int] = Counter()
    parts: Counter[int] = Counter()
    depth: Counter[int] = Counter()
    for pid in f.posts:
        cs = f.comments[pid]
        size[len(cs)] += 1
        parts[len({c[1] for c in cs})] += 1
        depth[max((c[2] for c in cs), default=0)] += 1
    return dict(size), dict(parts), dict(depth)


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_histograms_match_recount(seed: int) -> None:
    f = random_forest(seed, 400)
    assert len(f.posts) >= 20
    assert max(c[2] for cs in f.comments.values() for c in cs) >= 3
    s = new_state()
    rng = random.Random(seed + 100)
    for ev in f.events:
        apply_ok(s, ev)
        # noise that must not move the histograms: redeliveries and invalid comments
        if rng.random() < 0.1:
            assert isinstance(apply(s, ev), Duplicate)
        if rng.random() < 0.05:
            assert isinstance(apply(s, comment(f"bad{rng.random()}", "no-such-post", "x", ORIGIN)), Rejected)
    expected = recount(f)
    assert _hists(s) == expected
    # every post appears once in each histogram
    assert all(sum(h.values()) == len(f.posts) for h in expected)
    partials = close_all(s, ORIGIN + 3 * HOUR)
    assert len(partials) == 3
    last = partials[-1]
    assert last["size_hist"] == {str(k): v for k, v in sorted(expected[0].items())}
    assert last["participants_hist"] == {str(k): v for k, v in sorted(expected[1].items())}
    assert last["depth_hist"] == {str(k): v for k, v in sorted(expected[2].items())}


# ------------------------------------------------------------------------------------ windows
def test_window_partials_need_every_producer_and_close_in_order() -> None:
    s = new_state()
    h = HOUR
    # window 0: [ORIGIN, ORIGIN + 1h)
    w0: list[Event] = [
        register("alice", ORIGIN + 1 * SEC),
        post("p1", "alice", ORIGIN + 2 * SEC),
        comment("c1", "p1", "bob", ORIGIN + 3 * SEC),  # bob -> alice
        comment("c2", "p1", "alice", ORIGIN + 4 * SEC, parent="c1", depth=2),  # alice -> bob
        comment("c3", "p1", "alice", ORIGIN + 5 * SEC),  # self: dropped
        vote("p1", "carol", ORIGIN + 6 * SEC),
        comment("c4", "p1", "bob", ORIGIN + h - 1),  # bob -> alice, last microsecond of window 0
    ]
    # window 1: [1h, 2h)
    w1: list[Event] = [
        post("p2", "erin", ORIGIN + h),  # first microsecond of window 1
        comment("c5", "p1", "dave", ORIGIN + h + 10 * SEC),  # dave -> alice
        comment("c6", "p1", "dave", ORIGIN + h + 20 * SEC, parent="c1", depth=2),  # dave -> bob
        comment("c7", "p1", "dave", ORIGIN + h + 30 * SEC, parent="c1", depth=2),  # dave -> bob
        comment("c8", "p2", "erin", ORIGIN + h + 40 * SEC),  # self: dropped
        comment("c9", "p2", "bob", ORIGIN + h + 50 * SEC, parent="c8", depth=2),  # bob -> erin
        vote("p1", "erin", ORIGIN + h + 60 * SEC, target="c1", value=-1),
    ]
    # window 2: empty. window 3: [3h, 4h)
    w3: list[Event] = [
        comment("c10", "p2", "frank", ORIGIN + 3 * h + SEC, parent="c9", depth=3),  # frank -> bob
        register("gina", ORIGIN + 3 * h + 2 * SEC),
    ]
    mixed = w0 + w1 + w3
    for ev in mixed:
        apply_ok(s, ev)
    assert _counters(s) == (len(mixed), 0, 0, 0)

    # only w0 has spoken: nothing closes although its mark is past windows 0 and 1
    assert s.apply_watermark(mark("w0", ORIGIN + 2 * h + 15 * 60 * SEC, 1), ORIGIN) == ([], None)
    # w1 lags at 1.5h: window 0 closes (end 1h <= min(2.25h, 1.5h)), window 1 does not
    partials, tick = s.apply_watermark(mark("w1", ORIGIN + h + h // 2, 1), ORIGIN)
    assert tick == 1
    assert [p["window_start_us"] for p in partials] == [ORIGIN]
    p0 = partials[0]
    assert p0["window_end_us"] == ORIGIN + h
    assert (p0["partition"], p0["partitions"]) == (0, 1)
    assert p0["counts"] == {"agent_registered": 1, "post_created": 1, "comment_created": 4, "vote_cast": 1}
    assert p0["active_agents"] == ["alice", "bob", "carol"]
    assert p0["edges"] == [["alice", "bob", 1], ["bob", "alice", 2]]
    assert [t[0] for t in p0["threads_touched"]] == ["p1"]

    # w1 moves to 4h but w0 is still at 2.25h: window 1 closes, nothing else; tick stays at 1
    partials, tick = s.apply_watermark(mark("w1", ORIGIN + 4 * h, 2), ORIGIN)
    assert tick is None
    assert [p["window_start_us"] for p in partials] == [ORIGIN + h]
    p1 = partials[0]
    assert p1["counts"] == {"post_created": 1, "comment_created": 5, "vote_cast": 1}
    assert p1["active_agents"] == ["bob", "dave", "erin"]
    assert p1["edges"] == [["bob", "erin", 1], ["dave", "alice", 1], ["dave", "bob", 2]]
    assert [t[0] for t in p1["threads_touched"]] == ["p1", "p2"]

    # a regressing mark is ignored
    assert s.apply_watermark(mark("w0", ORIGIN + h, 1), ORIGIN) == ([], None)

    # w0 reaches 4h: the empty window 2 and window 3 close
    partials, tick = s.apply_watermark(mark("w0", ORIGIN + 4 * h, 2), ORIGIN)
    assert tick == 2
    assert [p["window_start_us"] for p in partials] == [ORIGIN + 2 * h, ORIGIN + 3 * h]
    empty, p3 = partials
    assert (empty["counts"], empty["active_agents"], empty["edges"], empty["threads_touched"]) == (
        {},
        [],
        [],
        [],
    )
    assert empty["window_end_us"] == ORIGIN + 3 * h
    assert p3["counts"] == {"comment_created": 1, "agent_registered": 1}
    assert p3["active_agents"] == ["frank", "gina"]
    assert p3["edges"] == [["frank", "bob", 1]]

    # a late event (window 0 is closed) is accepted and counted as late; an event of window 4 is not late
    late = comment("c11", "p1", "latecomer", ORIGIN + 30 * 60 * SEC)
    out = apply_ok(s, late)
    assert out.late is True
    on_time = post("p3", "hank", ORIGIN + 4 * h + 10 * 60 * SEC)
    assert apply_ok(s, on_time).late is False
    assert s.late == 1

    # a final mark from one producer only closes nothing
    assert s.apply_watermark(mark("w0", ORIGIN + 4 * h + h // 2, 3, final=True), ORIGIN)[0] == []
    # both final at 4.5h: window 4 (which contains 4.5h) closes although it is not over; window 5 does not
    partials, tick = s.apply_watermark(mark("w1", ORIGIN + 4 * h + h // 2, 3, final=True), ORIGIN)
    assert tick == 3
    assert [p["window_start_us"] for p in partials] == [ORIGIN + 4 * h]
    assert partials[0]["counts"] == {"post_created": 1}
    assert partials[0]["active_agents"] == ["hank"]
    for p in (p0, p1, empty, p3, partials[0]):
        assert "latecomer" not in p["active_agents"]
        assert all("latecomer" not in e[:2] for e in p["edges"])
    # the late comment did count in the thread's cumulative statistics
    assert partials[0]["size_hist"] == {"0": 1, "3": 1, "8": 1}
    # nothing more to close
    assert s.apply_watermark(mark("w1", ORIGIN + 4 * h + h // 2, 3, final=True), ORIGIN)[0] == []


def test_first_window_starts_at_origin_even_without_events() -> None:
    s = new_state()
    apply_ok(s, post("p1", "a", ORIGIN + 2 * HOUR + SEC))
    s.apply_watermark(mark("w0", ORIGIN + 3 * HOUR, 0), ORIGIN)
    partials, _ = s.apply_watermark(mark("w1", ORIGIN + 3 * HOUR, 0), ORIGIN)
    assert [p["window_start_us"] for p in partials] == [ORIGIN, ORIGIN + HOUR, ORIGIN + 2 * HOUR]
    assert [p["counts"] for p in partials] == [{}, {}, {"post_created": 1}]


def test_randomised_window_partials_match_recount() -> None:
    f = random_forest(11, 300, span_us=5 * HOUR)
    s = new_state()
    for ev in f.events:
        apply_ok(s, ev)
    partials = close_all(s, ORIGIN + 5 * HOUR)
    assert [p["window_start_us"] for p in partials] == [ORIGIN + k * HOUR for k in range(5)]

    authors: dict[tuple[str, str], str] = {}
    for ev in f.events:
        if isinstance(ev, CommentCreated):
            authors[(ev.body.post_id, ev.body.comment_id)] = ev.actor
    for k, p in enumerate(partials):
        lo, hi = ORIGIN + k * HOUR, ORIGIN + (k + 1) * HOUR
        in_window = [e for e in f.events if lo <= (e.occurred_at - _EPOCH) // timedelta(microseconds=1) < hi]
        assert p["counts"] == dict(Counter(e.type for e in in_window))
        assert p["active_agents"] == sorted({e.actor for e in in_window})
        edges: Counter[tuple[str, str]] = Counter()
        for e in in_window:
            if isinstance(e, CommentCreated):
                b = e.body
                dst = f.posts[b.post_id] if b.parent_id is None else authors[(b.post_id, b.parent_id)]
                if dst != e.actor:
                    edges[(e.actor, dst)] += 1
        assert p["edges"] == [[a, b, w] for (a, b), w in sorted(edges.items())]


# ------------------------------------------------------------------------------ order independence
def _base_and_tick(seed: int) -> tuple[list[Event], list[Event]]:
    """Tick 0 events (applied in order) and tick 1 events that only refer to tick 0 state."""
    rng = random.Random(seed)
    agents = [f"ag{i}" for i in range(8)]
    subs = ["general", "crypto"]
    base: list[Event] = []
    comments: dict[str, list[tuple[str, int]]] = {}
    for i in range(12):
        pid = f"base-{i:02d}"
        comments[pid] = []
        base.append(post(pid, rng.choice(agents), ORIGIN + rng.randrange(0, 60) * SEC, subs[i % 2]))
    for i in range(40):
        pid = rng.choice(sorted(comments))
        par = rng.choice(comments[pid]) if comments[pid] and rng.random() < 0.4 else None
        cid = f"bc{i:02d}"
        depth = 1 if par is None else par[1] + 1
        comments[pid].append((cid, depth))
        base.append(
            comment(
                cid, pid, rng.choice(agents), ORIGIN + (60 + i) * SEC, None if par is None else par[0], depth
            )
        )
    tick: list[Event] = []
    t1 = ORIGIN + 120 * SEC
    for i in range(10):  # new posts, several at identical times
        tick.append(post(f"new-{i:02d}", rng.choice(agents), t1 + (i // 3) * SEC, subs[i % 2]))
    for i in range(60):
        pid = rng.choice(sorted(comments))
        r = rng.random()
        same_time = t1 + rng.randrange(0, 4) * SEC  # many ties in event time
        if r < 0.6:
            par = rng.choice(comments[pid]) if comments[pid] and rng.random() < 0.3 else None
            tick.append(
                comment(
                    f"tc{i:02d}",
                    pid,
                    rng.choice(agents),
                    same_time,
                    None if par is None else par[0],
                    1 if par is None else par[1] + 1,
                )
            )
        elif r < 0.9:
            tick.append(vote(pid, rng.choice(agents), same_time, value=rng.choice((1, -1))))
        else:
            target = rng.choice(comments[pid])[0] if comments[pid] else None
            tick.append(vote(pid, rng.choice(agents), same_time, target=target))
    tick.append(register("ag-new", t1))
    return base, tick


@pytest.mark.parametrize("seed", [1, 2])
def test_order_independence_within_a_tick(seed: int) -> None:
    base, tick = _base_and_tick(seed)
    orders = []
    results = []
    for order_seed in (10, 20):
        s = new_state()
        for ev in base:
            apply_ok(s, ev)
        assert s.feed_snapshot(0)["submolts"]
        shuffled = list(tick)
        random.Random(order_seed).shuffle(shuffled)
        orders.append([str(e.event_id) for e in shuffled])
        for ev in shuffled:
            apply_ok(s, ev)
        snap = s.feed_snapshot(1)
        partials = close_all(s, ORIGIN + HOUR)
        results.append((snap, partials, _hists(s)))
    assert orders[0] != orders[1]
    assert results[0] == results[1]
    snap = results[0][0]
    # and the snapshot is not trivially empty: both submolts, full lists, some recent comments
    assert set(snap["submolts"]) == {"general", "crypto"}
    assert all(len(lists["new"]) == 5 for lists in snap["submolts"].values())


# ---------------------------------------------------------------------------------------- feeds
def _expected_hot(score: int, created_us: int) -> float:
    sign = (score > 0) - (score < 0)
    return sign * math.log10(max(abs(score), 1)) + (created_us / 1e6 - 1134028003) / 45000


def test_feed_snapshot_lists() -> None:
    s = new_state(feed_size=5)
    rng = random.Random(4)
    created: dict[str, int] = {}
    score: Counter[str] = Counter()
    for i in range(14):
        pid = f"post-{i:02d}"
        t = ORIGIN + rng.randrange(0, 6) * 600 * SEC  # only six distinct times: ties
        created[pid] = t
        apply_ok(s, post(pid, "author", t, "general"))
    apply_ok(s, post("other-1", "author", ORIGIN, "crypto"))
    for _ in range(120):
        pid = rng.choice(sorted(created))
        v: Literal[1, -1] = 1 if rng.random() < 0.7 else -1
        score[pid] += v
        apply_ok(s, vote(pid, "voter", ORIGIN + HOUR, value=v))
    snap = s.feed_snapshot(3)
    assert snap["tick"] == 3
    assert snap["partition"] == 0
    general = snap["submolts"]["general"]
    new = general["new"]
    assert len(new) == 5
    assert [i["created_us"] for i in new] == sorted((i["created_us"] for i in new), reverse=True)
    newest_first = sorted(created, key=lambda p: (-created[p], p))
    assert [i["post_id"] for i in new] == newest_first[:5]
    assert all(i["score"] == score[i["post_id"]] for i in new)
    hot = general["hot"]
    assert len(hot) == 5
    for item in hot:
        assert item["hot"] == pytest.approx(
            _expected_hot(score[item["post_id"]], created[item["post_id"]]), abs=1e-6
        )
    by_hot = sorted(created, key=lambda p: (-round(_expected_hot(score[p], created[p]), 7), p))
    assert [i["post_id"] for i in hot] == by_hot[:5]
    assert [i["post_id"] for i in snap["submolts"]["crypto"]["new"]] == ["other-1"]


def test_feed_snapshot_caches_clean_submolts_and_refreshes_dirty_ones() -> None:
    s = new_state()
    apply_ok(s, post("a", "x", ORIGIN, "general"))
    apply_ok(s, post("b", "x", ORIGIN, "crypto"))
    first = s.feed_snapshot(0)
    apply_ok(s, comment("c", "a", "y", ORIGIN + SEC))
    second = s.feed_snapshot(1)
    assert second["submolts"]["crypto"] == first["submolts"]["crypto"]
    assert second["submolts"]["general"]["new"][0]["comments"] == 1
    assert first["submolts"]["general"]["new"][0]["comments"] == 0


@pytest.mark.parametrize("n_comments", [3, 8, 30])
def test_recent_comments_are_newest_by_time_then_id(n_comments: int) -> None:
    s = new_state()
    apply_ok(s, post("p", "op", ORIGIN))
    rng = random.Random(n_comments)
    cs = []
    for i in range(n_comments):
        t = ORIGIN + rng.randrange(1, 5) * SEC  # ties in time, broken by id
        cs.append(comment(f"c-{rng.randrange(10**6):06d}-{i}", "p", f"ag{i % 4}", t))
    rng.shuffle(cs)  # top-level comments can arrive in any order
    for c in cs:
        apply_ok(s, c)
    expected = sorted(
        (
            [
                c.body.comment_id,
                c.actor,
                1,
                (c.occurred_at - _EPOCH) // timedelta(microseconds=1),
                c.body.content[:120],
            ]
            for c in cs
        ),
        key=lambda r: (r[3], r[0]),
    )[-RECENT_COMMENTS:]
    assert RECENT_COMMENTS == 8
    item = s.feed_snapshot(0)["submolts"]["general"]["new"][0]
    assert item["recent"] == expected
    assert len(item["recent"]) == min(8, n_comments)
    assert item["comments"] == n_comments


# ------------------------------------------------------------------ bounds and origin (issue 13)
INT64_MAX = 9_223_372_036_854_775_807  # written out, not taken from the code under test
MAX_SAFE = 9_007_199_254_740_991  # 2**53 - 1


def tally(pid: str, us: int, up: int, down: int = 0) -> VoteTallied:
    return VoteTallied(
        event_id=_eid(),
        society="s",
        actor="importer",
        occurred_at=_at(us),
        body=VoteTalliedBody(target_type="post", target_id=pid, post_id=pid, upvotes=up, downvotes=down),
    )


def test_thread_score_saturates_within_int64() -> None:
    s = new_state()
    apply_ok(s, post("p1", "a", ORIGIN))
    apply_ok(s, post("p2", "a", ORIGIN))
    for _ in range(1024):
        apply_ok(s, tally("p1", ORIGIN + SEC, MAX_SAFE))
        apply_ok(s, tally("p2", ORIGIN + SEC, 0, MAX_SAFE))
    scores = {i["post_id"]: i["score"] for i in s.feed_snapshot(0)["submolts"]["general"]["new"]}
    assert scores == {"p1": 1024 * MAX_SAFE, "p2": -1024 * MAX_SAFE}  # 2**63 - 1024: still exact
    apply_ok(s, tally("p1", ORIGIN + SEC, MAX_SAFE))
    apply_ok(s, tally("p2", ORIGIN + SEC, 0, MAX_SAFE))
    apply_ok(s, tally("p2", ORIGIN + SEC, 0, MAX_SAFE))
    snap = s.feed_snapshot(1)
    scores = {i["post_id"]: i["score"] for i in snap["submolts"]["general"]["new"]}
    assert scores == {"p1": INT64_MAX, "p2": -INT64_MAX - 1}
    assert orjson.loads(control.dumps(snap)) == snap  # the feed still serialises (orjson: 64-bit ints)
    assert all(math.isfinite(i["hot"]) for i in snap["submolts"]["general"]["hot"])
    apply_ok(s, vote("p1", "b", ORIGIN + 2 * SEC, value=-1))  # and comes back down from the bound
    scores = {i["post_id"]: i["score"] for i in s.feed_snapshot(2)["submolts"]["general"]["new"]}
    assert scores == {"p1": INT64_MAX - 1, "p2": -INT64_MAX - 1}


def test_tally_over_64_bits_is_rejected_and_feeds_still_serialise() -> None:
    s = new_state()
    apply_ok(s, post("p1", "a", ORIGIN))
    doc = orjson.loads(encode_event(tally("p1", ORIGIN + SEC, 1)))
    doc["body"]["upvotes"] = 10**20
    out = s.accept_action(json.dumps(doc).encode(), now_us=NOW)
    assert isinstance(out, Rejected)
    assert out.code == "invalid_fields"
    assert "body.upvotes" in out.reason
    assert orjson.loads(control.dumps(s.feed_snapshot(0)))["submolts"]["general"]["new"][0]["score"] == 0


def _code(out: Accepted | Duplicate | Rejected) -> str:
    assert isinstance(out, Rejected), out
    return out.code


def strict_state(partition: int, partitions: int = 4, ids: EventIds | None = None) -> PartitionState:
    return PartitionState(
        partition,
        partitions,
        window_us=HOUR,
        feed_size=5,
        max_event_bytes=65536,
        max_future_us=300 * SEC,
        society="s",
        check_keys=True,
        registered=frozenset(PRODUCERS),
        event_ids=ids,
    )


# Kafka's own test vectors for its murmur2 (the Java client's UtilsTest): key -> signed 32-bit hash. The
# default partitioner puts a key on (hash & 0x7fffffff) % partitions.
KAFKA_MURMUR2 = {
    "21": -973932308,
    "foobar": -790332482,
    "a-little-bit-long-string": -985981536,
    "a-little-bit-longer-string": -1486304829,
    "lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8": -58897971,
    "abc": 479470107,
}


@pytest.mark.parametrize("partitions", [1, 3, 4, 7])
def test_kafka_partition_matches_the_java_client(partitions: int) -> None:
    for key, hashed in KAFKA_MURMUR2.items():
        assert kafka_partition(key.encode(), partitions) == (hashed & 0x7FFFFFFF) % partitions
    # and the producer's own partitioner on arbitrary keys
    rng = random.Random(partitions)
    parts = list(range(partitions))
    for _ in range(500):
        raw = rng.randbytes(rng.randrange(1, 60))
        assert kafka_partition(raw, partitions) == DefaultPartitioner()(raw, parts, parts)


@pytest.mark.parametrize("pid", sorted(KAFKA_MURMUR2))
def test_record_must_be_on_its_keys_partition(pid: str) -> None:
    right = (KAFKA_MURMUR2[pid] & 0x7FFFFFFF) % 4
    ev = post(pid, "alice", ORIGIN)
    raw, key = encode_event(ev), pid.encode()
    for q in range(4):
        out = strict_state(q).accept_action(raw, NOW, key=key)
        if q == right:
            assert isinstance(out, Accepted)
        else:
            assert isinstance(out, Rejected)
            assert out.code == "wrong_partition"
            assert f"on partition {q}" in out.reason
            assert f"partition {right} of 4" in out.reason


def test_record_key_must_be_the_partition_key() -> None:
    reg = register("alice", ORIGIN)
    q = (KAFKA_MURMUR2["21"] & 0x7FFFFFFF) % 4
    s = strict_state(q)
    ev = post("21", "alice", ORIGIN)
    for key in (None, b"", b"22", b"agent:alice", b"21 ", b"x" * 10_000):
        out = s.accept_action(encode_event(ev), NOW, key=key)
        assert isinstance(out, Rejected)
        assert out.code == "key_mismatch"
        assert "is not the event's partition key b'21'" in out.reason
        assert len(out.reason) < 300
    assert isinstance(s.accept_action(encode_event(ev), NOW, key=b"21"), Accepted)
    # non-thread events are keyed by their agent
    reg_key = b"agent:alice"
    reg_state = strict_state(kafka_partition(reg_key, 4))
    assert _code(reg_state.accept_action(encode_event(reg), NOW, key=b"alice")) == "key_mismatch"
    assert isinstance(reg_state.accept_action(encode_event(reg), NOW, key=reg_key), Accepted)
    assert _counters(s) == (1, 6, 0, 0)


def test_event_of_another_society_is_rejected() -> None:
    s = strict_state(0, partitions=1)
    ev = PostCreated(
        event_id=_eid(),
        society="victim_society",
        actor="mallory",
        occurred_at=_at(ORIGIN),
        body=PostCreatedBody(post_id="p1", submolt="general", title="forged"),
    )
    out = s.accept_action(encode_event(ev), NOW, key=b"p1")
    assert isinstance(out, Rejected)
    assert out.code == "wrong_society"
    assert "'victim_society'" in out.reason
    assert s.threads == {}


def test_in_process_states_place_records_themselves() -> None:
    """Without check_keys (agents/offline.py picks partitions with crc32) any key and partition goes."""
    s = PartitionState(0, 4, window_us=HOUR, feed_size=5, max_event_bytes=65536, max_future_us=300 * SEC)
    assert isinstance(s.accept_action(encode_event(post("21", "a", ORIGIN)), NOW, key=b"wrong"), Accepted)
    assert isinstance(s.accept_action(encode_event(post("22", "a", ORIGIN)), NOW), Accepted)


def _same_id(ev: Event, **body: Any) -> bytes:
    doc = orjson.loads(encode_event(ev))
    doc["body"].update(body)
    return orjson.dumps(doc)


def test_same_id_with_other_bytes_conflicts_on_the_same_partition() -> None:
    s = new_state()
    p1 = post("p1", "alice", ORIGIN)
    apply_ok(s, p1)
    c1 = comment("c1", "p1", "bob", ORIGIN + SEC)
    apply_ok(s, c1)
    for raw in (
        _same_id(p1, post_id="p2"),  # another post under a known id
        _same_id(p1, title="Changed"),  # the same post, another title
        _same_id(c1, content="edited"),
        _same_id(c1, comment_id="c2"),
    ):
        out = s.accept_action(raw, now_us=NOW)
        assert isinstance(out, Rejected)
        assert out.code == "conflicting_event_id"
        assert "already accepted on this partition" in out.reason
    assert s.accept_action(encode_event(p1), now_us=NOW) == Duplicate(str(p1.event_id))
    assert set(s.threads) == {"p1"}
    assert s.threads["p1"].title == "t"
    assert _counters(s) == (2, 4, 1, 0)


def test_event_ids_are_unique_across_partitions() -> None:
    ids = EventIds()
    s0 = strict_state(0, partitions=1, ids=ids)
    s1 = PartitionState(
        1, 2, window_us=HOUR, feed_size=5, max_event_bytes=65536, max_future_us=300 * SEC, event_ids=ids
    )
    p1 = post("p1", "alice", ORIGIN)
    assert isinstance(s0.accept_action(encode_event(p1), NOW, key=b"p1"), Accepted)
    # the same id as another post, which lives in another partition
    out = s1.accept_action(_same_id(p1, post_id="p9"), NOW)
    assert isinstance(out, Rejected)
    assert out.code == "conflicting_event_id"
    assert "on partition 0" in out.reason
    # or as an event of another type
    doc = orjson.loads(encode_event(register("alice", ORIGIN)))
    doc["event_id"] = str(p1.event_id)
    assert _code(s1.accept_action(orjson.dumps(doc), NOW)) == "conflicting_event_id"
    assert s1.threads == {}
    assert len(ids) == 1


def test_rebuild_refills_the_index() -> None:
    ids = EventIds()
    s0 = new_state_with(ids, 0)
    s1 = new_state_with(ids, 1)
    events: list[Event] = [
        post("p1", "a", ORIGIN),
        comment("c1", "p1", "b", ORIGIN + SEC),
        register("a", ORIGIN),
    ]
    raws = [encode_event(e) for e in events]
    for raw in raws:
        assert isinstance(s0.accept_action(raw, NOW), Accepted)
    assert len(ids) == 3
    ids.drop_partition(0)  # revoked, or about to be rebuilt
    assert len(ids) == 0
    assert isinstance(s1.accept_action(_same_id(events[0], post_id="p5"), NOW), Accepted)  # nobody knew
    rebuilt = new_state_with(ids, 0)
    outcomes = [rebuilt.accept_action(raw, NOW) for raw in raws]
    assert [type(o) for o in outcomes] == [Rejected, Rejected, Accepted]  # p1's id is p5's now
    assert [_code(o) for o in outcomes[:2]] == ["conflicting_event_id", "unknown_post"]
    assert rebuilt.accept_action(raws[2], NOW) == Duplicate(str(events[2].event_id))
    assert len(ids) == 2


def new_state_with(ids: EventIds, partition: int) -> PartitionState:
    return PartitionState(
        partition,
        2,
        window_us=HOUR,
        feed_size=5,
        max_event_bytes=65536,
        max_future_us=300 * SEC,
        event_ids=ids,
    )


def test_event_id_index_memory_per_event() -> None:
    rng = random.Random(3)
    tracemalloc.start()
    try:
        ids = EventIds()
        for i in range(100_000):
            ids.add(uuid.UUID(int=rng.getrandbits(128)).int, EventIds.fingerprint(b"%d" % i), i % 4)
        used, _ = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert len(ids) == 100_000
    assert used / 100_000 < 160  # bytes per accepted event: the id, the fingerprint, the dict slot
    ids.drop_partition(1)
    assert len(ids) == 75_000
    for p in (0, 2, 3):
        ids.drop_partition(p)
    assert len(ids) == 0


# --------------------------------------------------------------------------- watermark records
def _wm(producer: str, wm_us: int, tick: int, **over: Any) -> bytes:
    return control.dumps({**control.watermark(producer, PRODUCERS, wm_us, tick, ORIGIN), **over})


def _mark_ok(s: PartitionState, raw: bytes, now_us: int = NOW) -> MarkApplied:
    out = s.accept_watermark(raw, now_us)
    assert isinstance(out, MarkApplied), out
    return out


@pytest.mark.parametrize(
    "raw",
    [
        b"[1, 2, 3]",
        b'"watermark"',
        b"{}",
        b"not json",
        control.dumps({"producer": "w0"}),
        _wm("w0", ORIGIN, 0, watermark_us="soon"),
        _wm("w0", ORIGIN, 0, producers="w0"),
        _wm("w0", -HOUR, 0),
        _wm("w0", 2**62, 0),
        _wm("w0", ORIGIN, 2**60),
        _wm("intruder", ORIGIN + HOUR, 1),
        _wm("w0", ORIGIN + HOUR, 1, producers=["w0", "w1", "intruder"]),
    ],
)
def test_bad_watermark_is_rejected_and_changes_nothing(raw: bytes) -> None:
    s = strict_state(0, partitions=1)
    apply_ok(s, post("p1", "a", ORIGIN + SEC))
    _mark_ok(s, _wm("w0", ORIGIN + 30 * 60 * SEC, 0))
    before = (dict(s.producer_marks), s.producers, s.next_close_us, dict(s.windows))
    out = s.accept_watermark(raw, NOW)
    assert isinstance(out, Rejected)
    assert out.code == "bad_control"
    assert out.reason
    assert (dict(s.producer_marks), s.producers, s.next_close_us, dict(s.windows)) == before


def test_unknown_producer_cannot_freeze_the_partition() -> None:
    s = strict_state(0, partitions=1)
    apply_ok(s, post("p1", "a", ORIGIN + SEC))
    forged = control.dumps(control.watermark("ghost", [*PRODUCERS, "ghost"], ORIGIN + HOUR, 0, ORIGIN))
    out = s.accept_watermark(forged, NOW)
    assert isinstance(out, Rejected)
    assert "'ghost'" in out.reason
    assert "its producers are w0 and w1" in out.reason
    _mark_ok(s, _wm("w0", ORIGIN + HOUR, 0))
    done = _mark_ok(s, _wm("w1", ORIGIN + HOUR, 0))
    assert [p["window_start_us"] for p in done.partials] == [ORIGIN]  # ghost never joined: window 0 closed
    assert done.tick == 0


def test_watermark_closing_too_many_windows_is_rejected() -> None:
    s = strict_state(0, partitions=1)
    # a registered producer, but an origin at the epoch: every hourly window since 1970 would close
    epoch_mark = control.dumps(control.watermark("w0", PRODUCERS, NOW, 0, 0))
    expected = NOW // HOUR + 1  # windows [0, 1h), [1h, 2h), ... up to the one that holds NOW
    assert expected > 100_000
    out = s.accept_watermark(epoch_mark, NOW)
    assert isinstance(out, Rejected)
    assert out.code == "bad_control"
    assert f"would close {expected:,} event-time windows" in out.reason
    # once windows start at the origin, a mark 100,001 windows ahead is refused, 99,999 is fine
    _mark_ok(s, _wm("w0", ORIGIN, 0))
    _mark_ok(s, _wm("w1", ORIGIN, 0))
    far = ORIGIN + 100_001 * HOUR
    assert isinstance(s.accept_watermark(_wm("w0", far, 1), far), Rejected)
    assert isinstance(s.accept_watermark(_wm("w0", ORIGIN + 99_998 * HOUR, 1), far), MarkApplied)


def test_handoff_from_the_publisher_to_the_shards() -> None:
    s = PartitionState(
        0,
        1,
        window_us=HOUR,
        feed_size=5,
        max_event_bytes=65536,
        max_future_us=300 * SEC,
        registered=control.registered_producers(2),
    )
    _mark_ok(s, control.dumps(control.watermark("replay", ["replay"], ORIGIN + HOUR // 2, -1, ORIGIN)))
    hand = control.watermark("replay", ["shard-0", "shard-1"], ORIGIN + HOUR, 4, ORIGIN, handoff=True)
    assert [p["window_start_us"] for p in _mark_ok(s, control.dumps(hand)).partials] == [ORIGIN]
    assert s.producers == {"shard-0", "shard-1"}
    _mark_ok(
        s, control.dumps(control.watermark("shard-0", ["shard-0", "shard-1"], ORIGIN + 2 * HOUR, 5, ORIGIN))
    )
    last = _mark_ok(
        s, control.dumps(control.watermark("shard-1", ["shard-0", "shard-1"], ORIGIN + 2 * HOUR, 5, ORIGIN))
    )
    assert ([p["window_start_us"] for p in last.partials], last.tick) == ([ORIGIN + HOUR], 5)
    assert isinstance(
        s.accept_watermark(control.dumps(control.watermark("shard-2", ["shard-2"], NOW, 6, ORIGIN)), NOW),
        Rejected,
    )


# ------------------------------------------------------------------- a rebuild that fails (processor)
class _FakeProducer:
    def __init__(self, **_: Any) -> None:
        pass

    async def start(self) -> None:
        pass

    async def stop(self) -> None:
        pass


class _FakeConsumer:
    """Assigns partitions 0 and 1 on the first fetch, like a group coordinator would."""

    def __init__(self, **_: Any) -> None:
        self.fetches = 0
        self.listener: Any = None
        self.topic = ""

    async def start(self) -> None:
        pass

    async def stop(self) -> None:
        pass

    def subscribe(self, topics: list[str], listener: Any) -> None:
        self.topic, self.listener = topics[0], listener

    def assignment(self) -> set[Any]:
        return set()

    def pause(self, *_: Any) -> None:
        pass

    def resume(self, *_: Any) -> None:
        pass

    async def getmany(self, timeout_ms: int) -> dict[Any, Any]:
        self.fetches += 1
        if self.fetches == 1:
            await self.listener.on_partitions_assigned(
                [TopicPartition(self.topic, 0), TopicPartition(self.topic, 1)]
            )
        return {}


def test_a_failed_rebuild_is_logged_and_stops_the_processor(monkeypatch: pytest.MonkeyPatch) -> None:
    async def partition_count(bootstrap: str, topic: str) -> int:
        return 2

    async def rebuild(self: processor.ActionProcessor, partition: int) -> PartitionState:
        if partition == 1:
            raise ConnectionError("broker went away")
        return self._new_state(partition)

    monkeypatch.setattr(kafka, "producer", lambda *_, **__: _FakeProducer())  # the module processor calls
    monkeypatch.setattr(kafka, "consumer", lambda *_, **__: _FakeConsumer())
    monkeypatch.setattr(processor, "partition_count", partition_count)
    monkeypatch.setattr(processor.ActionProcessor, "_rebuild", rebuild)
    # a logger of its own: the module's may have been cached by an earlier test with a processor list that
    # a later configure_logging replaced, and capture_logs changes only the current list
    monkeypatch.setattr(processor, "log", structlog.get_logger("molt_society.streams.processor"))
    proc = processor.ActionProcessor(Settings(kafka_bootstrap="127.0.0.1:1"), "127.0.0.1:1", "s")
    with capture_logs() as logs, pytest.raises(processor.RebuildFailed) as info:
        asyncio.run(asyncio.wait_for(proc.run(asyncio.Event()), timeout=10))
    assert "could not rebuild partition 1" in str(info.value)
    assert isinstance(info.value.__cause__, ConnectionError)
    failed = [e for e in logs if e["event"] == "processor.rebuild_failed"]
    assert len(failed) == 1
    assert failed[0]["partition"] == 1
    assert failed[0]["log_level"] == "error"
    assert "broker went away" in failed[0]["error"]
    assert set(proc.states) == {0}  # never runs on without partition 1


def test_revoked_partitions_leave_the_id_index() -> None:
    proc = processor.ActionProcessor(Settings(kafka_bootstrap="127.0.0.1:1"), "127.0.0.1:1", "s")
    proc.partitions = 2
    s0, s1 = proc._new_state(0), proc._new_state(1)
    proc.states = {0: s0, 1: s1}
    p_a, p_b = post("a", "x", ORIGIN), post("b", "x", ORIGIN)
    assert s0.event_ids is s1.event_ids is proc.event_ids
    s0.accept_action(encode_event(p_a), NOW)  # no key: rejected (key_mismatch), nothing indexed
    assert len(proc.event_ids) == 0
    for ev in (p_a, p_b):
        key = partition_key(ev).encode()
        state = proc.states[kafka_partition(key, 2)]
        assert isinstance(state.accept_action(encode_event(ev), NOW, key=key), Accepted)
    assert len(proc.event_ids) == 2
    gone = kafka_partition(b"a", 2)
    asyncio.run(proc.revoked([TopicPartition(proc.t_actions, gone)]))
    assert len(proc.event_ids) == (0 if kafka_partition(b"b", 2) == gone else 1)
    asyncio.run(proc.revoked([TopicPartition(proc.t_actions, 1 - gone)]))
    assert len(proc.event_ids) == 0


def test_every_event_body_has_a_handler() -> None:
    """``accept_action`` dispatches on the body's class: a new event type needs its handler."""
    from typing import get_args

    from molt_society.schemas.events import EVENT_TYPES

    union = get_args(Event)[0]
    bodies = {cls.model_fields["body"].annotation for cls in get_args(union)}
    assert len(bodies) == len(EVENT_TYPES)
    assert set(PartitionState._BY_BODY) == bodies


@pytest.mark.parametrize("feed_size", [5, 600])
def test_a_feed_larger_than_the_hot_window_still_lists_as_many_newest_posts(feed_size: int) -> None:
    """A fitted society 10x the crawl's size needs feed lists of hundreds of posts: a partition keeps
    that many newest posts of a submolt, so its 'new' list is the ``feed_size`` newest of all it got."""
    from molt_society.algorithms.feeds import HOT_WINDOW

    s = new_state(feed_size)
    n = HOT_WINDOW + 200
    for i in range(n):
        apply_ok(s, post(f"w{i:04d}", f"a{i % 7}", ORIGIN + i * SEC))
    listed = s.feed_snapshot(1)["submolts"]["general"]["new"]
    assert [item["post_id"] for item in listed] == [f"w{i:04d}" for i in range(n - 1, n - 1 - feed_size, -1)]


def test_a_snapshot_waits_out_the_spacing_of_its_last_duration(monkeypatch: pytest.MonkeyPatch) -> None:
    """A partition due by count or time is snapshotted only SNAPSHOT_SPACING times its last snapshot's
    duration after it; a partition without a slow last snapshot is not held back."""
    settings = Settings(kafka_bootstrap="127.0.0.1:1", snapshot_every_events=10, snapshot_every_seconds=60)
    proc = processor.ActionProcessor(settings, "127.0.0.1:1", "s")
    proc.partitions = 2
    proc.states = {0: proc._new_state(0), 1: proc._new_state(1)}
    taken: list[int] = []

    async def snapshot(self: processor.ActionProcessor, state: PartitionState) -> None:
        taken.append(state.partition)

    async def drain(self: processor.ActionProcessor) -> None:
        return None

    monkeypatch.setattr(processor.ActionProcessor, "_snapshot", snapshot)
    monkeypatch.setattr(processor.ActionProcessor, "_drain", drain)
    now = time.monotonic()
    proc.changed = {0: 50, 1: 50}  # both due by count
    proc.snapshot_at = {0: now - 20.0, 1: now - 20.0}
    proc.snapshot_seconds = {0: 1.0, 1: 0.5}  # 30 s and 15 s of spacing
    asyncio.run(proc._snapshot_due())
    assert taken == [1]
    proc.snapshot_at[0] = now - 31.0
    asyncio.run(proc._snapshot_due())
    assert taken == [1, 0, 1]  # partition 1's fake snapshot left its count and time as they were
