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
- here: the sink's steps on the one consume loop (``runtime.consume_loop``), listed in ``SinkSteps``; a
  revoke flushes and commits what is pending, an assignment drops it and seeks.
"""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Collection
from pathlib import Path
from typing import Any

from aiokafka.errors import KafkaError

from molt_society.runtime import kafka
from molt_society.runtime.consume_loop import Batch, Commits, ConsumeLoop
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


class SinkSteps:
    """The sink's steps on each fetch (``runtime.consume_loop``):

    1. resume check: a partition's first records after an assignment are checked against what is stored
       at the offset it resumed from (``sinks.resume``);
    2. batch: appended to the partition's pending batch (``sinks.batching``);
    3. flush (poll): a full or old batch is inserted, retried until stored;
    4. commit: past the batch, through the loop's ``Commits``, only after the insert returned.

    Also on every poll the lag of each owned partition (``GET /health``). A revoke flushes and commits
    everything pending; an assignment drops what is pending and seeks past what is stored."""

    def __init__(self, consumer: Any, batcher: Batcher, resume: Resume, stats: SinkStats) -> None:
        self._consumer = consumer
        self._batcher = batcher
        self._resume = resume
        self._stats = stats

    async def submit(self, batch: Batch) -> None:
        now = time.monotonic()
        for tp, fetched in batch.items():
            records = self._resume.checked(tp, fetched)
            if records:
                self._batcher.add(tp, records, now)

    async def poll(self) -> None:
        await self._update_lag()
        await self._batcher.flush_due()

    async def revoked(self, revoked: Collection[Any]) -> None:
        """Flush and commit everything pending before the partitions go to another member."""
        log.info("sink.partitions_revoked", partitions=sorted(tp_name(tp) for tp in revoked))
        try:
            await self._batcher.flush_due(force=True)
        except BatchAbandoned:
            log.warning("sink.revoke_flush_abandoned")
        async with self._batcher.lock:
            self._batcher.clear(warn=False)
            self._stats.lag.clear()

    async def assigned(self, assigned: Collection[Any]) -> None:
        """Seek each new partition to resume after the offsets already stored in ClickHouse (the loop
        pauses them meanwhile: records fetched from the committed offset and again after the seek would
        be inserted twice)."""
        async with self._batcher.lock:
            self._batcher.clear(warn=True)
            await self._resume.seek(self._consumer, assigned)

    def failure(self) -> BaseException | None:
        return None  # a flush that cannot go on raises (``InsertsFailing``)

    async def close(self, failed: bool) -> None:
        """The last batches' inserts and commits, unless the loop failed (inserts that keep failing: the
        batches stay uncommitted for the next sink). A commit waits for the group's coordinator, which may
        be gone with the broker (a killed driver's broker dies with it): bounded, and what is stored but
        not committed is found again by the next sink (``Resume``)."""
        if failed:
            return
        try:
            await asyncio.wait_for(self._batcher.flush_due(force=True), STOP_FLUSH_S)
        except BatchAbandoned as exc:
            log.warning("sink.stop_flush_abandoned", batch=str(exc))
        except TimeoutError:
            log.warning("sink.stop_flush_timed_out", seconds=STOP_FLUSH_S)

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


STOP_FLUSH_S = 20.0


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
            commits = Commits(consumer, "sink")
            batcher = Batcher(
                self.settings, self.stats, self.store, self.generation, self.targets, commits.commit, stop
            )
            resume = Resume(self.store, self.generation, self.targets)
            loop = ConsumeLoop(consumer, "sink", SinkSteps(consumer, batcher, resume, self.stats))
            loop.subscribe(self.targets)
            if not await loop.start(stop):
                log.warning("sink.stopped_before_start", reason="stopped while joining its group")
                warm.cancel()
                await loop.stop_client()
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
            await loop.run(stop)
            log.info(
                "sink.stopped",
                **self.stats.snapshot(),
                gap_refetches=loop.gaps.refetches,
                offsets_given_up=loop.gaps.offsets_given_up,
            )
        finally:
            await self.server.close()
            await self.store.close()
