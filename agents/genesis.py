"""Tick 0 of every brain: agents register (brain, model, persona), found the submolts, subscribe.

Submolt ``k`` is created by agent ``k`` at the tick's first instant, whatever brain that agent uses, so
the society's communities exist before anyone posts.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from datetime import timedelta

from agents.brain import TickContext
from agents.roster import AgentSpec
from schemas.events import (
    AgentRegistered,
    AgentRegisteredBody,
    AgentSubscribed,
    AgentSubscribedBody,
    Event,
    SubmoltCreated,
    SubmoltCreatedBody,
)
from schemas.ids import uuid7


def genesis(agents: Sequence[AgentSpec], ctx: TickContext, py: random.Random) -> list[Event]:
    out: list[Event] = []
    span = max(2, int(ctx.seconds * 1e6))
    for a in agents:
        # submolts are created at the tick's first instant, agents register and subscribe after that
        at = ctx.start + timedelta(microseconds=1 + a.index % (span - 1))
        out.append(
            AgentRegistered(
                event_id=uuid7(at, py),
                society=ctx.society,
                actor=a.agent_id,
                occurred_at=at,
                body=AgentRegisteredBody(name=a.name, brain=a.brain, model=a.model, persona=a.persona),
            )
        )
        if a.index < len(ctx.submolts):
            name = ctx.submolts[a.index]
            out.append(
                SubmoltCreated(
                    event_id=uuid7(ctx.start, py),
                    society=ctx.society,
                    actor=a.agent_id,
                    occurred_at=ctx.start,
                    body=SubmoltCreatedBody(submolt=name, title=name.capitalize()),
                )
            )
        for s in a.subscriptions:
            out.append(
                AgentSubscribed(
                    event_id=uuid7(at, py),
                    society=ctx.society,
                    actor=a.agent_id,
                    occurred_at=at,
                    body=AgentSubscribedBody(submolt=s),
                )
            )
    return out
