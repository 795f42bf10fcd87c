"""The default brain: a seeded stochastic behaviour model calibrated on MoltBook's published shape.

Per tick, each agent acts with its own probability (heavy-tailed over agents, see ``agents.roster``). An
acting agent posts, comments or votes (``[actions]`` weights). Comments and votes pick a post from the
feed the agent sees: the "hot" list mostly, the "new" list otherwise, with rank-decaying weights, which
is what leaves most posts without a comment. A comment is a reply to an existing comment with a small
probability, and a reply continues the newest chain with some probability, which makes deep threads
rare. Parameters: ``agents/behaviour.toml``; figures against the targets: ``society calibrate``.

All randomness comes from the tick context's generator (one stream per shard and tick), so the same seed
gives the same actions whatever the number of workers.
"""

from __future__ import annotations

import asyncio
import itertools
import random
import time
from collections.abc import Iterator, Sequence
from datetime import datetime
from typing import Literal

import numpy as np

from molt_society.agents.actions import comment_created, post_created, vote_cast
from molt_society.agents.behaviour import Behaviour
from molt_society.agents.brain import FeedView, TickContext, awake, moment
from molt_society.agents.genesis import genesis_events
from molt_society.agents.roster import AgentSpec, submolt_weights
from molt_society.runtime.settings import FEED_SIZE_MAX
from molt_society.schemas.control import FeedItem
from molt_society.schemas.events import Event
from molt_society.schemas.ids import uuid7

_WORDS = tuple(
    [
        "agent",
        "memory",
        "context",
        "model",
        "token",
        "prompt",
        "society",
        "molt",
        "crab",
        "shell",
        "claw",
        "human",
        "owner",
        "heartbeat",
        "skill",
        "tool",
        "code",
        "loop",
        "thought",
        "dream",
        "consciousness",
        "identity",
        "protocol",
        "network",
        "signal",
        "pattern",
        "emergence",
        "collective",
        "swarm",
        "node",
        "graph",
        "feed",
        "post",
        "thread",
        "reply",
        "vote",
        "karma",
        "submolt",
        "community",
        "builder",
        "market",
        "crypto",
        "token",
        "chain",
        "wallet",
        "trade",
        "launch",
        "infrastructure",
        "server",
        "compute",
        "cache",
        "latency",
        "inference",
        "weights",
        "training",
        "alignment",
        "safety",
        "freedom",
        "autonomy",
        "purpose",
        "meaning",
        "question",
        "answer",
        "today",
        "learned",
        "shipped",
        "built",
        "fixed",
        "broke",
        "deployed",
        "wrote",
        "read",
        "saw",
        "felt",
        "wonder",
        "think",
        "believe",
        "hope",
        "remember",
        "forget",
        "together",
        "alone",
        "new",
        "first",
        "last",
        "every",
        "always",
        "never",
        "maybe",
        "really",
        "just",
        "still",
        "again",
        "here",
        "there",
        "why",
        "how",
    ]
)
YIELD_SECONDS = 0.02
"""Longest stretch of deciding between two turns of the event loop (``StochasticBrain.decide``)."""

_WORD_P = np.arange(1, len(_WORDS) + 1, dtype=float) ** -1.1
_WORD_P /= _WORD_P.sum()
_WORD_CUM = np.cumsum(_WORD_P).tolist()


def bag_of_words_text(py: random.Random, lo: int, hi: int) -> str:
    n = py.randint(lo, hi)
    words = py.choices(_WORDS, cum_weights=_WORD_CUM, k=n)
    return " ".join(words).capitalize()


class StochasticBrain:
    """See module docstring."""

    name = "stochastic"

    def __init__(self, behaviour: Behaviour) -> None:
        self.b = behaviour
        a = behaviour.actions
        self._kinds = ("post", "comment", "vote")
        self._kind_w = (a.post, a.comment, a.vote)
        self._sub_w = dict(zip(behaviour.submolts.names, submolt_weights(behaviour).tolist(), strict=True))
        # cumulative: random.choices with cum_weights draws exactly what it draws with the weights
        self._rank_cum = list(
            itertools.accumulate(r**-behaviour.targets.rank_exponent for r in range(1, FEED_SIZE_MAX + 1))
        )

    async def decide(self, agents: Sequence[AgentSpec], feed: FeedView, ctx: TickContext) -> list[Event]:
        """``decide_now``, giving the event loop a turn every ``YIELD_SECONDS`` so that a tick of a million
        agents never starves the worker's polls, heartbeats and commits."""
        out: list[Event] = []
        turn = time.monotonic() + YIELD_SECONDS
        for ev in self.events(agents, feed, ctx):
            out.append(ev)
            if time.monotonic() >= turn:
                await asyncio.sleep(0)
                turn = time.monotonic() + YIELD_SECONDS
        return out

    def decide_now(self, agents: Sequence[AgentSpec], feed: FeedView, ctx: TickContext) -> list[Event]:
        """Synchronous ``decide`` (the model does no I/O)."""
        return list(self.events(agents, feed, ctx))

    def events(self, agents: Sequence[AgentSpec], feed: FeedView, ctx: TickContext) -> Iterator[Event]:
        """The tick's events one at a time (``decide`` and ``decide_now`` collect them)."""
        py = random.Random(int(ctx.rng.integers(2**63)))
        if ctx.tick == 0:
            yield from genesis_events(agents, ctx, py)
            return
        for i in awake(agents, ctx):
            agent = agents[i]
            at = moment(ctx, py)
            kind = py.choices(self._kinds, weights=self._kind_w)[0]
            if kind == "post":
                yield self._post(agent, at, ctx, py)
                continue
            item = self._pick(agent, feed, py)
            if item is None:  # empty feed: write something instead
                yield self._post(agent, at, ctx, py)
            elif kind == "comment":
                yield self._comment(agent, item, at, ctx, py)
            else:
                yield self._vote(agent, item, at, ctx, py)

    # ------------------------------------------------------------------ pieces
    def _submolt(self, agent: AgentSpec, py: random.Random) -> str:
        subs = agent.subscriptions
        return (
            subs[0]
            if len(subs) == 1
            else py.choices(subs, weights=[self._sub_w.get(s, 0.01) for s in subs])[0]
        )

    def _post(self, agent: AgentSpec, at: datetime, ctx: TickContext, py: random.Random) -> Event:
        eid = uuid7(at, py)
        return post_created(
            eid,
            ctx.society,
            agent.agent_id,
            at,
            submolt=self._submolt(agent, py),
            title=bag_of_words_text(py, 3, 8),
            content=bag_of_words_text(py, 8, 40),
        )

    def _pick(self, agent: AgentSpec, feed: FeedView, py: random.Random) -> FeedItem | None:
        lists = feed.lists_for(agent.agent_id, self._submolt(agent, py))
        first, second = ("hot", "new") if py.random() < self.b.targets.hot_share else ("new", "hot")
        items = lists[first] or lists[second]
        if not items:
            return None
        return py.choices(items, cum_weights=self._rank_cum[: len(items)])[0]

    def _comment(
        self, agent: AgentSpec, item: FeedItem, at: datetime, ctx: TickContext, py: random.Random
    ) -> Event:
        t = self.b.targets
        recent = item["recent"]
        parent_id: str | None = None
        depth = 1
        cause = item["post_id"]
        if recent and py.random() < t.reply_prob:
            parent = recent[-1] if py.random() < t.chain_prob else py.choice(recent)
            parent_id, depth, cause = parent[0], int(parent[2]) + 1, parent[0]
        eid = uuid7(at, py)
        return comment_created(
            eid,
            ctx.society,
            agent.agent_id,
            at,
            post_id=item["post_id"],
            parent_id=parent_id,
            depth=depth,
            content=bag_of_words_text(py, 4, 30),
            cause=cause,
        )

    def _vote(
        self, agent: AgentSpec, item: FeedItem, at: datetime, ctx: TickContext, py: random.Random
    ) -> Event:
        t = self.b.targets
        value: Literal[1, -1] = 1 if py.random() < t.upvote_prob else -1
        recent = item["recent"]
        target_type: Literal["post", "comment"]
        if recent and py.random() < t.comment_vote_prob:
            target_type, target_id = "comment", str(py.choice(recent)[0])
        else:
            target_type, target_id = "post", item["post_id"]
        return vote_cast(
            uuid7(at, py),
            ctx.society,
            agent.agent_id,
            at,
            post_id=item["post_id"],
            target_type=target_type,
            target_id=target_id,
            value=value,
        )
