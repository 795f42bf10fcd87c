"""An agent worker: hosts the agents of the shards it is assigned and turns ticks into actions.

Shards are the partitions of the ticks topic, shared by the workers of the consumer group
``society.<name>.agents``. For each tick record of a shard the worker:

1. in simulated time, waits until the feed of the previous tick is complete (the barrier that makes the
   society independent of timing and of the number of workers); in real time, uses the newest feed;
2. asks each brain for the actions of its agents of that shard;
3. checks every returned event (valid, its actor one of the agents asked) and publishes it on the actions
   topic, keyed by thread;
4. publishes the shard's watermark (end of the tick in event time) on every actions partition;
5. commits the tick's offset only after all of that is acknowledged. A crash replays the tick; the
   regenerated events carry the same ids and are dropped downstream as duplicates.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
from collections.abc import AsyncIterator, Awaitable, Sequence
from datetime import datetime, timedelta
from typing import Any

import numpy as np
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer

from agents.behaviour import load_behaviour
from agents.brain import Brain, TickContext
from agents.feed_cache import FeedCache
from agents.llm_brain import LLMBrain
from agents.llm_client import ChatClient
from agents.roster import AgentSpec, build_roster
from agents.stochastic import StochasticBrain
from schemas import control
from schemas.events import Event, partition_key
from schemas.topics import HEADER_KIND, KIND_WATERMARK, Role, topic_name
from schemas.wire import encode_event
from society.broker import partition_count
from society.logs import get_logger
from society.settings import Settings

log = get_logger(__name__)


def shard_producer(shard: int) -> str:
    return f"shard-{shard}"


@contextlib.asynccontextmanager
async def llm_brain(s: Settings) -> AsyncIterator[LLMBrain]:
    """The LLM brain of this worker, with its model client open."""
    if not s.llm_base_url:
        raise RuntimeError(
            "SOCIETY_LLM_AGENTS > 0 but SOCIETY_LLM_BASE_URL is unset: start the society with `society run` "
            "(which serves the local model) or point SOCIETY_LLM_BASE_URL at an OpenAI-compatible API"
        )
    client = ChatClient(
        s.llm_base_url,
        s.llm_api_key,
        concurrency=s.llm_concurrency,
        timeout_s=s.llm_timeout_seconds,
        max_attempts=s.llm_max_attempts,
    )
    async with client:
        log.info("agents.llm", base_url=s.llm_base_url, models=s.model_names, concurrency=s.llm_concurrency)
        yield LLMBrain(
            client,
            max_tokens=s.llm_max_tokens,
            temperature=s.llm_temperature,
            json_schema=s.llm_json_schema,
            rate=s.llm_rate,
        )


class AgentWorker:
    """See module docstring."""

    def __init__(
        self, settings: Settings, bootstrap: str, society: str, brains: Sequence[Brain] | None = None
    ):
        self.s = settings
        self.bootstrap = bootstrap
        self.society = society
        behaviour = load_behaviour(settings.behaviour_file)
        self.submolts = tuple(behaviour.submolts.names)
        self.brains: dict[str, Brain] = {b.name: b for b in (brains or [StochasticBrain(behaviour)])}
        roster = build_roster(
            settings.seed,
            settings.agents,
            settings.shards,
            behaviour,
            llm_agents=settings.llm_agents,
            models=settings.model_names,
        )
        self.llm_agents = sum(1 for a in roster if a.brain == "llm")
        self.by_shard: list[list[AgentSpec]] = [[] for _ in range(settings.shards)]
        for a in roster:
            self.by_shard[a.shard].append(a)
        self.producers = [shard_producer(s) for s in range(settings.shards)]
        self.origin = datetime.fromisoformat(settings.sim_start)
        self.t_actions = topic_name(society, Role.ACTIONS)
        self.emitted = 0
        self.forged = 0

    async def run(self, stop: asyncio.Event) -> None:
        async with contextlib.AsyncExitStack() as brains:
            if self.llm_agents and "llm" not in self.brains:
                self.brains["llm"] = await brains.enter_async_context(llm_brain(self.s))
            await self._run(stop)

    async def _run(self, stop: asyncio.Event) -> None:
        producer = AIOKafkaProducer(
            bootstrap_servers=self.bootstrap, acks="all", linger_ms=5, max_batch_size=1 << 20
        )
        await producer.start()
        consumer = AIOKafkaConsumer(
            topic_name(self.society, Role.TICKS),
            bootstrap_servers=self.bootstrap,
            group_id=f"society.{self.society}.agents",
            enable_auto_commit=False,
            auto_offset_reset="earliest",
            fetch_max_wait_ms=self.s.poll_ms,
        )
        await consumer.start()
        partitions = await partition_count(self.bootstrap, self.t_actions)
        feeds = FeedCache(self.bootstrap, self.society, partitions, self.s.feed_size, self.s.poll_ms)
        await feeds.start()
        log.info("agents.started", society=self.society, agents=self.s.agents, shards=self.s.shards)
        try:
            while not stop.is_set():
                batch = await consumer.getmany(timeout_ms=100)
                if not batch:
                    continue
                # Every shard's tick of this fetch is decided and sent before one wait for all the acks:
                # the barrier's round trip is paid once per tick, not once per shard.
                futures: list[Awaitable[Any]] = []
                ticks = sorted(
                    (control.loads(rec.value) for records in batch.values() for rec in records),
                    key=lambda k: (k["tick"], k["shard"]),
                )
                # The shards of one tick decide concurrently (model calls overlap), then send in order.
                for _, same_tick in itertools.groupby(ticks, key=lambda k: k["tick"]):
                    group = list(same_tick)
                    decided = await asyncio.gather(*(self._decide(t, feeds, stop) for t in group))
                    for tick, (events, wm) in zip(group, decided, strict=True):
                        futures.extend(await self._send(tick, events, wm, producer, partitions))
                await asyncio.gather(*futures)
                await consumer.commit({tp: records[-1].offset + 1 for tp, records in batch.items()})
        finally:
            await feeds.stop()
            with contextlib.suppress(Exception):
                await consumer.stop()
            await producer.stop()
            log.info("agents.stopped", emitted=self.emitted, forged=self.forged)

    async def _decide(
        self, tick: control.Tick, feeds: FeedCache, stop: asyncio.Event
    ) -> tuple[list[Event], int]:
        """One shard's tick: the acceptable events of its agents and the watermark that ends it."""
        shard, t = tick["shard"], tick["tick"]
        if tick["final"]:
            return [], tick["sim_time_us"]
        if self.s.mode == "sim":
            start = self.origin + timedelta(seconds=t * self.s.tick_seconds)
            while t > 0 and not stop.is_set():
                try:
                    await feeds.wait_for(t - 1, timeout=1.0)
                    break
                except TimeoutError:
                    continue
        else:
            start = control.from_us(tick["sim_time_us"])
        feed = feeds.view()
        ctx = TickContext(
            society=self.society,
            tick=t,
            start=start,
            seconds=self.s.tick_seconds,
            rng=np.random.default_rng([self.s.seed, shard, t]),
            submolts=self.submolts,
        )
        members = self.by_shard[shard]
        allowed = {a.agent_id for a in members}
        events: list[Event] = []
        for name, brain in self.brains.items():
            mine = [a for a in members if a.brain == name]
            if mine:
                events.extend(
                    ev for ev in await brain.decide(mine, feed, ctx) if self._acceptable(ev, allowed)
                )
        return events, control.to_us(start + timedelta(seconds=self.s.tick_seconds))

    async def _send(
        self,
        tick: control.Tick,
        events: list[Event],
        wm: int,
        producer: AIOKafkaProducer,
        partitions: int,
    ) -> list[Awaitable[Any]]:
        """Send a shard's events, then its watermark on every partition; return the send futures."""
        futures: list[Awaitable[Any]] = []
        for ev in events:
            key = partition_key(ev).encode()
            futures.append(await producer.send(self.t_actions, encode_event(ev), key=key))
            self.emitted += 1
        mark = control.watermark(
            shard_producer(tick["shard"]),
            self.producers,
            wm,
            tick["tick"],
            tick["origin_us"],
            final=tick["final"],
        )
        raw = control.dumps(mark)
        for q in range(partitions):
            futures.append(
                await producer.send(self.t_actions, raw, partition=q, headers=[(HEADER_KIND, KIND_WATERMARK)])
            )
        return futures

    def _acceptable(self, ev: Event, allowed: set[str]) -> bool:
        """A brain may only act for the agents it was asked about, in this society."""
        if ev.actor not in allowed or ev.society != self.society:
            self.forged += 1
            log.warning("agents.forged_event_dropped", actor=ev.actor, society=ev.society)
            return False
        return True
