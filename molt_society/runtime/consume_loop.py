"""One consume loop for the group members of a stack: the agent workers, the stream workers and the sinks.

A member is this loop, its ``Steps`` (what the records mean, each process lists them in one class) and
``Commits``, the one way to the broker's commit. The loop owns everything else, in this order:

1. subscribe with its rebalance listener and start the client, unless told to stop while joining
   (aiokafka's start retries a broker that is gone for ever);
2. fetch (``getmany``) -> the gap guard (``runtime.contiguous``) -> the partitions still assigned ->
   ``steps.submit(batch)``, then ``steps.poll()`` after every fetch, empty or not (time-driven work: a
   batch old enough to flush, a snapshot due). No await between the fetch and the submit, so a
   rebalance cannot slip in between; a failure a step reports (``steps.failure()``) ends the loop with it;
3. a rebalance: revoked partitions go to ``steps.revoked`` (which finishes and commits what it holds of
   them), then the gap guard forgets them; assigned ones are paused before any await, positioned by
   ``steps.assigned`` (a seek, a rebuild) and resumed, so nothing is fetched from a position about to
   change. Neither runs while a submit or a poll does (``lock``);
4. stop: the loop notices ``stop`` within ``poll_ms``; a fetch that never returns (aiokafka waiting for a
   group coordinator that died with the broker) is abandoned after ``STOP_GRACE_S``, and only a fetch:
   a step is never cancelled midway. Then ``steps.close(failed)`` (finishes what was submitted, each wait
   bounded by the step) and the client's stop, bounded by ``STOP_CLIENT_S``.

``Commits`` commits offsets in the order they are handed in, only for partitions still assigned, each
commit bounded by ``COMMIT_TIMEOUT_S``. A commit the group refuses (it moved on without this member: a
stalled broker or process) is said as ``<name>.commit_after_rebalance``, one that fails or is not answered
as ``<name>.commit_failed``; either way the records stay uncommitted and the partition's next owner reads
them again, and every member's steps recognise what they already did (event ids downstream, the sink's
insert tokens and resume).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Collection
from typing import Any, Protocol

from aiokafka import TopicPartition
from aiokafka.errors import CommitFailedError, IllegalStateError, KafkaError

from molt_society.runtime import kafka
from molt_society.runtime.contiguous import Contiguous
from molt_society.runtime.logs import get_logger

log = get_logger(__name__)

Batch = dict[TopicPartition, list[Any]]
"""One fetch: each partition's records, in offset order, with no gap (``ConsumerRecord``s)."""

STOP_GRACE_S = 5.0
"""After ``stop``, how long the fetch loop may take to notice it before a waiting fetch is cancelled."""
STOP_CLIENT_S = 10.0
"""How long the client's stop (leaving the group) may take."""
COMMIT_TIMEOUT_S = 10.0
"""A commit not answered within this is given up (``<name>.commit_failed``): aiokafka looks for a group
coordinator that died with the broker for ever."""


class Steps(Protocol):
    """What a member does with the records its loop fetches (see the module)."""

    async def submit(self, batch: Batch) -> None:
        """Take one fetch (owned partitions, contiguous records). May wait (a full pipeline)."""

    async def poll(self) -> None:
        """Time-driven work, after every fetch."""

    async def revoked(self, partitions: Collection[TopicPartition]) -> None:
        """``partitions`` leave: finish and commit what is held of them, forget them."""

    async def assigned(self, partitions: Collection[TopicPartition]) -> None:
        """``partitions`` arrive (paused until this returns): position them."""

    def failure(self) -> BaseException | None:
        """Why the member must not go on, once it must not (the loop raises it)."""

    async def close(self, failed: bool) -> None:
        """The loop ends (``failed``: on an error): finish what was submitted, within the step's own
        bounds."""


class Commits:
    """The one way a member commits offsets (see the module)."""

    def __init__(self, consumer: Any, name: str, timeout_s: float = COMMIT_TIMEOUT_S) -> None:
        self._consumer = consumer
        self._name = name
        self._timeout_s = timeout_s
        self._lock = asyncio.Lock()  # FIFO: commits reach the broker in the order they are handed in
        self.refused = 0
        """Commits the group refused because it had moved on without this member."""
        self.failed = 0
        """Commits that failed otherwise or were not answered in time."""

    async def commit(self, offsets: dict[TopicPartition, int]) -> bool:
        """Commit ``{partition: next offset}`` for the partitions still assigned; True when the broker
        took them, False (said) when it did not or none is still assigned."""
        async with self._lock:
            owned = self._consumer.assignment()
            mine = {tp: offset for tp, offset in offsets.items() if tp in owned}
            if not mine:  # a rebalance took them: their new owner reads them again (aiokafka refuses {})
                return False
            try:
                await asyncio.wait_for(self._consumer.commit(mine), self._timeout_s)
            except (CommitFailedError, IllegalStateError) as exc:
                self.refused += 1
                log.warning(f"{self._name}.commit_after_rebalance", error=repr(exc), partitions=len(mine))
            except (KafkaError, AssertionError, TimeoutError) as exc:
                self.failed += 1
                log.warning(
                    f"{self._name}.commit_failed",
                    error=repr(exc)
                    if not isinstance(exc, TimeoutError)
                    else f"not answered in {self._timeout_s} s",
                    partitions=sorted(f"{tp.topic}:{tp.partition}={o}" for tp, o in mine.items()),
                )
            else:
                return True
            return False


class ConsumeLoop:
    """A group member's loop (see the module): ``consumer`` subscribed to ``topics``, its records to
    ``steps``. ``name`` prefixes its log lines and names its gap guard."""

    def __init__(self, consumer: Any, name: str, steps: Steps, *, poll_ms: int = 100) -> None:
        self.consumer = consumer
        self.name = name
        self.steps = steps
        self.poll_ms = poll_ms
        self.gaps = Contiguous(consumer, name)
        self.lock = asyncio.Lock()  # a submit or poll, or a rebalance's steps: never two at once
        self.fetching = False  # waiting in getmany (the one place a stopping loop may be cancelled)
        self.closing = False  # the loop ended: a revocation now is the client leaving its group

    def subscribe(self, topics: Collection[str]) -> None:
        self.consumer.subscribe(
            topics=sorted(topics), listener=kafka.Rebalance(self._revoked, self._assigned)
        )

    async def start(self, stop: asyncio.Event) -> bool:
        """Start the client; False, the start abandoned, when ``stop`` is set first."""
        return await start_unless_stopped(self.consumer, stop)

    async def run(self, stop: asyncio.Event) -> None:
        """Fetch into the steps until ``stop`` is set or a step fails; then close the steps and stop the
        client. Raises what a step failed with."""
        failed = True
        try:
            await consume_until(self, stop)
            failed = False
        finally:
            try:
                await self.steps.close(failed)
            finally:
                await self.stop_client()

    async def stop_client(self) -> None:
        """Leave the group and close the client, bounded by ``STOP_CLIENT_S``."""
        self.closing = True
        try:
            await asyncio.wait_for(self.consumer.stop(), STOP_CLIENT_S)
        except TimeoutError:
            log.warning(f"{self.name}.consumer_stop_timed_out", seconds=STOP_CLIENT_S)
        except Exception as exc:  # the client is going away either way
            log.warning(f"{self.name}.consumer_stop_failed", error=repr(exc))

    async def consume(self, stop: asyncio.Event) -> None:
        """Fetch, guard and submit until ``stop`` is set; raises ``steps.failure()`` once there is one."""
        consumer, steps = self.consumer, self.steps
        while not stop.is_set():
            if (failure := steps.failure()) is not None:
                raise failure
            self.fetching = True  # only here may a stopping loop be cancelled (``consume_until``)
            try:
                fetched = await consumer.getmany(timeout_ms=self.poll_ms)
            finally:
                self.fetching = False
            owned = consumer.assignment()
            batch = self.gaps.fetched({tp: recs for tp, recs in fetched.items() if tp in owned})
            async with self.lock:
                if batch:
                    await steps.submit(batch)
                await steps.poll()

    async def _revoked(self, revoked: Collection[TopicPartition]) -> None:
        async with self.lock:
            await self.steps.revoked(revoked)
            self.gaps.forget(revoked)

    async def _assigned(self, assigned: Collection[TopicPartition]) -> None:
        self.consumer.pause(*assigned)  # before any await: aiokafka goes on fetching meanwhile
        try:
            async with self.lock:
                await self.steps.assigned(assigned)
                self.gaps.forget(assigned)  # each continues from its first record fetched
        finally:
            self.consumer.resume(*assigned)


class _Fetching(Protocol):
    name: str
    fetching: bool

    async def consume(self, stop: asyncio.Event) -> None: ...


async def consume_until(member: _Fetching, stop: asyncio.Event) -> None:
    """``member.consume(stop)``, cancelled if it has not returned ``STOP_GRACE_S`` after ``stop`` is set.
    Cancelled only while it waits in ``getmany`` (never in a step), so nothing fetched is handled half:
    the records are fetched again by the next owner of the partitions, from the committed offsets."""
    consuming = asyncio.ensure_future(member.consume(stop))
    stopping = asyncio.ensure_future(stop.wait())
    try:
        await asyncio.wait({consuming, stopping}, return_when=asyncio.FIRST_COMPLETED)
        if not consuming.done():
            await asyncio.wait({consuming}, timeout=STOP_GRACE_S)
        while not consuming.done() and not member.fetching:  # a step runs: it is bounded on its own
            await asyncio.wait({consuming}, timeout=0.1)
        if not consuming.done():
            log.warning(
                f"{member.name}.fetch_abandoned", seconds=STOP_GRACE_S, reason="the fetch did not return"
            )
            consuming.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await consuming
            return
        consuming.result()  # raises what the loop raised
    finally:
        stopping.cancel()
        if not consuming.done():  # this coroutine itself was cancelled
            consuming.cancel()


async def start_unless_stopped(consumer: Any, stop: asyncio.Event) -> bool:
    """``consumer.start()``; False, with the start abandoned, when ``stop`` is set first. aiokafka's start
    retries a broker that is gone for ever: a member told to stop (SIGTERM from the kernel when its driver
    was SIGKILLed, its broker gone with it) while joining never exited (seen: a sink, 17 minutes,
    test_faults's driver killed while copying a fork's history)."""
    starting = asyncio.ensure_future(consumer.start())
    stopping = asyncio.ensure_future(stop.wait())
    try:
        await asyncio.wait({starting, stopping}, return_when=asyncio.FIRST_COMPLETED)
        if starting.done():
            starting.result()  # raises why the start failed
            return True
        starting.cancel()
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await starting
        return False
    finally:
        stopping.cancel()
