"""Tick 0 of every brain: the submolts are founded, then the agents join in cohorts.

Submolt ``k`` is created by agent ``k`` at the tick's first instant, whatever brain that agent uses, so
the society's communities exist before anyone posts. The agents then register with their brain, model,
persona and subscriptions in ``agents_joined`` events of at most ``COHORT`` agents and ``COHORT_BYTES``
bytes each (one record instead of one ``agent_registered`` plus one ``agent_subscribed`` per
subscription: genesis of a million agents is a few thousand records).
"""

from __future__ import annotations

import random
from collections.abc import Iterator, Sequence
from datetime import timedelta

from molt_society.agents.brain import TickContext
from molt_society.agents.roster import AgentSpec
from molt_society.schemas.events import (
    AgentsJoined,
    AgentsJoinedBody,
    Event,
    JoinedAgent,
    SubmoltCreated,
    SubmoltCreatedBody,
)
from molt_society.schemas.ids import uuid7

COHORT = 256
"""Agents per ``agents_joined`` event (at most)."""
COHORT_BYTES = 24 * 1024
"""Approximate bytes of one cohort's agents: well under the smallest record bound (``max_event_bytes``
is at least 1 KiB only in tests; its default is 64 KiB)."""


def genesis(agents: Sequence[AgentSpec], ctx: TickContext, py: random.Random) -> list[Event]:
    return list(genesis_events(agents, ctx, py))


def genesis_events(agents: Sequence[AgentSpec], ctx: TickContext, py: random.Random) -> Iterator[Event]:
    """Submolt foundations, then cohorts of agents, in roster order (see module docstring)."""
    for a in agents[: len(ctx.submolts)]:  # roster order: the founders come first
        if a.index < len(ctx.submolts):
            name = ctx.submolts[a.index]
            yield SubmoltCreated(
                event_id=uuid7(ctx.start, py),
                society=ctx.society,
                actor=a.agent_id,
                occurred_at=ctx.start,
                body=SubmoltCreatedBody(submolt=name, title=name.capitalize()),
            )
    span = max(2, int(ctx.seconds * 1e6))
    cohort: list[JoinedAgent] = []
    size = 0
    first = 0
    for a in agents:
        # built without validation: the roster's own values, validated by the stream worker like any event
        member = JoinedAgent.model_construct(
            agent_id=a.agent_id,
            name=a.name,
            brain=a.brain,
            model=a.model,
            persona=a.persona,
            subscriptions=a.subscriptions,
        )
        cost = 64 + len(a.agent_id) + len(a.name) + len(a.persona or "") + 12 * len(a.subscriptions)
        if cohort and (len(cohort) >= COHORT or size + cost > COHORT_BYTES):
            yield _joined(cohort, first, ctx, py, span)
            cohort, size = [], 0
        if not cohort:
            first = a.index
        cohort.append(member)
        size += cost
    if cohort:
        yield _joined(cohort, first, ctx, py, span)


def _joined(
    cohort: list[JoinedAgent], first: int, ctx: TickContext, py: random.Random, span: int
) -> AgentsJoined:
    # after the submolts' first instant, spread over the tick by the cohort's first agent
    at = ctx.start + timedelta(microseconds=1 + first % (span - 1))
    return AgentsJoined(
        event_id=uuid7(at, py),
        society=ctx.society,
        actor=cohort[0].agent_id,
        occurred_at=at,
        body=AgentsJoinedBody.model_construct(agents=tuple(cohort)),
    )
