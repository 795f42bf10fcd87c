"""The brain interface: what every kind of agent mind implements.

A brain is asked once per tick for the agents of one shard that use it. It sees the feed as of the end of
the previous tick (``FeedView``) and returns the actions those agents take, as events. A brain never
publishes anything itself and never acts for an agent outside the list it was given: the worker checks
the actor of every event it returns.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Protocol

import numpy as np

from molt_society.agents.roster import AgentSpec, Cohort
from molt_society.schemas.control import FeedItem
from molt_society.schemas.events import Event


@dataclass(frozen=True)
class FeedView:
    """The merged feed: per submolt the top posts by "new" and by "hot"."""

    tick: int
    submolts: dict[str, dict[str, list[FeedItem]]]

    def lists(self, submolt: str) -> dict[str, list[FeedItem]]:
        return self.submolts.get(submolt, {"new": [], "hot": []})

    def lists_for(self, agent_id: str, submolt: str) -> dict[str, list[FeedItem]]:
        """The lists ``agent_id`` sees in ``submolt``: everyone sees the same (``lists``), unless an
        experiment's feed policy ranks this agent's "hot" list its own way (``agents.interventions``)."""
        return self.lists(submolt)

    def policy_ranked(self, agent_id: str, submolt: str) -> bool:
        """True when ``lists_for(agent_id, submolt)["hot"]`` is a feed policy's order, not by hot score."""
        return False


@dataclass(frozen=True)
class TickContext:
    society: str
    tick: int
    start: datetime  # event time at which the tick starts
    seconds: float  # length of the tick in event time
    rng: np.random.Generator  # the shard's random stream for this tick
    submolts: tuple[str, ...]


def awake(agents: Sequence[AgentSpec], ctx: TickContext, rate: float | None = None) -> list[int]:
    """Indices of the agents that act this tick: one draw each from the tick's stream, against the agent's
    own rate (its heartbeat, heavy-tailed over agents) or ``rate`` for all."""
    draws = ctx.rng.random(len(agents))
    if rate is not None:
        return np.flatnonzero(draws < rate).tolist()
    if isinstance(agents, Cohort):  # the roster's column: no AgentSpec is built for the agents asleep
        return np.flatnonzero(draws < agents.rates).tolist()
    rates = np.fromiter((a.rate for a in agents), dtype=float, count=len(agents))
    return np.flatnonzero(draws < rates).tolist()


def moment(ctx: TickContext, py: random.Random) -> datetime:
    """A uniformly drawn instant of the tick, at microsecond precision."""
    return ctx.start + timedelta(microseconds=py.randrange(max(1, int(ctx.seconds * 1_000_000))))


class Brain(Protocol):
    """One small interface for every kind of agent mind."""

    name: str

    async def decide(self, agents: Sequence[AgentSpec], feed: FeedView, ctx: TickContext) -> list[Event]:
        """The actions of ``agents`` during this tick (possibly none)."""
        ...
