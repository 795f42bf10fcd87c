"""An agent worker: hosts the agents of the shards it is assigned and turns ticks into actions.

Shards are the partitions of the ticks topic, shared by the workers of the consumer group
``society.<name>.agents``. The agents are the roster's columns (``agents.roster``): a worker of 2.6 million
agents holds about 42 MB of them, and builds an ``AgentSpec`` only for an agent a brain looks at.

The worker is its steps on the one consume loop (``runtime.consume_loop``), listed in ``TickSteps``: the
loop never waits for a tick: it hands each fetch of tick records to the acting task and pauses those
partitions until the task has committed them, so polls, heartbeats and the poll-interval clock go on
however long a tick takes (a tick longer than ``max_poll_interval_ms`` is not a rebalance). Deciding and
sending give the event loop a turn every 20 ms. For each tick record of a shard the acting task:

1. in simulated time, waits until the feed of the previous tick is complete (the barrier that makes the
   society independent of timing and of the number of workers); in real time, uses the newest feed;
2. asks each brain for the actions of its agents of that shard (a ``Cohort``);
3. checks every returned event (valid, its actor, or every agent of a cohort it registers, one of the
   agents asked) and publishes it on the actions topic, keyed by thread;
4. publishes the shard's watermark (end of the tick in event time) on every actions partition;
5. commits the tick's offset only after all of that is acknowledged. A crash replays the tick; the
   regenerated events carry the same ids and are dropped downstream as duplicates.

With ``Settings.arm_plan`` (an experiment's arm), ticks from the plan's fork tick on go through
``agents.interventions.ArmRuntime``: records and injections, bans, feed policies, moderation, behaviour
overrides. Without one, nothing of it runs.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Collection, Coroutine, Sequence
from datetime import datetime, timedelta
from typing import Any

import numpy as np
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from aiokafka.structs import ConsumerRecord

from molt_society.agents.behaviour import load_behaviour
from molt_society.agents.brain import Brain, FeedView, TickContext
from molt_society.agents.feed_cache import FeedCache, FeedPassed
from molt_society.agents.fitted import stochastic_brain
from molt_society.agents.interventions import ArmRuntime
from molt_society.agents.llm_brain import LLMBrain, open_llm_brain
from molt_society.agents.roster import Cohort, agent_index, build_roster
from molt_society.algorithms.kafka_partition import kafka_partition
from molt_society.runtime import kafka, process_status
from molt_society.runtime.broker import partition_count
from molt_society.runtime.consume_loop import Batch, Commits, ConsumeLoop
from molt_society.runtime.logs import get_logger
from molt_society.runtime.record_auth import RecordKeys
from molt_society.runtime.settings import Settings
from molt_society.runtime.task_cancel import cancel_and_wait
from molt_society.schemas import control
from molt_society.schemas.arm_plan import load_plan
from molt_society.schemas.events import AgentsJoined, Event, partition_key
from molt_society.schemas.topics import Role, topic_name
from molt_society.schemas.wire import encode_event

log = get_logger(__name__)


SEND_TURN_SECONDS = 0.02
"""Longest stretch of sending between two turns of the event loop."""


partition_of = functools.lru_cache(maxsize=1 << 16)(kafka_partition)
"""``algorithms.kafka_partition``, cached per key: a thread's events share their post's key."""


def shard_producer(shard: int) -> str:
    return f"shard-{shard}"


@contextlib.asynccontextmanager
async def llm_brain(s: Settings) -> AsyncIterator[LLMBrain]:
    """The LLM brain of this worker, its client open on the configured model server(s)."""
    async with open_llm_brain(s) as brain:
        yield brain


class AgentWorker:
    """See module docstring."""

    def __init__(
        self, settings: Settings, bootstrap: str, society: str, brains: Sequence[Brain] | None = None
    ):
        self.s = settings
        self.keys = RecordKeys(settings.state_dir)  # signs the actions, checks the ticks and the feeds
        self.bootstrap = bootstrap
        self.society = society
        behaviour = load_behaviour(settings.behaviour_file)
        self.submolts = tuple(behaviour.submolts.names)
        self.brains: dict[str, Brain] = {b.name: b for b in (brains or [stochastic_brain(behaviour)])}
        self.roster = build_roster(
            settings.seed,
            settings.agents,
            settings.shards,
            behaviour,
            llm_agents=settings.llm_agents,
            models=settings.model_names,
        )
        self.llm_agents = min(settings.llm_agents, settings.agents)
        self.arm: ArmRuntime | None = None  # an experiment arm's interventions (agents.interventions)
        if settings.arm_plan is not None:
            plan = load_plan(settings.arm_plan)
            self.arm = ArmRuntime(
                plan,
                seed=settings.seed,
                roster=self.roster,
                behaviour=behaviour,
                feed_size=settings.feed_size,
            )
            log.info("agents.arm_plan", experiment=plan.experiment, arm=plan.arm, fork_tick=plan.fork_tick)
        self._cohorts: dict[tuple[int, str], Cohort] = {}
        self.producers = [shard_producer(s) for s in range(settings.shards)]
        self.origin = datetime.fromisoformat(settings.sim_start)
        self.t_actions = topic_name(society, Role.ACTIONS)
        self.emitted = 0
        self.forged = 0
        self.revoked = 0  # partitions of the ticks topic taken from this worker by a rebalance

    def cohort(self, shard: int, brain: str) -> Cohort:
        """The agents of ``shard`` that ``brain`` drives (index arrays, built once)."""
        key = (shard, brain)
        if key not in self._cohorts:
            self._cohorts[key] = self.roster.cohort(shard).of_brain(brain)
        return self._cohorts[key]

    async def run(self, stop: asyncio.Event) -> None:
        async with contextlib.AsyncExitStack() as brains:
            if self.llm_agents and "llm" not in self.brains:
                self.brains["llm"] = await brains.enter_async_context(llm_brain(self.s))
            llm = self.brains.get("llm")
            if self.arm is not None and isinstance(llm, LLMBrain):
                llm.tuning = self.arm.tuning
            await self._run(stop)

    async def _run(self, stop: asyncio.Event) -> None:
        producer = kafka.producer(self.bootstrap, "actions", keys=self.keys)
        await producer.start()
        feeds: FeedCache | None = None
        try:
            consumer = kafka.consumer(
                self.bootstrap,
                "member",
                group=kafka.group_id(self.society, "agents"),
                fetch_max_wait_ms=self.s.poll_ms,
                max_poll_interval_ms=self.s.agent_max_poll_interval_ms,
                # a short session: the local broker holds a group's first join for half of it (start-up);
                # safe because the worker's event loop gets a turn every 20 ms however long a tick takes
                **kafka.member_session(self.s.group_session_timeout_ms),
            )
            partitions = await partition_count(self.bootstrap, self.t_actions)
            feeds = cache = FeedCache(
                self.bootstrap,
                self.society,
                partitions,
                self.s.feed_size,
                self.s.poll_ms,
                as_of_tick=True,
                keys=self.keys,
            )
            await cache.start()
            commits = Commits(consumer, "agents")
            steps = TickSteps(
                self,
                consumer,
                lambda work: self._act(
                    work, partitions, stop, commits, consumer=consumer, producer=producer, feeds=cache
                ),
            )
            # short polls: while a tick is acted on its partitions are paused and a poll returns empty;
            # once they are resumed the next tick must not wait out a long poll (the barrier pays it)
            loop = ConsumeLoop(consumer, "agents", steps, poll_ms=self.s.poll_ms)
            steps.loop = loop
            loop.subscribe([topic_name(self.society, Role.TICKS)])
            if not await loop.start(stop):
                log.warning("agents.stopped_before_start", reason="stopped while joining its group")
                await steps.close(failed=True)
                await loop.stop_client()
                return
            log.info(
                "agents.started",
                society=self.society,
                agents=self.s.agents,
                shards=self.s.shards,
                roster_mb=round(self.roster.nbytes() / 2**20, 1),
            )
            process_status.mark_ready(shards=self.s.shards)
            await loop.run(stop)
        finally:
            if feeds is not None:
                await feeds.stop()
            await producer.stop()
            log.info("agents.stopped", emitted=self.emitted, forged=self.forged, revoked=self.revoked)

    async def _act(
        self,
        work: asyncio.Queue[Batch],
        partitions: int,
        stop: asyncio.Event,
        commits: Commits,
        *,
        consumer: AIOKafkaConsumer,
        producer: AIOKafkaProducer,
        feeds: FeedCache,
    ) -> None:
        """Act on each fetched batch of ticks in turn, commit it, resume its partitions (``TickSteps``).

        Ticks are acted on in tick order across every batch fetched so far: a tick that must wait for the
        previous tick's feed first takes in the batches fetched meanwhile. The shards of one worker can
        come in separate fetches (on a cluster their partitions have different leaders), and the feed a
        later tick of one shard waits for needs this worker's earlier tick of another shard."""
        while not stop.is_set():
            batch = await work.get()
            _take_queued(batch, work)
            pending = _ticks_of(batch, keys=self.keys)
            acted: set[tuple[int, int]] = set()  # (shard, tick) of this batch acted on
            futures: list[Awaitable[Any]] = []
            while pending:
                t = pending[0]["tick"]
                if self._waits_for_feed(pending[0]) and feeds.complete_tick < t - 1:
                    if await self._feed_or_fetch(feeds, t - 1, work, stop):
                        _take_queued(batch, work)
                        pending = _ticks_of(batch, after=acted, keys=self.keys)
                    if stop.is_set():
                        return  # not committed: the next owner acts on these ticks again
                    continue
                group = [k for k in pending if k["tick"] == t]
                pending = pending[len(group) :]
                acted.update((k["shard"], k["tick"]) for k in group)
                if self.llm_agents:  # model calls of the shards overlap, then the shards send in order
                    decided = await asyncio.gather(*(self._decide(t, feeds, stop) for t in group))
                    for tick, (events, wm) in zip(group, decided, strict=True):
                        futures.extend(await self._send(tick, events, wm, producer, partitions))
                else:  # one shard at a time: a shard's events are sent (and freed) before the next
                    for tick in group:
                        events, wm = await self._decide(tick, feeds, stop)
                        futures.extend(await self._send(tick, events, wm, producer, partitions))
            if stop.is_set():
                return  # not committed: the next owner acts on these ticks again (same event ids)
            await asyncio.gather(*futures)
            # partitions a rebalance took meanwhile are left to their new owners, who act on the ticks
            # again: the regenerated events carry the same ids (dropped downstream as duplicates)
            await commits.commit({tp: records[-1].offset + 1 for tp, records in batch.items()})
            consumer.resume(*(tp for tp in batch if tp in consumer.assignment()))

    def _waits_for_feed(self, tick: control.Tick) -> bool:
        """In simulated time a tick's actions follow the previous tick's complete feed (``_decide``)."""
        return self.s.mode == "sim" and not tick["final"] and tick["tick"] > 0

    @staticmethod
    async def _feed_or_fetch(
        feeds: FeedCache,
        tick: int,
        work: asyncio.Queue[Batch],
        stop: asyncio.Event,
    ) -> bool:
        """Wait until the feed of ``tick`` is complete (False) or another fetch is queued (True)."""
        while not stop.is_set():
            if not work.empty():
                return True
            try:
                await feeds.wait_for(tick, timeout=0.1)
                return False
            except TimeoutError:
                continue
        return False

    async def _decide(
        self, tick: control.Tick, feeds: FeedCache, stop: asyncio.Event
    ) -> tuple[list[Event], int]:
        """One shard's tick: the acceptable events of its agents and the watermark that ends it."""
        shard, t = tick["shard"], tick["tick"]
        if tick["final"]:
            return [], tick["sim_time_us"]
        if self.s.mode == "sim":
            start = self.origin + timedelta(seconds=t * self.s.tick_seconds)
            feed = await self._feed_as_of(t - 1, feeds, stop)
        else:
            start = control.from_us(tick["sim_time_us"])
            feed = feeds.view(None)
        ctx = TickContext(
            society=self.society,
            tick=t,
            start=start,
            seconds=self.s.tick_seconds,
            rng=np.random.default_rng([self.s.seed, shard, t]),
            submolts=self.submolts,
        )
        end_us = control.to_us(start + timedelta(seconds=self.s.tick_seconds))
        if self.arm is not None and self.arm.active(t):
            return await self._decide_arm(self.arm, shard, feed, ctx), end_us
        events: list[Event] = []
        for name, brain in self.brains.items():
            mine = self.cohort(shard, name)
            if len(mine):
                events.extend(ev for ev in await brain.decide(mine, feed, ctx) if self._acceptable(ev, mine))
        return events, end_us

    async def _feed_as_of(self, tick: int, feeds: FeedCache, stop: asyncio.Event) -> FeedView:
        """The feed as of the end of ``tick`` once every partition has published it (simulated time).

        A rebalance can give this worker back a shard whose tick it had passed: the cache has applied a
        later tick's updates and cannot show the older feed (``FeedPassed``). It then reads the feeds topic
        again from its start, as a restarted worker would, and shows the feed from that
        (``agents.feed_reread``)."""
        while not stop.is_set():
            if tick >= 0:
                try:
                    await feeds.wait_for(tick, timeout=1.0)
                except TimeoutError:
                    continue
                if feeds.complete_tick < tick:  # re-read meanwhile (another shard's decision)
                    continue
            try:
                return feeds.view(tick)
            except FeedPassed as exc:
                log.warning("agents.feed_reread", tick=tick, reason=str(exc))
                await feeds.reread()
        return feeds.view(tick)  # stopping: whatever is complete, as before (the tick is not committed)

    async def _decide_arm(self, arm: ArmRuntime, shard: int, feed: FeedView, ctx: TickContext) -> list[Event]:
        """A shard's tick under an experiment arm (``agents.interventions``): the worker's own events (fork
        records, injections: not a brain's, so not checked as one), then the brains' acceptable events on
        the arm's feed view, without banned agents, each removed post or comment followed by its removal."""
        own = arm.own_events(shard, feed, ctx)
        view = await asyncio.to_thread(arm.view, feed, ctx.tick) if arm.embeds else arm.view(feed, ctx.tick)
        decided: list[Event] = []
        for brain, mine in arm.brains(shard, self.brains, self.cohort):
            if len(mine):
                decided.extend(
                    ev
                    for ev in await brain.decide(mine, view, ctx)
                    if self._acceptable(ev, mine) and not arm.refused(ev)
                )
        return own + arm.moderate(decided, feed, shard, ctx, prior=own)

    async def _send(
        self,
        tick: control.Tick,
        events: list[Event],
        wm: int,
        producer: AIOKafkaProducer,
        partitions: int,
    ) -> list[Awaitable[Any]]:
        """Send a shard's events, then its watermark on every partition; return the send futures.

        One ``send`` per record, which the producer gathers into one batch per partition until its
        sender's next turn of the event loop (no linger: a tick waits on these). Building a batch per shard
        and partition (``send_batch``) was 10 % faster at a million agents but twice as slow for 2,000, the
        local broker paying per batch (14 ms of its CPU per tick more; BENCHMARKS.md)."""
        futures: list[Awaitable[Any]] = []
        turn = time.monotonic() + SEND_TURN_SECONDS
        for ev in events:
            key = partition_key(ev).encode()
            # the default partitioner's partition (murmur2), cached per key: a thread's events share it
            q = partition_of(key, partitions)
            futures.append(await producer.send(self.t_actions, encode_event(ev), key=key, partition=q))
            self.emitted += 1
            if time.monotonic() >= turn:  # a send that finds room in the batch does not yield
                await asyncio.sleep(0)
                turn = time.monotonic() + SEND_TURN_SECONDS
        mark = control.watermark(
            shard_producer(tick["shard"]),
            self.producers,
            wm,
            tick["tick"],
            tick["origin_us"],
            final=tick["final"],
        )
        futures.extend(await kafka.send_watermark(producer, self.t_actions, control.dumps(mark), partitions))
        return futures

    def _acceptable(self, ev: Event, agents: Cohort) -> bool:
        """A brain may only act for the agents it was asked about, in this society (every agent of a
        cohort it registers included)."""
        actors = [a.agent_id for a in ev.body.agents] if isinstance(ev, AgentsJoined) else [ev.actor]
        for actor in actors:
            index = agent_index(actor)
            if index is None or not agents.holds(index) or ev.society != self.society:
                self.forged += 1
                log.warning("agents.forged_event_dropped", actor=actor, society=ev.society)
                return False
        return True


class TickSteps:
    """The agent worker's steps on the one consume loop (``runtime.consume_loop``):

    1. hold (``submit``): pause the fetched partitions and queue the fetch for the acting task, so polls,
       heartbeats and the poll-interval clock go on however long a tick takes (a slow tick is not a
       rebalance);
    2. act (the acting task, ``AgentWorker._act``): the ticks of every queued fetch in tick order, each
       after the previous tick's feed; decide and send;
    3. acknowledge: every send of the fetch;
    4. commit: through the loop's ``Commits`` (the partitions still owned);
    5. release: resume the fetch's partitions.

    A revocation takes nothing back from the acting task: the ticks of a partition that left are not
    committed here, and their new owner acts on them again."""

    def __init__(
        self,
        worker: AgentWorker,
        consumer: Any,
        act: Callable[[asyncio.Queue[Batch]], Coroutine[Any, Any, None]],
    ) -> None:
        self._worker = worker
        self._consumer = consumer
        self._work: asyncio.Queue[Batch] = asyncio.Queue()
        self._acting: asyncio.Task[None] = asyncio.create_task(act(self._work), name="agents.act")
        self.loop: ConsumeLoop | None = None  # whose ``closing`` says a revocation is the worker leaving

    async def submit(self, batch: Batch) -> None:
        self._consumer.pause(*batch)
        self._work.put_nowait(batch)

    async def poll(self) -> None:
        """Nothing runs by time alone."""

    async def revoked(self, revoked: Collection[TopicPartition]) -> None:
        """Counts the tick partitions a rebalance takes from the worker."""
        if revoked and not (self.loop is not None and self.loop.closing):
            self._worker.revoked += len(revoked)
            log.info("agents.partitions_revoked", partitions=sorted(tp.partition for tp in revoked))

    async def assigned(self, assigned: Collection[TopicPartition]) -> None:
        log.info("agents.partitions_assigned", partitions=sorted(tp.partition for tp in assigned))

    def failure(self) -> BaseException | None:
        acting = self._acting
        return acting.exception() if acting.done() and not acting.cancelled() else None

    async def close(self, failed: bool) -> None:
        """End the acting task; what it had not committed is acted on again by the next owner."""
        await cancel_and_wait(self._acting)
        if not failed and (failure := self.failure()) is not None:
            raise failure


def _own_tick(rec: ConsumerRecord[bytes, bytes], keys: RecordKeys | None) -> bool:
    forged = keys.problem(rec) if keys is not None else None
    if forged is not None:
        log.warning("agents.forged_tick", partition=rec.partition, offset=rec.offset, reason=forged)
    return forged is None


def _take_queued(batch: Batch, work: asyncio.Queue[Batch]) -> None:
    """Add every fetch queued in ``work`` to ``batch`` (their partitions are paused until it is committed,
    so no partition comes twice)."""
    while not work.empty():
        for tp, records in work.get_nowait().items():
            batch.setdefault(tp, []).extend(records)


def _ticks_of(
    batch: Batch, after: Collection[tuple[int, int]] = (), keys: RecordKeys | None = None
) -> list[control.Tick]:
    """The tick records of ``batch`` in (tick, shard) order, without those already acted on (``after``:
    (shard, tick) pairs); with ``keys``, without any the society's clock did not sign (a forged tick would
    make the agents act out of turn; it is logged and skipped)."""
    ticks = (
        control.loads(rec.value) for records in batch.values() for rec in records if _own_tick(rec, keys)
    )
    return sorted(
        (k for k in ticks if (k["shard"], k["tick"]) not in after), key=lambda k: (k["tick"], k["shard"])
    )
