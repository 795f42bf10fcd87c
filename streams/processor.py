"""The action processor: validate actions, publish events, dead letters, feeds and window partials.

A batch consumer in the consumer group ``society.<name>.streams`` over the actions topic; it runs inside
the Faust worker (``streams.app``) as a service. Why not a per-event Faust agent: on this machine Faust's
per-event stream path measured 8,500 events/s (12,000 with uvloop) before doing any work, below the
20,000 events/s end-to-end target; a batch loop over ``getmany`` keeps the same at-least-once contract at
several times the rate. The low-volume aggregation runs as a real Faust agent with Faust tables.

Contract (at-least-once in, effectively-once out):

- per batch: every output record is acknowledged by the broker (acks=all) before the input offsets are
  committed; a crash replays the uncommitted tail, and the rebuilt state recognises its events as
  duplicates by event id, so nothing is published twice to the events topic;
- on partition assignment the partition's state is rebuilt from its events topic (the accepted log); a
  worker that cannot rebuild a partition logs ``processor.rebuild_failed`` and its run loop raises, which
  stops the Faust worker with a non-zero exit (mode crashes the worker on a failed service future), so
  the stack restarts it instead of it running on without the partition;
- invalid records go to the dead-letter topic with reason, code and origin in headers; the loop goes on.
  A dead letter keeps at most ``DLQ_MAX_VALUE_BYTES`` of the record (headers ``dlq-original-bytes`` and
  ``dlq-truncated`` say how much there was), so that no record is too large to dead-letter;
- no record can stop the loop: a record that makes validation itself fail (a bug) is dead-lettered as
  ``internal_error`` with the exception, logged with its traceback.

Every record must belong where it is: this society, its key (``partition_key``), the partition Kafka's
default partitioner gives that key, and an event id no other accepted event has on any partition this
worker owns (``streams.partition_state``); watermarks must come from the producers the society registered
(``schemas.control.registered_producers``).
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Awaitable
from typing import Any

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, ConsumerRebalanceListener, TopicPartition

from schemas import control
from schemas.topics import (
    DLQ_CODE,
    DLQ_KEY,
    DLQ_OFFSET,
    DLQ_ORIGINAL_BYTES,
    DLQ_PARTITION,
    DLQ_REASON,
    DLQ_TOPIC,
    DLQ_TRUNCATED,
    HEADER_KIND,
    KIND_WATERMARK,
    Role,
    topic_name,
)
from schemas.wire import MAX_REASON_CHARS
from society.broker import partition_count
from society.logs import get_logger
from society.settings import Settings
from streams.batch_out import BatchOut
from streams.partition_state import Accepted, EventIds, MarkApplied, Outcome, PartitionState, Rejected

log = get_logger(__name__)

DLQ_MAX_VALUE_BYTES = 1 << 20
"""A dead letter keeps at most this prefix of a record (the producer's request limit is 8 MiB)."""
DLQ_MAX_KEY_BYTES = 1 << 10
MAX_EVENT_BYTES = 1 << 20
"""Whatever SOCIETY_MAX_EVENT_BYTES says, an accepted event fits one producer batch (1 MiB)."""
REBUILD_STALL_S = 120.0
_WATERMARK_HEADERS = [(HEADER_KIND, KIND_WATERMARK)]


class RebuildFailed(Exception):
    """A partition's state could not be rebuilt from its events topic: the worker must not go on."""


def is_watermark(headers: Any) -> bool:
    """True when a record is a watermark control record."""
    return any(k == HEADER_KIND and v == KIND_WATERMARK for k, v in headers or ())


class _Rebalance(ConsumerRebalanceListener):  # type: ignore[misc]
    def __init__(self, proc: ActionProcessor) -> None:
        self.proc = proc

    async def on_partitions_revoked(self, revoked: list[TopicPartition]) -> None:
        await self.proc.on_revoked(revoked)

    async def on_partitions_assigned(self, assigned: list[TopicPartition]) -> None:
        await self.proc.on_assigned(assigned)


class ActionProcessor:
    """See module docstring."""

    def __init__(self, settings: Settings, bootstrap: str, society: str) -> None:
        self.settings = settings
        self.bootstrap = bootstrap
        self.society = society
        self.t_actions = topic_name(society, Role.ACTIONS)
        self.t_events = topic_name(society, Role.EVENTS)
        self.t_dlq = topic_name(society, Role.DEADLETTER)
        self.t_feeds = topic_name(society, Role.FEEDS)
        self.t_partials = topic_name(society, Role.PARTIALS)
        self.states: dict[int, PartitionState] = {}
        self.event_ids = EventIds()  # every accepted event id of the partitions this worker owns
        self.registered = control.registered_producers(settings.shards)
        self.failure: RebuildFailed | None = None
        self.lock = asyncio.Lock()
        self.partitions = 0
        self.consumer: AIOKafkaConsumer | None = None
        self.producer: AIOKafkaProducer | None = None
        self.processed = 0

    def _new_state(self, partition: int) -> PartitionState:
        s = self.settings
        return PartitionState(
            partition,
            self.partitions,
            window_us=int(s.window_seconds * 1_000_000),
            feed_size=s.feed_size,
            max_event_bytes=min(s.max_event_bytes, MAX_EVENT_BYTES),
            max_future_us=int(s.max_future_skew_s * 1_000_000),
            thread_ttl_us=int(s.thread_ttl_seconds * 1_000_000),
            society=self.society,
            check_keys=True,
            registered=self.registered,
            event_ids=self.event_ids,
        )

    # ------------------------------------------------------------- lifecycle
    async def run(self, stop: asyncio.Event) -> None:
        self.producer = AIOKafkaProducer(
            bootstrap_servers=self.bootstrap,
            acks="all",
            linger_ms=5,
            max_batch_size=1 << 20,
            max_request_size=8 << 20,
        )
        await self.producer.start()
        self.consumer = AIOKafkaConsumer(
            bootstrap_servers=self.bootstrap,
            group_id=f"society.{self.society}.streams",
            enable_auto_commit=False,
            auto_offset_reset="earliest",
            fetch_max_wait_ms=max(20, self.settings.poll_ms),
            max_poll_records=10_000,
            max_partition_fetch_bytes=8 << 20,
        )
        await self.consumer.start()
        self.partitions = await partition_count(self.bootstrap, self.t_actions)
        self.consumer.subscribe([self.t_actions], listener=_Rebalance(self))
        log.info("processor.started", society=self.society, partitions=self.partitions)
        try:
            while not stop.is_set():
                if self.failure is not None:
                    raise self.failure
                batch = await self.consumer.getmany(timeout_ms=100)
                if batch:
                    async with self.lock:
                        await self._process(batch)
        finally:
            with contextlib.suppress(Exception):
                await self.consumer.stop()
            await self.producer.stop()
            log.info("processor.stopped", processed=self.processed)

    async def on_revoked(self, revoked: list[TopicPartition]) -> None:
        async with self.lock:
            for tp in revoked:
                self.states.pop(tp.partition, None)
                self.event_ids.drop_partition(tp.partition)
            log.info("processor.revoked", partitions=[tp.partition for tp in revoked])

    async def on_assigned(self, assigned: list[TopicPartition]) -> None:
        """Rebuild each new partition; on failure say so and make the run loop raise (aiokafka swallows
        exceptions of rebalance listeners, so raising here would leave the worker running without it)."""
        async with self.lock:
            for tp in assigned:
                if tp.topic != self.t_actions or tp.partition in self.states:
                    continue
                try:
                    self.states[tp.partition] = await self._rebuild(tp.partition)
                except Exception as exc:
                    log.error(
                        "processor.rebuild_failed", partition=tp.partition, error=repr(exc), exc_info=exc
                    )
                    self.failure = RebuildFailed(f"could not rebuild partition {tp.partition}: {exc!r}")
                    self.failure.__cause__ = exc
                    return

    # --------------------------------------------------------------- rebuild
    async def _rebuild(self, partition: int) -> PartitionState:
        """Replay the partition's accepted events (and forwarded watermarks) into a fresh state.

        Raises ``TimeoutError`` when reading the partition makes no progress for ``REBUILD_STALL_S``.
        """
        self.event_ids.drop_partition(partition)  # refilled from the log below
        state = self._new_state(partition)
        tp = TopicPartition(self.t_events, partition)
        reader = AIOKafkaConsumer(
            bootstrap_servers=self.bootstrap,
            enable_auto_commit=False,
            group_id=None,
            fetch_max_wait_ms=50,
            max_poll_records=10_000,
        )
        await reader.start()
        replayed = 0
        pending: list[Awaitable[Any]] = []
        last_tick = None
        try:
            reader.assign([tp])
            await reader.seek_to_beginning(tp)
            progress = time.monotonic()
            while True:
                batch = await reader.getmany(tp, timeout_ms=200)
                for rec in batch.get(tp, []):
                    replayed += 1
                    progress = time.monotonic()
                    if not is_watermark(rec.headers):
                        state.accept_action(rec.value, now_us=2**62, key=rec.key)
                        continue
                    applied = state.accept_watermark(rec.value, int(time.time() * 1_000_000))
                    if isinstance(applied, Rejected):  # it counted when it was accepted; it cannot now
                        log.warning(
                            "processor.rebuild_mark_skipped", partition=partition, reason=applied.reason
                        )
                        continue
                    for p in applied.partials:  # re-emitted; the aggregator ignores windows it has done
                        pending.append(await self._send_partial(p))
                    last_tick = applied.tick if applied.tick is not None else last_tick
                hw = reader.highwater(tp)
                if hw is not None and await reader.position(tp) >= hw:
                    break
                if time.monotonic() - progress > REBUILD_STALL_S:
                    raise TimeoutError(
                        f"no progress reading {self.t_events} partition {partition} for "
                        f"{REBUILD_STALL_S:.0f} s (at {replayed} records, high watermark {hw})"
                    )
        finally:
            await reader.stop()
        if pending:
            await asyncio.gather(*pending)
        if last_tick is not None or state.last_feed_tick >= 0:
            await self._send_feed(state, state.last_feed_tick)
        log.info("processor.rebuilt", partition=partition, records=replayed, threads=len(state.threads))
        return state

    # ------------------------------------------------------------- processing
    async def _send_partial(self, p: control.WindowPartial) -> Awaitable[Any]:
        assert self.producer is not None
        fut: Awaitable[Any] = await self.producer.send(
            self.t_partials, control.dumps(p), key=str(p["window_start_us"]).encode()
        )
        return fut

    async def _send_feed(self, state: PartitionState, tick: int) -> Awaitable[Any]:
        assert self.producer is not None
        snap = state.feed_snapshot(tick)
        fut: Awaitable[Any] = await self.producer.send(
            self.t_feeds, control.dumps(snap), key=str(state.partition).encode(), partition=state.partition
        )
        return fut

    async def _process(self, batch: dict[TopicPartition, list[Any]]) -> None:
        assert self.producer is not None
        assert self.consumer is not None
        producer = self.producer
        now_us = int(time.time() * 1_000_000)
        futures: list[Awaitable[Any]] = []
        offsets: dict[TopicPartition, int] = {}
        for tp, records in batch.items():
            state = self.states.get(tp.partition)
            if state is None:  # revoked while fetching
                continue
            out = BatchOut(producer, self.t_events, tp.partition)
            for rec in records:
                if is_watermark(rec.headers):
                    await self._watermark(state, rec, now_us, out, futures)
                    continue
                outcome = self._accept(state, rec, now_us)
                if isinstance(outcome, Accepted):
                    await out.append(rec.key, rec.value, [])
                elif isinstance(outcome, Rejected):
                    futures.append(await self._dead_letter(rec, outcome.reason, outcome.code))
            await out.flush()
            futures.extend(out.futures)
            offsets[tp] = records[-1].offset + 1
            self.processed += len(records)
        if futures:
            await asyncio.gather(*futures)
        if offsets:
            await self.consumer.commit(offsets)

    @staticmethod
    def _accept(state: PartitionState, rec: Any, now_us: int) -> Outcome:
        try:
            return state.accept_action(rec.value, now_us, key=rec.key)
        except Exception as exc:  # a bug, not bad input: keep the loop going, say so loudly
            log.error("processor.internal_error", partition=rec.partition, offset=rec.offset, exc_info=exc)
            return Rejected(f"the stream worker failed on this record: {exc!r}", "internal_error")

    async def _watermark(
        self, state: PartitionState, rec: Any, now_us: int, out: BatchOut, futures: list[Awaitable[Any]]
    ) -> None:
        """Check and apply a watermark; forward it (no key, only the kind header), send what it closed."""
        try:
            applied: MarkApplied | Rejected = state.accept_watermark(rec.value, now_us)
        except Exception as exc:
            log.error("processor.internal_error", partition=rec.partition, offset=rec.offset, exc_info=exc)
            applied = Rejected(f"the stream worker failed on this watermark: {exc!r}", "internal_error")
        if isinstance(applied, Rejected):
            futures.append(await self._dead_letter(rec, applied.reason, applied.code))
            return
        await out.append(None, rec.value, _WATERMARK_HEADERS)
        for p in applied.partials:
            futures.append(await self._send_partial(p))
        if applied.tick is not None:
            futures.append(await self._send_feed(state, applied.tick))

    async def _dead_letter(self, rec: Any, reason: str, code: str) -> Awaitable[Any]:
        """Send a rejected record to the dead-letter topic: at most ``DLQ_MAX_VALUE_BYTES`` of its value."""
        assert self.producer is not None
        value: bytes = rec.value if rec.value is not None else b""
        size = len(value)
        truncated = size > DLQ_MAX_VALUE_BYTES
        text = reason if len(reason) <= MAX_REASON_CHARS * 2 else f"{reason[: MAX_REASON_CHARS * 2]}..."
        if truncated:
            value = value[:DLQ_MAX_VALUE_BYTES]
            text = f"{text}; the dead letter keeps its first {DLQ_MAX_VALUE_BYTES:,} of {size:,} bytes"
        key = rec.key[:DLQ_MAX_KEY_BYTES] if rec.key is not None else None
        headers = [
            (DLQ_REASON, text.encode("utf-8", "backslashreplace")),
            (DLQ_CODE, code.encode()),
            (DLQ_TOPIC, rec.topic.encode()),
            (DLQ_PARTITION, str(rec.partition).encode()),
            (DLQ_OFFSET, str(rec.offset).encode()),
            (DLQ_KEY, key or b""),
            (DLQ_ORIGINAL_BYTES, str(size).encode()),
            (DLQ_TRUNCATED, b"true" if truncated else b"false"),
        ]
        log.warning("action.rejected", code=code, reason=text, partition=rec.partition, offset=rec.offset)
        fut: Awaitable[Any] = await self.producer.send(self.t_dlq, value, key=key, headers=headers)
        return fut
