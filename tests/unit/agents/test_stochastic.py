"""The stochastic brain: determinism, genesis, feed-driven actions, and the offline society's shape."""

from __future__ import annotations

import dataclasses
import statistics
from collections import Counter
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta

import numpy as np
import pytest

from molt_society.agents.behaviour import Behaviour, load_behaviour
from molt_society.agents.brain import FeedView, TickContext
from molt_society.agents.genesis import COHORT
from molt_society.agents.offline import simulate
from molt_society.agents.roster import AgentSpec, build_roster
from molt_society.agents.stochastic import StochasticBrain
from molt_society.schemas.control import FeedItem
from molt_society.schemas.events import (
    AgentsJoined,
    CommentCreated,
    Event,
    PostCreated,
    SubmoltCreated,
    VoteCast,
)
from molt_society.schemas.wire import encode_event

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
    assert len(a) >= (15 if tick == 0 else 60)  # genesis: 14 submolts and one cohort of 60 agents
    assert a == b
    c = StochasticBrain(behaviour).decide_now(agents, feed, ctx(behaviour, tick, seed=2))
    assert [e.event_id for e in c] != [e.event_id for e in a]


# ------------------------------------------------------------------------------------------- genesis
def test_genesis(behaviour: Behaviour) -> None:
    shards = 3
    n = 700  # 234 agents in shard 0: one cohort; more would split at COHORT
    roster = build_roster(9, n, shards, behaviour)
    brain = StochasticBrain(behaviour)
    submolts = tuple(behaviour.submolts.names)
    events: list[Event] = []
    for shard in range(shards):
        members = roster.cohort(shard)
        out = brain.decide_now(members, FeedView(-1, {}), ctx(behaviour, 0, shard))
        assert {e.actor for e in out} <= {a.agent_id for a in members}
        events += out
    assert {type(e) for e in events} == {AgentsJoined, SubmoltCreated}

    joined = [m for e in events if isinstance(e, AgentsJoined) for m in e.body.agents]
    assert Counter(m.agent_id for m in joined) == Counter({f"agent-{i:06d}": 1 for i in range(n)})
    assert all(e.actor == e.body.agents[0].agent_id for e in events if isinstance(e, AgentsJoined))
    assert all(len(e.body.agents) <= COHORT for e in events if isinstance(e, AgentsJoined))
    # what each agent registers is the roster's: name, brain, subscriptions (a weighted draw of 1-4)
    by_id = {m.agent_id: m for m in joined}
    for i in range(n):
        spec = roster.spec(i)
        m = by_id[spec.agent_id]
        assert (m.name, m.brain, m.subscriptions) == (spec.name, "stochastic", spec.subscriptions)
        assert 1 <= len(m.subscriptions) <= 4
        assert len(set(m.subscriptions)) == len(m.subscriptions)
        assert set(m.subscriptions) <= set(submolts)

    created = [(e.actor, e.body.submolt) for e in events if isinstance(e, SubmoltCreated)]
    assert sorted(s for _, s in created) == sorted(submolts)
    for actor, submolt in created:
        assert submolts[int(actor.removeprefix("agent-"))] == submolt

    tick_end = START + timedelta(seconds=TICK_S)
    assert all(START <= e.occurred_at < tick_end for e in events)
    assert len({e.event_id for e in events}) == len(events)


def test_genesis_cohorts_split_by_count_and_size(behaviour: Behaviour) -> None:
    """Cohorts hold at most COHORT agents and about COHORT_BYTES of personas: LLM agents' long personas
    make smaller cohorts, every one under the record bound."""
    roster = build_roster(2, 2 * COHORT + 5, 1, behaviour, llm_agents=COHORT + 3, models=("m",))
    events = StochasticBrain(behaviour).decide_now(roster.cohort(0), FeedView(-1, {}), ctx(behaviour, 0))
    cohorts = [e for e in events if isinstance(e, AgentsJoined)]
    assert [m.agent_id for e in cohorts for m in e.body.agents] == [a.agent_id for a in roster]
    assert max(len(encode_event(e)) for e in cohorts) < 64 * 1024
    assert all(len(e.body.agents) <= COHORT for e in cohorts)
    assert any(m.persona for e in cohorts for m in e.body.agents)


def test_subscription_draw_follows_the_weights(behaviour: Behaviour) -> None:
    """The vectorised draw without replacement: the share of agents subscribed to each submolt matches
    numpy's successive weighted sampling (``Generator.choice(replace=False, p=w)``) on as many agents."""
    n = 40_000
    roster = build_roster(1, n, 1, behaviour)
    names = behaviour.submolts.names
    ours = np.zeros(len(names))
    for j in range(len(names)):
        ours[j] = np.count_nonzero(roster.subscription_bits & np.uint64(1 << j)) / n
    rng = np.random.default_rng(99)
    w = np.arange(1, len(names) + 1, dtype=float) ** -behaviour.submolts.zipf_exponent
    w /= w.sum()
    ref = np.zeros(len(names))
    for _ in range(n):
        k = int(rng.integers(1, 5))
        ref[rng.choice(len(names), size=k, replace=False, p=w)] += 1
    ref /= n
    assert np.allclose(ours, ref, atol=0.012), (ours.round(3), ref.round(3))


def test_genesis_with_fewer_agents_than_submolts(behaviour: Behaviour) -> None:
    roster = build_roster(3, 4, 1, behaviour)
    events = StochasticBrain(behaviour).decide_now(roster.everyone(), FeedView(-1, {}), ctx(behaviour, 0))
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
    assert sum(len(e.body.agents) for e in events if isinstance(e, AgentsJoined)) == 300

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
