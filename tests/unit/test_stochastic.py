"""The stochastic brain: determinism, genesis, feed-driven actions, and the offline society's shape."""

from __future__ import annotations

import dataclasses
import statistics
from collections import Counter
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta

import numpy as np
import pytest

from agents.behaviour import Behaviour, load_behaviour
from agents.brain import FeedView, TickContext
from agents.offline import simulate
from agents.roster import AgentSpec, build_roster
from agents.stochastic import StochasticBrain
from schemas.control import FeedItem
from schemas.events import (
    AgentRegistered,
    AgentSubscribed,
    CommentCreated,
    Event,
    PostCreated,
    SubmoltCreated,
    VoteCast,
)

START = datetime(2026, 1, 28, tzinfo=UTC)
TICK_S = 60.0


@pytest.fixture(scope="module")
def behaviour() -> Behaviour:
    return load_behaviour()


def ctx(behaviour: Behaviour, tick: int, shard: int = 0, seed: int = 1) -> TickContext:
    return TickContext(
        "soc",
        tick,
        START + timedelta(seconds=tick * TICK_S),
        TICK_S,
        np.random.default_rng([seed, shard, tick]),
        tuple(behaviour.submolts.names),
    )


def eager(agents: Sequence[AgentSpec]) -> list[AgentSpec]:
    """The same agents, acting every tick."""
    return [dataclasses.replace(a, rate=1.0) for a in agents]


def _us(value: datetime) -> int:
    return (value - datetime(1970, 1, 1, tzinfo=UTC)) // timedelta(microseconds=1)


def _feed(behaviour: Behaviour, tick: int) -> FeedView:
    """A feed with posts in every submolt; some have recent comments at various depths."""
    subs: dict[str, dict[str, list[FeedItem]]] = {}
    for s_i, s in enumerate(behaviour.submolts.names):
        items: list[FeedItem] = []
        for k in range(6):
            pid = f"post-{s}-{k}"
            recent: list[list[object]] = []
            if k % 3 != 2:
                for j in range(1 + (k + s_i) % 5):
                    recent.append([f"cm-{s}-{k}-{j}", f"author-{j}", 1 + (j * 7 + k) % 4, _us(START) + j])
            items.append(
                {
                    "post_id": pid,
                    "author": f"op-{k}",
                    "submolt": s,
                    "title": "t",
                    "created_us": _us(START) + k,
                    "score": k,
                    "comments": len(recent),
                    "hot": float(k),
                    "recent": recent,
                }
            )
        subs[s] = {"new": list(reversed(items)), "hot": items[::2] + items[1::2]}
    return FeedView(tick, subs)


# ---------------------------------------------------------------------------------------- determinism
@pytest.mark.parametrize("tick", [0, 3])
def test_same_seeded_context_same_events(behaviour: Behaviour, tick: int) -> None:
    agents = eager(build_roster(5, 60, 1, behaviour))
    feed = _feed(behaviour, tick - 1)
    a = StochasticBrain(behaviour).decide_now(agents, feed, ctx(behaviour, tick))
    b = StochasticBrain(behaviour).decide_now(agents, feed, ctx(behaviour, tick))
    assert len(a) >= 60
    assert a == b
    c = StochasticBrain(behaviour).decide_now(agents, feed, ctx(behaviour, tick, seed=2))
    assert [e.event_id for e in c] != [e.event_id for e in a]


# ------------------------------------------------------------------------------------------- genesis
def test_genesis(behaviour: Behaviour) -> None:
    shards = 3
    roster = build_roster(9, 50, shards, behaviour)
    brain = StochasticBrain(behaviour)
    submolts = tuple(behaviour.submolts.names)
    assert len(roster) > len(submolts)
    events: list[Event] = []
    for shard in range(shards):
        members = [a for a in roster if a.shard == shard]
        out = brain.decide_now(members, FeedView(-1, {}), ctx(behaviour, 0, shard))
        assert {e.actor for e in out} <= {a.agent_id for a in members}
        events += out
    assert {type(e) for e in events} == {AgentRegistered, SubmoltCreated, AgentSubscribed}

    registered = Counter(e.actor for e in events if isinstance(e, AgentRegistered))
    assert registered == Counter({a.agent_id: 1 for a in roster})
    names = {e.actor: e.body.name for e in events if isinstance(e, AgentRegistered)}
    assert names == {a.agent_id: a.name for a in roster}

    subs = [(e.actor, e.body.submolt) for e in events if isinstance(e, AgentSubscribed)]
    assert len(subs) == len(set(subs))
    assert sorted(subs) == sorted((a.agent_id, s) for a in roster for s in a.subscriptions)

    created = [(e.actor, e.body.submolt) for e in events if isinstance(e, SubmoltCreated)]
    assert sorted(s for _, s in created) == sorted(submolts)
    by_id = {a.agent_id: a for a in roster}
    for actor, submolt in created:
        assert by_id[actor].index < len(submolts)
        assert submolts[by_id[actor].index] == submolt

    tick_end = START + timedelta(seconds=TICK_S)
    assert all(START <= e.occurred_at < tick_end for e in events)
    assert len({e.event_id for e in events}) == len(events)


def test_genesis_with_fewer_agents_than_submolts(behaviour: Behaviour) -> None:
    roster = build_roster(3, 4, 1, behaviour)
    events = StochasticBrain(behaviour).decide_now(roster, FeedView(-1, {}), ctx(behaviour, 0))
    created = [e.body.submolt for e in events if isinstance(e, SubmoltCreated)]
    assert created == list(behaviour.submolts.names[:4])


# ------------------------------------------------------------------------------------ after genesis
def test_empty_feed_only_posts(behaviour: Behaviour) -> None:
    agents = eager(build_roster(4, 80, 1, behaviour))
    brain = StochasticBrain(behaviour)
    for tick in range(1, 6):
        events = brain.decide_now(agents, FeedView(tick - 1, {}), ctx(behaviour, tick))
        assert len(events) == len(agents)  # every agent acts once (rate 1)
        assert all(isinstance(e, PostCreated) for e in events)
        assert sorted(e.actor for e in events) == sorted(a.agent_id for a in agents)
        by_id = {a.agent_id: a for a in agents}
        for e in events:
            assert isinstance(e, PostCreated)
            assert e.body.submolt in by_id[e.actor].subscriptions
            assert e.body.post_id == str(e.event_id)
            start = START + timedelta(seconds=tick * TICK_S)
            assert start <= e.occurred_at < start + timedelta(seconds=TICK_S)


def test_actions_follow_the_feed(behaviour: Behaviour) -> None:
    agents = eager(build_roster(6, 150, 1, behaviour))
    by_id = {a.agent_id: a for a in agents}
    brain = StochasticBrain(behaviour)
    feed = _feed(behaviour, 0)
    items = {it["post_id"]: it for lists in feed.submolts.values() for it in lists["new"]}
    kinds: Counter[str] = Counter()
    for tick in range(1, 8):
        events = brain.decide_now(agents, feed, ctx(behaviour, tick, seed=tick))
        assert len(events) == len(agents)
        for e in events:
            assert e.actor in by_id
            if isinstance(e, PostCreated):
                kinds["post"] += 1
                continue
            assert isinstance(e, CommentCreated | VoteCast)
            post_id = e.body.post_id
            assert post_id in items
            # the post comes from the feed of a submolt the agent subscribes to
            assert items[post_id]["submolt"] in by_id[e.actor].subscriptions
            recent = {r[0]: r for r in items[post_id]["recent"]}
            if isinstance(e, CommentCreated):
                b = e.body
                assert b.comment_id == str(e.event_id)
                if b.parent_id is None:
                    kinds["top"] += 1
                    assert b.depth == 1
                    assert e.causation_id == post_id
                else:
                    kinds["reply"] += 1
                    assert b.parent_id in recent
                    assert b.depth == int(recent[b.parent_id][2]) + 1
                    assert e.causation_id == b.parent_id
            else:
                v = e.body
                assert v.value in (1, -1)
                assert e.causation_id == v.target_id
                if v.target_type == "post":
                    kinds["post_vote"] += 1
                    assert v.target_id == post_id
                else:
                    kinds["comment_vote"] += 1
                    assert v.target_id in recent
    # every branch was exercised
    assert all(kinds[k] > 0 for k in ("post", "top", "reply", "post_vote", "comment_vote")), kinds
    assert kinds["top"] > kinds["reply"]


# --------------------------------------------------------------------------------- offline society
def test_offline_society_shape(behaviour: Behaviour) -> None:
    result = simulate(seed=7, agents=300, ticks=60, behaviour=behaviour, start=START)
    events = result.events
    roster_ids = {f"agent-{i:06d}" for i in range(300)}
    assert {e.actor for e in events} <= roster_ids
    assert sum(isinstance(e, AgentRegistered) for e in events) == 300

    posts = [e for e in events if isinstance(e, PostCreated)]
    comments = [e for e in events if isinstance(e, CommentCreated)]
    assert len(posts) >= 20
    assert len(comments) >= 50

    top_level = sum(1 for c in comments if c.body.parent_id is None)
    assert top_level / len(comments) > 0.85
    assert all((c.body.parent_id is None) == (c.body.depth == 1) for c in comments)

    commented = {c.body.post_id for c in comments}
    assert commented <= {p.body.post_id for p in posts}
    assert any(p.body.post_id not in commented for p in posts)

    per_agent = Counter(p.actor for p in posts)
    assert max(per_agent.values()) >= 5 * statistics.median(per_agent.values())

    # every reply's parent is an earlier comment of the same thread, one level up
    seen: dict[str, tuple[str, int]] = {}
    for c in comments:
        if c.body.parent_id is not None:
            assert seen[c.body.parent_id] == (c.body.post_id, c.body.depth - 1)
        seen[c.body.comment_id] = (c.body.post_id, c.body.depth)
