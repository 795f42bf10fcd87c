"""An arm's interventions as the agent worker applies them (``agents.interventions``), each piece against an
independent computation: hand-built unions and orders, blake2b shares computed here, events checked field by
field, and the same brains run with and without the arm."""

from __future__ import annotations

import asyncio
import hashlib
import random
import re
from datetime import UTC, datetime, timedelta
from typing import Any

import numpy as np
import orjson
import pytest
from aiohttp import web
from loopback_chat import serve_chat

from molt_society.agents.actions import comment_created, post_created, vote_cast
from molt_society.agents.behaviour import Behaviour, load_behaviour
from molt_society.agents.brain import FeedView, TickContext
from molt_society.agents.interventions import ArmRuntime, PolicyFeedView, ScaledCohort, in_share
from molt_society.agents.llm_brain import AgentTuning, LLMBrain
from molt_society.agents.llm_client import ChatClient
from molt_society.agents.roster import AgentSpec, Cohort, build_roster
from molt_society.agents.stochastic import StochasticBrain
from molt_society.algorithms.feed_policy import RandomPolicy, Viewer
from molt_society.schemas.arm_plan import ArmPlan
from molt_society.schemas.control import FeedItem
from molt_society.schemas.events import (
    AgentBanned,
    AgentsJoined,
    CommentCreated,
    ContentRemoved,
    Event,
    InterventionApplied,
    PostCreated,
    VoteCast,
)
from molt_society.schemas.ids import uuid7
from molt_society.schemas.wire import decode_event, encode_event

START = datetime(2026, 1, 28, tzinfo=UTC)
FORK = 10
SEED = 7
N = 3  # feed_size


def _us(value: datetime) -> int:
    return (value - datetime(1970, 1, 1, tzinfo=UTC)) // timedelta(microseconds=1)


def item(
    pid: str,
    author: str,
    sub: str,
    created: int,
    score: int,
    hot: float,
    recent: list[list[Any]] | None = None,
) -> FeedItem:
    return {
        "post_id": pid,
        "author": author,
        "submolt": sub,
        "title": f"title of {pid}",
        "created_us": created,
        "score": score,
        "comments": len(recent or []),
        "hot": hot,
        "recent": recent or [],
        "excerpt": f"text of {pid}",
    }


P1 = item("p1", "agent-000011", "a", 100, 5, 9.0, [["c1", "agent-000005", 1, 0, "a comment by five"]])
P2 = item("p2", "agent-000012", "a", 200, 9, 8.0)
P3 = item("p3", "agent-000013", "a", 300, 1, 7.0)
P4 = item("p4", "agent-000014", "a", 400, 7, 1.0)  # only in "new"
P5 = item("p5", "agent-000015", "a", 500, 0, 0.5, [["c2", "agent-000020", 1, 0, "another one"]])
Q1 = item("q1", "agent-000013", "b", 150, 2, 3.0, [["c3", "agent-000005", 1, 0, "five again here"]])
Q2 = item("q2", "agent-000005", "b", 250, 3, 2.0)
FEED = FeedView(
    FORK - 1,
    {"a": {"hot": [P1, P2, P3], "new": [P5, P4, P3]}, "b": {"hot": [Q1, Q2], "new": [Q2, Q1]}},
)
UNION_A = [P1, P2, P3, P5, P4]  # hot and new of "a", each post once


@pytest.fixture(scope="module")
def behaviour() -> Behaviour:
    return load_behaviour()


def make_plan(interventions: list[dict[str, Any]], **over: Any) -> ArmPlan:
    doc: dict[str, Any] = {
        "experiment": "exp",
        "arm": "treat",
        "seed": SEED,
        "fork_tick": FORK,
        "fork_at_us": _us(START + timedelta(minutes=FORK)),
        "interventions": interventions,
    }
    doc.update(over)
    return ArmPlan.model_validate(doc)


def runtime(plan: ArmPlan, behaviour: Behaviour, agents: int = 40, shards: int = 2, **kw: Any) -> ArmRuntime:
    roster = build_roster(SEED, agents, shards, behaviour)
    return ArmRuntime(plan, seed=SEED, roster=roster, behaviour=behaviour, feed_size=N, **kw)


def ctx(tick: int, shard: int = 0) -> TickContext:
    return TickContext(
        "soc",
        tick,
        START + timedelta(minutes=tick),
        60.0,
        np.random.default_rng([SEED, shard, tick]),
        ("a", "b"),
    )


def key_share(agent: str, share: float) -> bool:
    """The share rule computed here: blake2b-64 (little endian) of the id over 2**64."""
    return int.from_bytes(hashlib.blake2b(agent.encode(), digest_size=8).digest(), "little") / 2**64 < share


POLICY_A = {"kind": "feed_policy", "policy": "top", "submolts": ["a", "b"]}
TERMS = {"kind": "moderation", "rule": "terms", "terms": ["crab"]}
BEHAV = {"kind": "behaviour", "share": 0.2, "rate_scale": 2.0}
INJECT = {
    "kind": "inject",
    "at": 0,
    "item": "post",
    "submolt": "a",
    "title": "Hi",
    "content": "Hello all",
    "new_author": True,
}
BANS = [
    {"agent_id": "agent-000002", "rule": "ban_top_pagerank", "reason": "rank 1"},
    {"agent_id": "agent-000003", "rule": "ban_top_pagerank"},
]
REMOVALS = [{"target_type": "comment", "target_id": "c9", "post_id": "p9", "rule": "terms", "reason": "x"}]


# ------------------------------------------------------------------------------------------- records
def test_fork_tick_records_every_intervention_ban_and_removal(behaviour: Behaviour) -> None:
    plan = make_plan([POLICY_A, TERMS, BEHAV, INJECT], bans=BANS, removals=REMOVALS)
    arm = runtime(plan, behaviour)
    events = arm.own_events(0, FEED, ctx(FORK))
    assert [e.type for e in events] == [
        *["intervention_applied"] * 4,
        "agent_banned",
        "agent_banned",
        "content_removed",
        "agents_joined",
        "post_created",
    ]
    applied = [e for e in events if isinstance(e, InterventionApplied)]
    assert [e.body.kind for e in applied] == ["feed_policy", "moderation", "behaviour", "inject"]
    assert [e.body.scope for e in applied] == ["submolts:a,b", "all", "share:0.2", "submolts:a"]
    for e, iv in zip(applied, plan.interventions, strict=True):
        assert orjson.loads(e.body.params) == iv.model_dump(mode="json")
        assert (e.actor, e.body.experiment, e.body.arm) == ("experiment", "exp", "treat")
    bans = [e for e in events if isinstance(e, AgentBanned)]
    assert [(e.actor, e.body.agent_id, e.body.rule, e.body.reason) for e in bans] == [
        ("moderator", "agent-000002", "ban_top_pagerank", "rank 1"),
        ("moderator", "agent-000003", "ban_top_pagerank", ""),
    ]
    removed = next(e for e in events if isinstance(e, ContentRemoved))
    assert (removed.actor, removed.body.target_type, removed.body.target_id, removed.body.post_id) == (
        "moderator",
        "comment",
        "c9",
        "p9",
    )
    start = START + timedelta(minutes=FORK)
    assert [e.occurred_at for e in events] == [start + timedelta(microseconds=k) for k in range(len(events))]
    assert len({e.event_id for e in events}) == len(events)
    for ev in events:  # valid on the wire
        assert decode_event(encode_event(ev), max_bytes=1 << 20) == ev
    # a restarted worker regenerates the very same events
    again = runtime(plan, behaviour).own_events(0, FEED, ctx(FORK))
    assert [encode_event(e) for e in again] == [encode_event(e) for e in events]
    # only shard 0, only from the fork tick, the records only in it
    assert arm.own_events(1, FEED, ctx(FORK, 1)) == []
    assert arm.own_events(0, FEED, ctx(FORK - 1)) == []
    assert arm.own_events(0, FEED, ctx(FORK + 1)) == []


# ------------------------------------------------------------------------------------------- injection
def test_injections_come_at_their_tick_by_their_author(behaviour: Behaviour) -> None:
    comment = {
        "kind": "inject",
        "at": 2,
        "item": "comment",
        "submolt": "a",
        "content": "Nice",
        "author": "agent-000001",
    }
    reply = {**comment, "at": 3, "reply_to": "q2", "submolt": "b"}
    probes = {"kind": "inject", "at": 2, "item": "post", "submolt": "a", "probes": 2, "new_author": True}
    new_post = {**INJECT, "at": 3}
    arm = runtime(make_plan([comment, reply, probes, new_post]), behaviour)
    assert arm.own_events(0, FEED, ctx(FORK)) != []  # the four intervention_applied records
    assert arm.own_events(0, FEED, ctx(FORK + 1)) == []
    at2 = arm.own_events(0, FEED, ctx(FORK + 2))  # the probes injection is skipped (the runner expands it)
    assert len(at2) == 1
    assert isinstance(at2[0], CommentCreated)
    c = at2[0]
    # no reply_to: the top hot post of the submolt in the view
    assert (c.actor, c.body.post_id, c.body.parent_id, c.body.depth, c.body.content) == (
        "agent-000001",
        "p1",
        None,
        1,
        "Nice",
    )
    at3 = arm.own_events(0, FEED, ctx(FORK + 3))
    assert [e.type for e in at3] == ["comment_created", "agents_joined", "post_created"]
    assert isinstance(at3[0], CommentCreated)
    assert at3[0].body.post_id == "q2"
    joined, post = at3[1], at3[2]
    assert isinstance(joined, AgentsJoined)
    assert isinstance(post, PostCreated)
    assert joined.actor == post.actor == "injected-3"  # the intervention's index
    assert joined.body.agents[0].subscriptions == ("a",)
    assert (post.body.submolt, post.body.title, post.body.content) == ("a", "Hi", "Hello all")
    assert arm.own_events(1, FEED, ctx(FORK + 3, 1)) == []


def test_a_comment_injection_with_no_post_in_view_is_skipped(behaviour: Behaviour) -> None:
    comment = {"kind": "inject", "at": 1, "item": "comment", "submolt": "zzz", "content": "x", "author": "a1"}
    arm = runtime(make_plan([comment]), behaviour)
    assert arm.own_events(0, FEED, ctx(FORK + 1)) == []


# ------------------------------------------------------------------------------------------- feed policy
def test_top_policy_for_some_submolts(behaviour: Behaviour) -> None:
    arm = runtime(make_plan([{"kind": "feed_policy", "policy": "top", "submolts": ["a"]}]), behaviour)
    view = arm.view(FEED, FORK)
    assert isinstance(view, PolicyFeedView)
    lists = view.lists_for("agent-000001", "a")
    expected = sorted(UNION_A, key=lambda i: -i["score"])[:N]  # scores 5, 9, 1, 0, 7: all distinct
    assert [i["post_id"] for i in lists["hot"]] == ["p2", "p4", "p1"] == [i["post_id"] for i in expected]
    assert lists["new"] == FEED.lists("a")["new"]
    assert view.policy_ranked("agent-000001", "a")
    assert view.lists_for("agent-000001", "a") is lists  # cached within the tick
    assert view.lists_for("agent-000001", "b") == FEED.lists("b")
    assert not view.policy_ranked("agent-000001", "b")
    assert FEED.lists_for("agent-000001", "a") == FEED.lists("a")  # the plain view: everyone the same


def test_random_policy_for_a_share_of_agents(behaviour: Behaviour) -> None:
    arm = runtime(make_plan([{"kind": "feed_policy", "policy": "random", "share": 0.5}]), behaviour)
    view = arm.view(FEED, FORK)
    inside = outside = 0
    for k in range(60):
        agent = f"agent-{k:06d}"
        hot = view.lists_for(agent, "a")["hot"]
        assert in_share(agent, 0.5) == key_share(agent, 0.5)
        if key_share(agent, 0.5):
            inside += 1
            ranked = RandomPolicy().rank(UNION_A, N, Viewer(agent, FORK, SEED))
            assert hot == ranked
            assert len(ranked) == N
        else:
            outside += 1
            assert hot == FEED.lists("a")["hot"]
    assert inside > 10
    assert outside > 10


def test_following_is_the_authors_an_agent_commented_on(behaviour: Behaviour) -> None:
    arm = runtime(make_plan([{"kind": "feed_policy", "policy": "following"}]), behaviour)
    view = arm.view(FEED, FORK)
    # agent-000005 commented on p1 (by agent-000011) and q1 (by agent-000013): in "a", p1 and p3 are theirs
    assert [i["post_id"] for i in view.lists_for("agent-000005", "a")["hot"]] == ["p3", "p1"]  # newest first
    assert [i["post_id"] for i in view.lists_for("agent-000005", "b")["hot"]] == ["q1"]
    assert view.lists_for("agent-000030", "a")["hot"] == []  # commented nowhere: follows no one


def _fake_embed(calls: list[list[str]]) -> Any:
    def embed(texts: list[str]) -> np.ndarray:
        calls.append(list(texts))
        rows = []
        for t in texts:
            v = np.random.default_rng(int(hashlib.sha256(t.encode()).hexdigest()[:12], 16)).normal(size=8)
            rows.append(v / np.linalg.norm(v))
        return np.array(rows, dtype=np.float32)

    return embed


def test_personalised_policy_ranks_by_the_agents_own_texts(behaviour: Behaviour) -> None:
    calls: list[list[str]] = []
    embed = _fake_embed(calls)
    arm = runtime(make_plan([{"kind": "feed_policy", "policy": "personalised"}]), behaviour, embed=embed)
    view = arm.view(FEED, FORK)
    assert len(calls) == 1  # one batch: 7 posts and 3 comment excerpts
    assert len(calls[0]) == 10

    def vec(text: str) -> np.ndarray:
        return np.asarray(embed([text])[0], dtype=np.float64)

    # agent-000005's texts in the view: its post q2, its comments c1 and c3
    own = [vec("title of q2\ntext of q2"), vec("a comment by five"), vec("five again here")]
    profile = np.mean(own, axis=0)
    profile /= np.linalg.norm(profile)
    cos = {
        i["post_id"]: float(profile @ vec(f"title of {i['post_id']}\ntext of {i['post_id']}"))
        for i in UNION_A
    }
    expected = sorted(cos, key=lambda p: -cos[p])[:N]
    assert [i["post_id"] for i in view.lists_for("agent-000005", "a")["hot"]] == expected
    # no text of its own: the hot fallback (hot scores 9, 8, 7, 0.5, 1)
    assert [i["post_id"] for i in view.lists_for("agent-000030", "a")["hot"]] == ["p1", "p2", "p3"]
    calls.clear()
    arm.view(FEED, FORK + 1)
    assert calls == []  # everything in view was embedded already


# ------------------------------------------------------------------------------------------- bans
def _eager(behaviour: Behaviour) -> Behaviour:
    activity = behaviour.activity.model_copy(update={"base_rate": 1.0, "max_rate": 1.0})
    return behaviour.model_copy(update={"activity": activity})


def test_banned_agents_take_no_action(behaviour: Behaviour) -> None:
    eager = _eager(behaviour)
    bans = [*BANS, {"agent_id": "agent-999999", "rule": "r"}, {"agent_id": "someone", "rule": "r"}]
    arm = runtime(make_plan([], bans=bans), eager)
    roster = arm.roster
    brain = StochasticBrain(eager)
    brains = {"stochastic": brain}
    cohorts: dict[int, Cohort] = {}

    def cohort(shard: int, name: str) -> Cohort:
        return cohorts.setdefault(shard, roster.cohort(shard).of_brain(name))

    # banned agents stay in the cohorts (their draws keep every other agent's draws as in the control)
    held = sorted(int(i) for s in range(2) for _, c in arm.brains(s, brains, cohort) for i in c.indices)
    assert held == list(range(40))
    for tick in range(FORK, FORK + 3):
        for shard in range(2):
            control = brain.decide_now(cohort(shard, "stochastic"), FEED, ctx(tick, shard))
            treated = [
                ev
                for b, c in arm.brains(shard, brains, cohort)
                for ev in asyncio.run(b.decide(c, FEED, ctx(tick, shard)))
                if not arm.refused(ev)
            ]
            banned_here = {"agent-000002", "agent-000003"} & {e.actor for e in control}
            assert banned_here  # every agent acts every tick: the banned ones would have
            assert not banned_here & {e.actor for e in treated}
            # common random numbers: everyone else's events are the control's, event for event
            assert treated == [e for e in control if e.actor not in banned_here]


# ------------------------------------------------------------------------------------------- behaviour
def test_behaviour_override_takes_a_salted_share(behaviour: Behaviour) -> None:
    override = {"kind": "behaviour", "share": 0.5, "rate_scale": 3.0, "post_weight": 5.0, "hot_share": 1.0}
    arm = runtime(make_plan([POLICY_A, override]), behaviour, agents=200)
    brain = StochasticBrain(behaviour)
    roster = arm.roster
    groups = arm.brains(0, {"stochastic": brain}, lambda s, n: roster.cohort(s).of_brain(n))
    (base_brain, base), (over_brain, over) = groups
    assert base_brain is brain
    assert isinstance(over, ScaledCohort)
    mine = [int(i) for i in roster.cohort(0).indices]
    salted = [i for i in mine if key_share(f"agent-{i:06d}#1", 0.5)]  # the intervention's index is 1
    assert [int(i) for i in over.indices] == salted
    assert [int(i) for i in base.indices] == [i for i in mine if i not in salted]
    assert salted != [i for i in mine if key_share(f"agent-{i:06d}", 0.5)]  # salting changes the share
    np.testing.assert_allclose(over.rates, np.minimum(1.0, roster.rates[salted] * 3.0))
    assert over[0].rate == pytest.approx(min(1.0, float(roster.rates[salted[0]]) * 3.0))
    assert isinstance(over_brain, StochasticBrain)
    b = over_brain.b
    assert (b.actions.post, b.actions.comment, b.actions.vote) == (
        5.0,
        behaviour.actions.comment,
        behaviour.actions.vote,
    )
    assert (b.targets.hot_share, b.targets.reply_prob) == (1.0, behaviour.targets.reply_prob)


def test_llm_overrides_only_for_the_share(behaviour: Behaviour) -> None:
    arm = runtime(
        make_plan([{"kind": "behaviour", "share": 0.5, "temperature": 0.1, "model": "m-x"}]), behaviour
    )
    for k in range(40):
        agent = f"agent-{k:06d}"
        expected = AgentTuning("m-x", 0.1) if key_share(f"{agent}#0", 0.5) else None
        assert arm.tuning(agent) == expected
    only_llm = runtime(make_plan([{"kind": "behaviour", "share": 1.0, "temperature": 0.3}]), behaviour)
    assert only_llm.override_brains == {}  # no stochastic override: the stochastic agents stay as they are


def test_the_llm_brain_calls_with_the_agents_overrides() -> None:
    seen: list[dict[str, Any]] = []

    async def handler(request: web.Request) -> web.Response:
        seen.append(await request.json())
        reply = {"choices": [{"message": {"role": "assistant", "content": '{"action": "nothing"}'}}]}
        return web.json_response(reply)

    async def go() -> None:
        runner, url = await serve_chat(handler)
        try:
            async with ChatClient(url, backoff_s=0.01, max_attempts=1) as client:
                brain = LLMBrain(client, temperature=0.7)
                brain.tuning = lambda a: AgentTuning("m-x", 0.1) if a == "agent-000001" else None
                agents = [
                    AgentSpec(i, f"agent-{i:06d}", f"molty_{i}", 0, 1.0, ("a",), "llm", "m-a", "p")
                    for i in range(3)
                ]
                await brain.decide(agents, FEED, ctx(FORK))
        finally:
            await runner.cleanup()

    asyncio.run(go())
    by_agent = {re.search(r"You are (molty_\d+)", s["messages"][0]["content"]).group(1): s for s in seen}  # type: ignore[union-attr]
    assert (by_agent["molty_1"]["model"], by_agent["molty_1"]["temperature"]) == ("m-x", 0.1)
    assert (by_agent["molty_0"]["model"], by_agent["molty_0"]["temperature"]) == ("m-a", 0.7)


# ------------------------------------------------------------------------------- brains read lists_for
class _OwnLists(FeedView):
    """A view where agent-000001 sees only post q2 in "a"; everyone else the shared lists."""

    def lists_for(self, agent_id: str, submolt: str) -> dict[str, list[FeedItem]]:
        if agent_id == "agent-000001":
            return {"hot": [Q2], "new": [Q2]}
        return self.lists(submolt)


def test_the_stochastic_brain_picks_from_the_agents_own_lists(behaviour: Behaviour) -> None:
    eager = _eager(behaviour)
    brain = StochasticBrain(eager)
    roster = build_roster(SEED, 2, 1, eager)
    view = _OwnLists(FEED.tick, {s: FEED.submolts["a"] for s in eager.submolts.names})
    targets: dict[str, set[str]] = {"agent-000000": set(), "agent-000001": set()}
    for tick in range(FORK, FORK + 40):
        for ev in brain.decide_now(roster.cohort(0), view, ctx(tick)):
            if isinstance(ev, CommentCreated | VoteCast):
                targets[ev.actor].add(ev.body.post_id)
    assert targets["agent-000001"] == {"q2"}
    assert len(targets["agent-000000"]) > 1


def test_the_llm_feed_keeps_a_policy_order(behaviour: Behaviour) -> None:
    arm = runtime(make_plan([{"kind": "feed_policy", "policy": "new"}]), behaviour)
    view = arm.view(FEED, FORK)
    brain = LLMBrain(ChatClient("http://127.0.0.1:9/v1"))
    agent = AgentSpec(1, "agent-000001", "molty_1", 0, 1.0, ("a", "b"), "llm", "m-a", "p")
    shown = [i["post_id"] for i in brain.feed_for(agent, view)]
    # hot lists by the "new" policy: a -> p5 p4 p3, b -> q2 q1; interleaved rank by rank, then the new lists
    assert shown == ["p5", "q2", "p4", "q1", "p3"]
    plain = [i["post_id"] for i in brain.feed_for(agent, FEED)]
    assert plain[:5] == ["p1", "p2", "p3", "q1", "q2"]  # today's: the hot lists merged by hot score


# ------------------------------------------------------------------------------------------- moderation
def test_moderation_removes_new_content_right_after_it(behaviour: Behaviour) -> None:
    dup = {"kind": "moderation", "rule": "near_duplicates", "threshold": 0.9}
    arm = runtime(make_plan([TERMS, dup]), behaviour)
    c = ctx(FORK, 1)
    t0 = c.start + timedelta(seconds=5)
    last = c.start + timedelta(seconds=60) - timedelta(microseconds=1)
    rng = random.Random(1)
    crab = post_created(uuid7(t0, rng), "soc", "agent-000001", t0, submolt="a", title="A Crab!", content="hi")
    fine = post_created(uuid7(t0, rng), "soc", "agent-000003", t0, submolt="a", title="ok", content="nothing")
    copy = comment_created(
        uuid7(last, rng), "soc", "agent-000005", last, post_id="p5", parent_id=None, depth=1,
        content="Another one", cause="p5",
    )  # fmt: skip
    vote = vote_cast(
        uuid7(t0, rng), "soc", "agent-000007", t0, post_id="p1", target_type="post", target_id="p1", value=1
    )
    events: list[Event] = [crab, fine, vote, copy]
    out = arm.moderate(events, FEED, 1, c)
    assert [e.type for e in out] == [
        "post_created",
        "content_removed",
        "post_created",
        "vote_cast",
        "comment_created",
        "content_removed",
    ]
    r1, r2 = out[1], out[5]
    assert isinstance(r1, ContentRemoved)
    assert isinstance(r2, ContentRemoved)
    assert (r1.actor, r1.body.target_type, r1.body.target_id, r1.body.post_id, r1.body.rule) == (
        "moderator",
        "post",
        str(crab.event_id),
        str(crab.event_id),
        "terms",
    )
    assert r1.occurred_at == t0 + timedelta(microseconds=1)
    # "another one" is a recent comment of p5 in the view: a duplicate; at the tick's last instant
    assert (r2.body.target_type, r2.body.target_id, r2.body.post_id, r2.body.rule) == (
        "comment",
        str(copy.event_id),
        "p5",
        "near_duplicates",
    )
    assert r2.occurred_at == last
    again = arm.moderate(events, FEED, 1, ctx(FORK, 1))
    assert [encode_event(e) for e in again] == [encode_event(e) for e in out]
    # the shard's earlier own texts count: the same post is a duplicate of an injected one
    assert [e.type for e in arm.moderate([fine], FEED, 1, c, prior=[fine])] == [
        "post_created",
        "content_removed",
    ]
    assert runtime(make_plan([POLICY_A]), behaviour).moderate(events, FEED, 1, c) == events
