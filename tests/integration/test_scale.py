"""Societies of size, on the real broker and real ClickHouse (chDB).

- 100,000 agents run 20 ticks with exactly the events of the in-process run of the same seed
  (``agents.offline``, no Kafka), and the ``agents``/``subscriptions`` views list every agent of the roster
  from the genesis cohorts.
- An agent worker whose tick takes longer than its consumer's poll interval keeps its partitions: its
  polls go on while it acts (no revocation, no failed commit), and the society is the same.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pytest
from stack_helpers import emitted_event_ids, make_settings, offline_ids, running_stack, sql

from molt_society.agents.behaviour import load_behaviour
from molt_society.agents.brain import FeedView, TickContext
from molt_society.agents.roster import AgentSpec, build_roster
from molt_society.agents.stochastic import StochasticBrain
from molt_society.agents.worker import AgentWorker
from molt_society.schemas.events import Event
from molt_society.society.drive import drive_clock, last_window_start, wait_drained
from molt_society.society.fork import save_config
from molt_society.society.stack import LocalStack

pytestmark = pytest.mark.integration


async def _drive(stack: LocalStack, ticks: int) -> None:
    s = stack.settings
    _, end_us = await drive_clock(s, stack.bootstrap, stack.society, ticks=ticks, duration=None)
    save_config(s, stack.society, end_us=end_us)
    await wait_drained(stack.society, last_window_start(s, end_us), stack, timeout=600)


def test_100k_agents_20_ticks_same_as_offline(broker: str, tmp_path: Path, society_name: str) -> None:
    ticks = 20
    settings = make_settings(broker, tmp_path, agents=100_000)
    with running_stack(settings, society_name) as stack:
        asyncio.run(_drive(stack, ticks))
        stored = [
            r[0]
            for r in sql(stack, f"SELECT toString(event_id) FROM events WHERE society = '{society_name}'")
        ]
        agents = sql(
            stack, f"SELECT count(), uniqExact(agent_id) FROM agents WHERE society = '{society_name}'"
        )
        subs = sql(stack, f"SELECT count() FROM subscriptions WHERE society = '{society_name}'")[0][0]
        acting = sql(
            stack,
            f"SELECT uniqExact(actor) FROM events WHERE society = '{society_name}' "
            "AND type IN ('post_created', 'comment_created', 'vote_cast')",
        )[0][0]
    emitted = emitted_event_ids(broker, society_name)
    assert len(stored) == len(set(stored))  # exactly once
    assert set(stored) == set(emitted)
    assert set(stored) == offline_ids(settings, society_name, ticks)
    assert int(acting) > 100  # a heavy-tailed few act (MoltBook's small active core), but many do

    # every agent of the roster registered once, with every subscription the roster gives it
    roster = build_roster(settings.seed, settings.agents, settings.shards, load_behaviour())
    assert [int(v) for v in agents[0]] == [100_000, 100_000]
    bits = roster.subscription_bits
    expected_subs = sum(int(np.count_nonzero(bits & np.uint64(1 << j))) for j in range(len(roster.submolts)))
    assert int(subs) == expected_subs


class _SlowBrain:
    """The stochastic brain, taking ``delay`` seconds longer than the poll interval on some ticks."""

    name = "stochastic"

    def __init__(self, delay: float, slow_ticks: set[int]) -> None:
        self.inner = StochasticBrain(load_behaviour())
        self.delay = delay
        self.slow_ticks = slow_ticks
        self.slept = 0

    async def decide(self, agents: Sequence[AgentSpec], feed: FeedView, ctx: TickContext) -> list[Event]:
        if ctx.tick in self.slow_ticks:
            await asyncio.sleep(self.delay)
            self.slept += 1
        return await self.inner.decide(agents, feed, ctx)


def test_tick_longer_than_poll_interval_keeps_partitions(
    broker: str, tmp_path: Path, society_name: str
) -> None:
    ticks = 6
    # the consumer must poll at least every second; ticks 2 and 3 take 3 s in each shard
    settings = make_settings(broker, tmp_path, agents=500, agent_max_poll_interval_ms=1_000)
    brain = _SlowBrain(3.0, {2, 3})
    with running_stack(settings, society_name, agents=False) as stack:
        worker = AgentWorker(settings, stack.bootstrap, society_name, brains=[brain])

        async def go() -> None:
            stop = asyncio.Event()
            task = asyncio.create_task(worker.run(stop))
            try:
                await _drive(stack, ticks)
            finally:
                stop.set()
                await task

        asyncio.run(go())
        stored = [
            r[0]
            for r in sql(stack, f"SELECT toString(event_id) FROM events WHERE society = '{society_name}'")
        ]
    assert brain.slept == 2 * settings.shards  # every shard's slow ticks were slow, once each
    assert worker.revoked == 0  # it kept every partition of the ticks topic throughout
    assert len(stored) == len(set(stored))
    assert set(stored) == offline_ids(settings, society_name, ticks)
