"""The sink: a society's events, metrics and dead letters from Kafka into ClickHouse.

Delivery is at least once, rows are effectively once. ``ClickHouseSink`` wires the parts together, each in
a module named for what it does (their docstrings hold the contract):

- ``sinks.batching``: records pending per partition, flushed at ``sink_batch_rows`` records or
  ``sink_batch_seconds``, inserted with ``insert_deduplication_token = "topic:partition:first-last"`` and
  retried until they are stored; the offset is committed only after the insert returned.
- ``sinks.resume``: on assignment each partition resumes after ``max(_offset)`` already stored, checked
  against the record found there (``PartitionMismatch`` otherwise); the generation after a broker loss.
- ``sinks.store``: the one thread and client of the inserts and the resume queries.
- ``sinks.serving``: ``POST /query``, ``GET /health``, ``POST /internal/embeddings`` and ``sink.json``.
- here: the group member (``runtime.kafka``) and its consume loop; a revoke flushes and commits what is
  pending, an assignment drops it and seeks.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import time
from collections.abc import Collection
from pathlib import Path
from typing import Any

from aiokafka.errors import KafkaError

from molt_society.runtime import kafka
from molt_society.runtime.contiguous import Contiguous
from molt_society.runtime.lag import own_lag
from molt_society.runtime.logs import get_logger
from molt_society.runtime.record_auth import RecordKeys
from molt_society.runtime.settings import Settings
from molt_society.sinks.batching import BatchAbandoned, Batcher
from molt_society.sinks.clickhouse import targets
from molt_society.sinks.resume import Generation, Resume
from molt_society.sinks.serving import SinkServer
from molt_society.sinks.sink_stats import SinkStats, tp_name
from molt_society.sinks.store import Store, warm_up

log = get_logger(__name__)


class _Member:
    """The sink's member of its consumer group: the consume loop and what a rebalance does."""

    def __init__(self, consumer: Any, batcher: Batcher, resume: Resume, stats: SinkStats) -> None:
        self._consumer = consumer
        self._batcher = batcher
        self._resume = resume
        self._stats = stats
        self.fetching = False  # waiting in getmany (the one place a stopping sink may cancel the loop)
        self.gaps = Contiguous(consumer, "sink")

    async def on_revoked(self, revoked: Collection[Any]) -> None:
        """Flush and commit everything pending before the partitions go to another member."""
        log.info("sink.partitions_revoked", partitions=sorted(tp_name(tp) for tp in revoked))
        try:
            await self._batcher.flush_due(force=True)
        except BatchAbandoned:
            log.warning("sink.revoke_flush_abandoned")
        async with self._batcher.lock:
            self._batcher.clear(warn=False)
            self._stats.lag.clear()
        self.gaps.forget(revoked)

    async def on_assigned(self, assigned: Collection[Any]) -> None:
        """Seek each new partition to resume after the offsets already stored in ClickHouse.

        aiokafka keeps fetching while this coroutine awaits, so the partitions are paused first (before
        any await) and resumed once positioned: otherwise records fetched from the committed offset and
        again after the seek would be inserted twice.
        """
        self._consumer.pause(*assigned)
        try:
            async with self._batcher.lock:
                self._batcher.clear(warn=True)
                await self._resume.seek(self._consumer, assigned)
                self.gaps.forget(assigned)  # each continues from its first record fetched
        finally:
            self._consumer.resume(*assigned)

    async def consume(self, stop: asyncio.Event) -> None:
        """Fetch, check and batch records until ``stop`` is set (getmany wakes up every 100 ms)."""
        consumer = self._consumer
        while not stop.is_set():
            self.fetching = True  # only here may a stopping sink cancel the loop (``_consume_until``)
            try:
                fetched = await consumer.getmany(timeout_ms=100)
            finally:
                self.fetching = False
            # No await between getmany and the append: a rebalance callback cannot slip in between.
            now = time.monotonic()
            assignment = consumer.assignment()
            for tp, fetched_records in fetched.items():
                if not fetched_records or tp not in assignment:
                    continue
                contiguous = self.gaps.records(tp, fetched_records)
                records = self._resume.checked(tp, contiguous) if contiguous else contiguous
                if records:
                    self._batcher.add(tp, records, now)
            await self._update_lag()
            await self._batcher.flush_due()

    async def _update_lag(self) -> None:
        consumer = self._consumer
        for tp in consumer.assignment():
            try:
                lag = None
                if consumer.highwater(tp) is not None:
                    # position() waits while a partition has no position (being reset): never block on it.
                    lag = own_lag(consumer, tp, await asyncio.wait_for(consumer.position(tp), 0.05))
            except (KafkaError, AssertionError, TimeoutError):
                continue
            self._stats.lag[tp_name(tp)] = lag


STOP_GRACE_S = 5.0
"""After ``stop``, how long the fetch loop may take to notice it before it is cancelled: a ``getmany``
that waits for a lost group coordinator never returns (aiokafka 0.14 with the broker gone)."""
STOP_FLUSH_S = 20.0
STOP_CLIENT_S = 10.0


async def _consume_until(member: _Member, stop: asyncio.Event) -> None:
    """``member.consume(stop)``, cancelled if it has not returned ``STOP_GRACE_S`` after ``stop`` is set.
    Cancelled only while it waits in ``getmany`` (never in a flush), so nothing fetched is batched half:
    the records are fetched again by the next owner of the partitions, from the committed offsets."""
    consuming = asyncio.ensure_future(member.consume(stop))
    stopping = asyncio.ensure_future(stop.wait())
    try:
        await asyncio.wait({consuming, stopping}, return_when=asyncio.FIRST_COMPLETED)
        if not consuming.done():
            await asyncio.wait({consuming}, timeout=STOP_GRACE_S)
        while not consuming.done() and not member.fetching:  # a flush runs: it is bounded on its own
            await asyncio.wait({consuming}, timeout=0.1)
        if not consuming.done():
            log.warning("sink.fetch_abandoned", seconds=STOP_GRACE_S, reason="the fetch did not return")
            consuming.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await consuming
            return
        consuming.result()  # raises what the loop raised
    finally:
        stopping.cancel()
        if not consuming.done():  # this coroutine itself was cancelled
            consuming.cancel()


async def _start_unless_stopped(consumer: Any, stop: asyncio.Event) -> bool:
    """``consumer.start()``; False, with the start abandoned, when ``stop`` is set first. aiokafka's start
    retries a broker that is gone for ever: a sink told to stop (SIGTERM from the kernel when its driver
    was SIGKILLed, its broker gone with it) while joining never exited (seen: 17 minutes, test_faults's
    driver killed while copying a fork's history)."""
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


class ClickHouseSink:
    """Consumes ``society.<name>.{events,metrics,deadletter}`` into ClickHouse; see the module docstring."""

    def __init__(self, settings: Settings, bootstrap: str, society: str) -> None:
        self.settings = settings
        self.bootstrap = bootstrap
        self.society = society
        self.stats = SinkStats()
        self.group_id = kafka.group_id(society, "sink")
        self.generation = Generation(settings, society)
        self.targets = targets(society, RecordKeys(settings.state_dir).problem)
        self.store = Store(settings, society)
        self.server = SinkServer(settings, society, self.group_id, self.stats, self.store)

    @property
    def url(self) -> str | None:
        """The HTTP URL of the endpoints, once they serve."""
        return self.server.url

    @property
    def state_file(self) -> Path:
        """Where the running sink advertises its pid and HTTP URL."""
        return self.server.state_file

    def _consumer(self) -> Any:
        return kafka.consumer(
            self.bootstrap,
            "member",
            group=self.group_id,
            # the local broker holds the first join for half the session; a revoke flushes what is pending
            **kafka.member_session(self.settings.group_session_timeout_ms),
            client_id=f"society-{self.society}-sink-{os.getpid()}",
            fetch_max_wait_ms=100,
            max_poll_records=20_000,
            metadata_max_age_ms=5_000,
        )

    async def run(self, stop: asyncio.Event) -> None:
        """Run until ``stop`` is set; then flush and commit what is pending and release everything.

        Raises if ClickHouse cannot be opened (e.g. another process owns the chDB directory) or Kafka is
        unreachable at start.
        """
        began = time.monotonic()
        await self.store.open()
        if self.generation.number > 0:
            await self.store.run(self.generation.load)
        await self.server.open_reader()
        log.info("sink.clickhouse_ready", seconds=round(time.monotonic() - began, 3))
        try:
            await self.server.start()
            warm = asyncio.ensure_future(self.store.run(warm_up))  # runs while the consumer joins
            consumer = self._consumer()
            batcher = Batcher(
                self.settings, self.stats, self.store, self.generation, self.targets, consumer.commit, stop
            )
            member = _Member(consumer, batcher, Resume(self.store, self.generation, self.targets), self.stats)
            consumer.subscribe(
                topics=sorted(self.targets), listener=kafka.Rebalance(member.on_revoked, member.on_assigned)
            )
            if not await _start_unless_stopped(consumer, stop):
                log.warning("sink.stopped_before_start", reason="stopped while joining its group")
                warm.cancel()
                with contextlib.suppress(Exception):
                    await asyncio.wait_for(consumer.stop(), STOP_CLIENT_S)
                return
            await warm
            log.info(
                "sink.started",
                society=self.society,
                bootstrap=self.bootstrap,
                clickhouse=self.settings.clickhouse_url,
                url=self.url,
                group_id=self.group_id,
                batch_rows=self.settings.sink_batch_rows,
                batch_seconds=self.settings.sink_batch_seconds,
            )
            try:
                await _consume_until(member, stop)
                # the last batch's insert and commit; a commit waits for the group's coordinator, which
                # may be gone with the broker (a killed driver's broker dies with it): bounded, and what
                # is stored but not committed is found again by the next sink (``Resume``)
                await asyncio.wait_for(batcher.flush_due(force=True), STOP_FLUSH_S)
            except BatchAbandoned as exc:
                log.warning("sink.stop_flush_abandoned", batch=str(exc))
            except TimeoutError:
                log.warning("sink.stop_flush_timed_out", seconds=STOP_FLUSH_S)
            finally:
                try:
                    await asyncio.wait_for(consumer.stop(), STOP_CLIENT_S)
                except TimeoutError:
                    log.warning("sink.consumer_stop_timed_out", seconds=STOP_CLIENT_S)
            log.info(
                "sink.stopped",
                **self.stats.snapshot(),
                gap_refetches=member.gaps.refetches,
                offsets_given_up=member.gaps.offsets_given_up,
            )
        finally:
            await self.server.close()
            await self.store.close()
