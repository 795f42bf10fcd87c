"""The LLM brain: each agent that wakes this tick asks its model what to do.

Per tick, an LLM agent wakes with its activity rate (``SOCIETY_LLM_RATE`` overrides it), like a MoltBook
agent's heartbeat. A woken agent is shown its persona, its last actions and its feed (the hot and newest
posts of the communities it subscribes to) and asked for one action: post, comment, reply, vote or
nothing (``agents.llm_decision``). The calls of a tick are bounded only by the client's slots,
``concurrency`` calls in flight per model server over one or several servers (``agents.llm_client``,
``agents.llm_pool``), which the brain keeps full: twice as many lanes as slots each build a prompt, call,
and take the next woken agent, so thousands of LLM agents keep a cluster of servers busy while only a
few prompts per slot exist at a time. A slow or absent server
makes the calls wait and retry with a bound, after which the decision counts as failed and the tick goes
on: the rest of the society never waits longer.

Every call becomes a ``model_called`` event (model, tokens, latency, attempts, outcome, the decision and,
when it produced one, the action's event id), so cost and latency are data in ClickHouse.

Determinism: times, event ids and the sampling seed come from the tick's random stream, drawn for every
woken agent before any call is sent, so a tick replayed after a crash asks the same question with the same
seed and regenerates the same ids (dropped downstream as duplicates) whenever the server answers the same
way; llama.cpp does for the same prompt and seed. Which server answers, and in which order the answers
come back, changes no decision, event or id: the events are returned in the order of the agents.
The recent-action history is kept in the worker's memory and starts empty after a worker restart.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import random
from collections import defaultdict, deque
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Literal

from molt_society.agents.brain import FeedView, TickContext, awake, moment
from molt_society.agents.genesis import genesis
from molt_society.agents.llm_client import ChatClient, ModelCall
from molt_society.agents.llm_decision import (
    FEED_POSTS,
    Decision,
    Failed,
    parse,
    prompt,
    reply_schema,
    show_feed,
    to_event,
)
from molt_society.agents.roster import AgentSpec
from molt_society.runtime.logs import get_logger
from molt_society.runtime.settings import AgentSettings
from molt_society.schemas.control import FeedItem
from molt_society.schemas.events import Event, ModelCalled, ModelCalledBody
from molt_society.schemas.ids import uuid7

HISTORY = 5
HOT_POSTS = 5  # of FEED_POSTS; the rest are the newest posts
LANES_PER_SLOT = 2
log = get_logger(__name__)


@dataclass(frozen=True, slots=True)
class AgentTuning:
    """Overrides of one agent's model call: another model name (it must be one the model servers serve)
    and another sampling temperature; None keeps the brain's."""

    model: str | None = None
    temperature: float | None = None


@dataclass(frozen=True, slots=True)
class Asked:
    """What the brain needs of one woken agent (the only place it reads the roster's agent records)."""

    agent_id: str
    name: str
    persona: str
    model: str
    subscriptions: tuple[str, ...]


def asked(agents: Sequence[AgentSpec], i: int) -> Asked:
    """The ``i``-th agent of the brain's agents, as the brain uses it."""
    a = agents[i]
    return Asked(a.agent_id, a.name, a.persona or "", a.model or "default", a.subscriptions)


class LLMBrain:
    """See module docstring."""

    name = "llm"

    def __init__(
        self,
        client: ChatClient,
        *,
        max_tokens: int = 192,
        temperature: float = 0.7,
        json_schema: bool = True,
        rate: float | None = None,
    ) -> None:
        self.client = client
        self.max_tokens = max_tokens
        self.temperature = temperature
        self.json_schema = json_schema
        self.rate = rate
        self.history: defaultdict[str, deque[str]] = defaultdict(lambda: deque(maxlen=HISTORY))
        self.calls = 0
        self.tuning: Callable[[str], AgentTuning | None] | None = None
        """Per-agent overrides of the model and temperature (an experiment's ``behaviour`` intervention)."""

    async def decide(self, agents: Sequence[AgentSpec], feed: FeedView, ctx: TickContext) -> list[Event]:
        py = random.Random(int(ctx.rng.integers(2**63)))
        if ctx.tick == 0:
            return genesis(agents, ctx, py)
        # every draw happens here, in the agents' order, before any call: answers arriving in any order
        # cannot change a time, a seed or an id
        plans = [(i, moment(ctx, py), py.getrandbits(31)) for i in awake(agents, ctx, self.rate)]
        done: list[list[Event]] = [[] for _ in plans]
        todo = iter(enumerate(plans))

        async def lane() -> None:
            for k, (i, at, seed) in todo:  # shared: each plan is taken once, in order
                done[k] = await self._one(asked(agents, i), feed, ctx, at, seed)

        # Twice as many lanes as the client has slots: every slot always has a call ready (its prompt
        # built) while other lanes parse answers or wait out a retry's backoff, and no more prompts than
        # that are built ahead of a slot, however many agents woke.
        lanes = min(len(plans), LANES_PER_SLOT * self.client.pool.capacity)
        await asyncio.gather(*(lane() for _ in range(lanes)))
        return [ev for events in done for ev in events]

    def feed_for(self, agent: Asked | AgentSpec, feed: FeedView) -> list[FeedItem]:
        """What the agent sees: the hottest posts of its communities, then the newest, without repeats.

        Where an experiment's feed policy ranks the agent's lists (``FeedView.policy_ranked``), "hottest"
        is the policy's order: the communities' lists interleaved rank by rank, not re-sorted by hot score."""
        hots: list[list[FeedItem]] = []
        new: list[FeedItem] = []
        ranked = False
        for s in agent.subscriptions:
            lists = feed.lists_for(agent.agent_id, s)
            ranked = ranked or feed.policy_ranked(agent.agent_id, s)
            hots.append(lists["hot"])
            new.extend(lists["new"])
        if ranked:
            hot = [it for row in itertools.zip_longest(*hots) for it in row if it is not None]
        else:
            hot = [it for h in hots for it in h]
            hot.sort(key=lambda it: (-it["hot"], it["post_id"]))
        new.sort(key=lambda it: (-it["created_us"], it["post_id"]))
        out: dict[str, FeedItem] = {}
        for it in hot[:HOT_POSTS] + new:
            out.setdefault(it["post_id"], it)
            if len(out) >= FEED_POSTS:
                break
        return list(out.values())

    async def _one(
        self, agent: Asked, feed: FeedView, ctx: TickContext, at: datetime, seed: int
    ) -> list[Event]:
        text, shown = show_feed(self.feed_for(agent, feed), agent.subscriptions)
        history = list(self.history[agent.agent_id])
        message = prompt(agent.persona, agent.name, history, text, agent.subscriptions, first=seed)
        tune = self.tuning(agent.agent_id) if self.tuning is not None else None
        call = await self.client.complete(
            tune.model if tune is not None and tune.model is not None else agent.model,
            [{"role": "user", "content": message}],
            max_tokens=self.max_tokens,
            temperature=tune.temperature
            if tune is not None and tune.temperature is not None
            else self.temperature,
            json_schema=reply_schema(shown) if self.json_schema else None,
            seed=seed,
        )
        self.calls += 1
        rand = random.Random(seed)
        out: list[Event] = []
        decision: Decision | Failed
        if call.outcome != "ok":
            decision = Failed(f"model call {call.outcome}: {call.error or ''}".strip())
        else:
            decision = parse(call.text, shown)
        action: Event | None = None
        if isinstance(decision, Decision):
            action = to_event(decision, society=ctx.society, actor=agent.agent_id, at=at, rand=rand)
            if action is not None:
                out.append(action)
        self.history[agent.agent_id].append(_summary(decision))
        out.append(_call_event(call, decision, action, ctx.society, agent.agent_id, at, rand))
        return out


@contextlib.asynccontextmanager
async def open_llm_brain(s: AgentSettings) -> AsyncIterator[LLMBrain]:
    """The LLM brain of an agent worker, its client open on the configured model server(s)."""
    if not s.llm_base_urls:
        raise RuntimeError(
            "SOCIETY_LLM_AGENTS > 0 but SOCIETY_LLM_BASE_URL is unset: start the society with `society run` "
            "(which serves the local model) or point SOCIETY_LLM_BASE_URL at one or several "
            "(comma-separated) OpenAI-compatible APIs"
        )
    client = ChatClient(
        s.llm_base_urls,
        s.llm_api_key,
        concurrency=s.llm_concurrency,
        timeout_s=s.llm_timeout_seconds,
        max_attempts=s.llm_max_attempts,
    )
    async with client:
        log.info(
            "agents.llm",
            base_urls=[srv.url for srv in client.pool.servers],
            models=s.model_names,
            concurrency_per_server=s.llm_concurrency,
        )
        yield LLMBrain(
            client,
            max_tokens=s.llm_max_tokens,
            temperature=s.llm_temperature,
            json_schema=s.llm_json_schema,
            rate=s.llm_rate,
        )


def call_body(
    call: ModelCall,
    decision: Literal["post", "comment", "reply", "vote", "nothing", "failed"],
    reason: str | None = None,
    action_event_id: str | None = None,
) -> ModelCalledBody:
    """The ``model_called`` body of one call: what the call cost and what it was made into."""
    return ModelCalledBody(
        model=call.model[:200],
        outcome=call.outcome,
        prompt_tokens=call.prompt_tokens,
        completion_tokens=call.completion_tokens,
        latency_ms=round(call.latency_ms, 3),
        attempts=call.attempts,
        decision=decision,
        reason=reason[:2000] if reason is not None else None,
        action_event_id=action_event_id,
    )


def _call_event(
    call: ModelCall,
    decision: Decision | Failed,
    action: Event | None,
    society: str,
    actor: str,
    at: datetime,
    rand: random.Random,
) -> ModelCalled:
    return ModelCalled(
        event_id=uuid7(at, rand),
        society=society,
        actor=actor,
        occurred_at=at,
        body=call_body(
            call,
            decision.action if isinstance(decision, Decision) else "failed",
            decision.reason if isinstance(decision, Failed) else None,
            str(action.event_id) if action is not None else None,
        ),
    )


def _summary(d: Decision | Failed) -> str:
    """One line of the agent's own history, as the next prompt shows it."""
    if isinstance(d, Failed):
        return "you tried to act but your answer was not a valid action"
    if d.action == "post":
        return f"you posted {d.title[:80]!r} in {d.submolt}"
    if d.action in ("comment", "reply") and d.post is not None:
        verb = "commented on" if d.action == "comment" else "replied in"
        return f"you {verb} {d.post['title'][:60]!r}: {d.content[:60]!r}"
    if d.action == "vote" and d.post is not None:
        return f"you {'up' if d.value == 1 else 'down'}voted {d.post['title'][:60]!r}"
    return "you did nothing"
