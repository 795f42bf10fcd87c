"""The action processor: validate actions, publish events, dead letters, feeds and window partials.

A batch consumer in the consumer group ``society.<name>.streams`` over the actions topic; it runs inside
the Faust worker (``streams.app``) as a service. Why not a per-event Faust agent: on this machine Faust's
per-event stream path measured 8,500 events/s (12,000 with uvloop) before doing any work, below the
20,000 events/s end-to-end target; a batch loop over ``getmany`` keeps the same at-least-once contract at
several times the rate. The low-volume aggregation runs as a real Faust agent with Faust tables.

Its steps on the one consume loop of the stack's members (``runtime.consume_loop``), in this class:

1. process (``submit``): check each record's signature, apply it to its partition's state, send the
   accepted events, the dead letters, the feeds and window partials a watermark closes;
2. complete (``_complete``, batch after batch in order, at most ``PENDING_BATCHES`` behind): the
   acknowledgements, then the marks, then the commit through the loop's ``Commits``;
3. snapshot (after a batch, when due): once everything before it is acknowledged and committed.

A revoke completes and commits every pending batch and drops the partitions' state; an assignment
rebuilds the new partitions' state (paused meanwhile by the loop).

Contract (at-least-once in, effectively-once out):

- per batch: every output record is acknowledged by the broker (acks=all) before the input offsets are
  committed; a crash replays the uncommitted tail, and the rebuilt state recognises its events as
  duplicates by event id, so nothing is published twice to the events topic. The loop does not wait for
  that: once a batch's records are applied and sent, the next batch is fetched and processed while a
  completion task (``_complete``) waits for the acknowledgements, writes the batch's marks and commits,
  batch after batch in order, at most ``PENDING_BATCHES`` behind. Waiting for both inline was two broker
  round trips per batch, about 10 ms of each simulated tick's round trip (BENCHMARKS.md, aging);
- the events topic carries events only. Every watermark that counted goes to the marks topic with the
  events offset it applied at (``HEADER_EVENTS_OFFSET``: the events partition's next offset then, known
  once the events before it are acknowledged), so the two logs interleave exactly as the worker saw them;
- every ``snapshot_every_events`` accepted events or ``snapshot_every_seconds`` (if anything changed) the
  state of each owned partition goes to the snapshots topic with the events and marks offsets it covers
  (``streams.snapshots``), written once everything before it is acknowledged and committed;
- on partition assignment the partition's state is rebuilt from its newest complete snapshot and the
  events and marks after it (from the beginning when there is none); a worker that cannot rebuild a
  partition (the log trimmed below what the snapshot covers, a stalled read) logs
  ``processor.rebuild_failed`` and its run loop raises, which stops the Faust worker with a non-zero exit
  (mode crashes the worker on a failed service future), so the stack restarts it instead of it running
  on without the partition. Caveat: a crash after a batch's events are acknowledged and before its marks
  are leaves those marks out of the log; the replayed batch applies them after its events (the events
  are the same; a window partial of that batch may then count them);
- a commit refused because the group rebalanced meanwhile (``CommitFailedError``: the member's session
  ran out while the broker or this process stalled) is logged as ``processor.commit_after_rebalance``,
  one that fails otherwise or is not answered in ``consume_loop.COMMIT_TIMEOUT_S`` as
  ``processor.commit_failed``, and the loop goes on: the batch stays uncommitted and is replayed as after
  a crash;
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
from collections.abc import AsyncIterator, Awaitable, Callable, Collection
from dataclasses import dataclass
from typing import Any

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition

from molt_society.runtime import kafka, process_status
from molt_society.runtime.batch_out import BatchOut
from molt_society.runtime.broker import partition_count
from molt_society.runtime.consume_loop import Batch, Commits, ConsumeLoop
from molt_society.runtime.contiguous import Contiguous
from molt_society.runtime.logs import get_logger
from molt_society.runtime.record_auth import UNAUTHENTICATED, RecordKeys
from molt_society.runtime.settings import Settings
from molt_society.runtime.task_cancel import cancel_and_wait
from molt_society.schemas import control
from molt_society.schemas.topics import (
    DLQ_CODE,
    DLQ_KEY,
    DLQ_OFFSET,
    DLQ_ORIGINAL_BYTES,
    DLQ_PARTITION,
    DLQ_REASON,
    DLQ_TOPIC,
    DLQ_TRUNCATED,
    HEADER_EVENTS_OFFSET,
    Role,
    topic_name,
)
from molt_society.schemas.wire import MAX_REASON_CHARS
from molt_society.streams import snapshots
from molt_society.streams.event_ids import EventIds
from molt_society.streams.outcomes import Accepted, MarkApplied, Outcome, Rejected
from molt_society.streams.partition_state import PartitionState

log = get_logger(__name__)

DLQ_MAX_VALUE_BYTES = 1 << 20
"""A dead letter keeps at most this prefix of a record (the producer's request limit is 8 MiB)."""
DLQ_MAX_KEY_BYTES = 1 << 10
MAX_EVENT_BYTES = 1 << 20
"""Whatever SOCIETY_MAX_EVENT_BYTES says, an accepted event fits one producer batch (1 MiB)."""
REPLAY_NOW_US = 2**62
"""Processing time of a replay: nothing recorded is refused as being in the future."""
PENDING_BATCHES = 8
"""Batches processed and sent but not yet acknowledged and committed, at most (``_complete``)."""
SNAPSHOT_SPACING = 30.0
"""A partition's snapshots start at least this many times its last snapshot's duration apart. A snapshot
costs time in proportion to the state it holds, so at a fixed interval its share of the worker grows with
the society's age (replaying a 300,000-post archive: 1.5 s per partition after a minute, 3.4 s after four,
every 60 s); with this spacing it stays under a thirtieth of the time per partition, and a rebuild after a
crash replays at most about as many events as that thirtieth would have handled."""
DRAIN_ON_STOP_S = 10.0
"""How long a stopping worker waits for its pending batches to be acknowledged and committed; what is left
stays uncommitted and is replayed by the next owner."""


@dataclass
class _Sent:
    """One processed batch on its way to the broker: per partition its events output and the marks applied
    in it (events appended before each, bytes), the other sends' futures, and the offsets to commit."""

    outs: list[tuple[int, BatchOut, list[tuple[int, bytes]]]]
    futures: list[Awaitable[Any]]
    offsets: dict[TopicPartition, int]


class RebuildFailed(Exception):
    """A partition's state could not be rebuilt from its snapshot and log: the worker must not go on."""


def mark_headers(events_offset: int) -> list[tuple[str, bytes]]:
    """Headers of a marks record: its kind and the events offset the mark applied at."""
    return [*kafka.WATERMARK_HEADERS, (HEADER_EVENTS_OFFSET, str(events_offset).encode())]


def mark_events_offset(headers: Any) -> int:
    """The events offset a marks record applied at (``mark_headers``); ValueError if it has none."""
    for k, v in headers or ():
        if k == HEADER_EVENTS_OFFSET:
            return int(v)
    raise ValueError("marks record without a society-events-offset header")


def state_config(settings: Settings, society: str, event_ids: EventIds) -> dict[str, Any]:
    """The keyword arguments of a stream worker's ``PartitionState``s (``event_ids``: the accepted event ids
    of every partition it owns); ``society.replay_direct`` builds its states with the same."""
    return {
        "window_us": int(settings.window_seconds * 1_000_000),
        "feed_size": settings.feed_size,
        "max_event_bytes": min(settings.max_event_bytes, MAX_EVENT_BYTES),
        "max_future_us": int(settings.max_future_skew_s * 1_000_000),
        "thread_ttl_us": int(settings.thread_ttl_seconds * 1_000_000),
        "society": society,
        "check_keys": True,
        "registered": control.registered_producers(settings.shards),
        "event_ids": event_ids,
    }


class ActionProcessor:
    """See module docstring."""

    def __init__(self, settings: Settings, bootstrap: str, society: str) -> None:
        self.settings = settings
        self.keys = RecordKeys(settings.state_dir)
        self.bootstrap = bootstrap
        self.society = society
        self.t_actions = topic_name(society, Role.ACTIONS)
        self.t_events = topic_name(society, Role.EVENTS)
        self.t_dlq = topic_name(society, Role.DEADLETTER)
        self.t_feeds = topic_name(society, Role.FEEDS)
        self.t_partials = topic_name(society, Role.PARTIALS)
        self.t_marks = topic_name(society, Role.MARKS)
        self.states: dict[int, PartitionState] = {}
        # per owned partition: next offsets of its events and marks partitions, and what changed since
        # its last snapshot (records, monotonic time)
        self.next_events: dict[int, int] = {}
        self.next_marks: dict[int, int] = {}
        self.changed: dict[int, int] = {}
        self.snapshot_at: dict[int, float] = {}
        self.snapshot_seconds: dict[int, float] = {}  # how long each partition's last snapshot took
        self.snapshots = 0
        self.event_ids = EventIds()  # every accepted event id of the partitions this worker owns
        self.fatal: Exception | None = None  # why the worker must stop (``failure()``)
        self.pending: asyncio.Queue[_Sent] = asyncio.Queue(maxsize=PENDING_BATCHES)
        self.completer: asyncio.Task[None] | None = None
        self.partitions = 0
        self.consumer: AIOKafkaConsumer | None = None
        self.producer: AIOKafkaProducer | None = None
        self.commits: Commits | None = None  # the one way to the broker's commit, made in run()
        self.processed = 0
        self.gaps = Contiguous(None, "processor")  # the loop's, from run()

    def _state_config(self) -> dict[str, Any]:
        """The keyword arguments of this worker's ``PartitionState``s."""
        return state_config(self.settings, self.society, self.event_ids)

    def _new_state(self, partition: int) -> PartitionState:
        return PartitionState(partition, self.partitions, **self._state_config())

    # ------------------------------------------------------------- lifecycle
    async def run(self, stop: asyncio.Event) -> None:
        """Process until ``stop`` is set; raises ``RebuildFailed`` or a send's failure (the worker stops)."""
        self.producer = kafka.producer(self.bootstrap, "bulk", keys=self.keys)
        await self.producer.start()
        try:
            # before the subscription: an assignment's rebuild needs it
            self.partitions = await partition_count(self.bootstrap, self.t_actions)
            self.consumer = kafka.consumer(
                self.bootstrap,
                "member",
                group=kafka.group_id(self.society, "streams"),
                fetch_max_wait_ms=max(20, self.settings.poll_ms),
                max_poll_records=10_000,
                max_partition_fetch_bytes=8 << 20,
                # the local broker holds a group's first join for half the session (Settings): a short one
                **kafka.member_session(self.settings.group_session_timeout_ms),
            )
            self.commits = Commits(self.consumer, "processor")
            loop = ConsumeLoop(self.consumer, "processor", self)
            self.gaps = loop.gaps
            loop.subscribe([self.t_actions])
            self.completer = asyncio.create_task(self._complete_loop(), name="processor.complete")
            if not await loop.start(stop):
                log.warning("processor.stopped_before_start", reason="stopped while joining its group")
                await self.close(failed=False)
                await loop.stop_client()
                return
            log.info("processor.started", society=self.society, partitions=self.partitions)
            await loop.run(stop)
        finally:
            await self.producer.stop()
            log.info(
                "processor.stopped",
                processed=self.processed,
                commit_failures=self.commits.refused + self.commits.failed if self.commits else 0,
                gap_refetches=self.gaps.refetches,
                offsets_given_up=self.gaps.offsets_given_up,
            )

    # ------------------------------------------------------------- the steps (runtime.consume_loop)
    async def submit(self, batch: Batch) -> None:
        """Process a fetch (validate, apply, send: ``_process``), then snapshot the partitions due."""
        await self._process(batch)
        await self._snapshot_due()

    async def poll(self) -> None:
        """Nothing runs by time alone: a snapshot is looked at after each batch."""

    def failure(self) -> BaseException | None:
        return self.fatal

    async def close(self, failed: bool) -> None:
        """Wait ``DRAIN_ON_STOP_S`` at most for the pending batches (what is left stays uncommitted and is
        replayed by the next owner), then end the completion task."""
        with contextlib.suppress(Exception):
            await asyncio.wait_for(self._drain(), DRAIN_ON_STOP_S)
        await cancel_and_wait(self.completer)

    async def revoked(self, revoked: Collection[TopicPartition]) -> None:
        await self._drain()  # commit what was processed while the partitions were still ours
        for tp in revoked:
            self.states.pop(tp.partition, None)
            self.event_ids.drop_partition(tp.partition)
            for d in (self.next_events, self.next_marks, self.changed, self.snapshot_at):
                d.pop(tp.partition, None)
        log.info("processor.revoked", partitions=[tp.partition for tp in revoked])

    async def assigned(self, assigned: Collection[TopicPartition]) -> None:
        """Rebuild the new partitions, all at once (each waits mostly on the broker); on failure say so and
        make the run loop raise (aiokafka swallows exceptions of rebalance listeners, so raising here would
        leave the worker running without it)."""
        todo = [tp.partition for tp in assigned if tp.topic == self.t_actions]
        todo = [p for p in todo if p not in self.states]
        results = await asyncio.gather(*(self._rebuild(p) for p in todo), return_exceptions=True)
        for partition, result in zip(todo, results, strict=True):
            if not isinstance(result, BaseException):
                self.states[partition] = result
                continue
            log.error("processor.rebuild_failed", partition=partition, error=repr(result), exc_info=result)
            if self.fatal is None:
                self.fatal = RebuildFailed(f"could not rebuild partition {partition}: {result!r}")
                self.fatal.__cause__ = result
        if self.fatal is None:
            await self._snapshot_due()

    # --------------------------------------------------------------- rebuild
    async def _rebuild(self, partition: int) -> PartitionState:
        """The partition's state: its newest snapshot, then its events and marks after it, interleaved by
        the events offset each mark records. Also sets where its events and marks partitions continue.

        Raises when the log no longer holds what the snapshot does not (trimmed below it), and
        ``TimeoutError`` when reading makes no progress for ``snapshots.READ_STALL_S``.
        """
        began = time.perf_counter()
        self.event_ids.drop_partition(partition)  # refilled from the snapshot and the log below
        reader = snapshots.reader(self.bootstrap)
        await reader.start()
        pending: list[Awaitable[Any]] = []
        try:
            te, tm = TopicPartition(self.t_events, partition), TopicPartition(self.t_marks, partition)
            ts = snapshots.snapshots_partition(self.society, partition)
            reader.assign([te, tm, ts])
            spans = await snapshots.bounds(reader, [te, tm, ts])
            (e_begin, e_end), (m_begin, m_end) = spans[te], spans[tm]
            state, events_from, marks_from = await self._restore(reader, ts, spans[ts])
            if events_from < e_begin or marks_from < m_begin:
                raise RuntimeError(
                    f"the log was trimmed below what the state holds: events from {e_begin} (need "
                    f"{events_from}), marks from {m_begin} (need {marks_from})"
                )
            if events_from > e_end or marks_from > m_end:
                raise RuntimeError(
                    f"the snapshot covers events to {events_from} and marks to {marks_from}, but the log "
                    f"ends at {e_end} and {m_end}"
                )
            events = self._own(snapshots.records(reader, te, events_from, e_end)).__aiter__()
            ev = await anext(events, None)
            replayed = marks = 0
            at_mark: control.FeedSnapshot | None = None  # the feed the live worker published at the last mark
            async for m in self._own(snapshots.records(reader, tm, marks_from, m_end)):
                at = mark_events_offset(m.headers)
                while ev is not None and ev.offset < at:
                    state.accept_action(ev.value, now_us=REPLAY_NOW_US, key=ev.key)
                    replayed += 1
                    ev = await anext(events, None)
                marks += 1
                applied = state.accept_watermark(m.value, int(time.time() * 1_000_000))
                if isinstance(applied, Rejected):  # it counted when it was accepted; it cannot now
                    log.warning("processor.rebuild_mark_skipped", partition=partition, reason=applied.reason)
                    continue
                for p in applied.partials:  # re-emitted; the aggregator ignores windows it has done
                    pending.append(await self._send_partial(p))
                if applied.tick is not None:
                    at_mark = state.feed_snapshot(applied.tick)
            while ev is not None:
                state.accept_action(ev.value, now_us=REPLAY_NOW_US, key=ev.key)
                replayed += 1
                ev = await anext(events, None)
        finally:
            await reader.stop()
        # The feed of the last tick again, for readers that missed it: as it was at its mark. Events after
        # the mark (a next tick's, accepted before a crash) are not in it: an agent worker redoing that
        # tick must see the feed the first one saw (seen after a broker SIGKILL: a tick redone on a feed
        # holding its own first run's comments). Without a mark after the snapshot, the snapshot's feed.
        if at_mark is not None:
            pending.append(await self._send_feed(state, at_mark["tick"], at_mark))
        elif state.last_feed_tick >= 0:
            pending.append(await self._send_feed(state, state.last_feed_tick))
        if pending:
            await asyncio.gather(*pending)
        self.next_events[partition], self.next_marks[partition] = e_end, m_end
        self.changed[partition] = replayed + marks
        self.snapshot_at[partition] = time.monotonic()
        log.info(
            "processor.rebuilt",
            partition=partition,
            snapshot_events_offset=events_from,
            events=replayed,
            marks=marks,
            threads=len(state.threads),
            seconds=round(time.perf_counter() - began, 3),
        )
        process_status.mark_ready(partition=partition)
        return state

    async def _own(self, records: AsyncIterator[Any]) -> AsyncIterator[Any]:
        """The records of ``records`` the stack signed; any other (written to the events or marks topic from
        outside) is left out of the rebuilt state, with a warning."""
        async for rec in records:
            forged = self.keys.problem(rec)
            if forged is None:
                yield rec
            else:
                log.warning("processor.rebuild_forged", topic=rec.topic, offset=rec.offset, reason=forged)

    async def _restore(
        self, reader: AIOKafkaConsumer, tp: TopicPartition, span: tuple[int, int]
    ) -> tuple[PartitionState, int, int]:
        """The state of the newest usable snapshot on snapshots partition ``tp`` with the events and marks
        offsets it covers, or a fresh state and (0, 0)."""
        partition = tp.partition
        snap = await snapshots.newest(reader, tp, span, keys=self.keys)
        if snap is not None and snap.payload is not None:
            try:
                state = PartitionState.from_snapshot(
                    snap.payload, partition, self.partitions, **self._state_config()
                )
            except (ValueError, KeyError, TypeError) as exc:
                self.event_ids.drop_partition(partition)
                log.warning("processor.snapshot_unusable", partition=partition, error=str(exc))
            else:
                return state, snap.events_offset, snap.marks_offset
        return self._new_state(partition), 0, 0

    # ------------------------------------------------------------- snapshots
    async def _snapshot_due(self) -> None:
        """Snapshot every owned partition that changed enough, or long enough ago (see module docstring).
        Called with everything before acknowledged and committed."""
        now = time.monotonic()
        every_n, every_s = self.settings.snapshot_every_events, self.settings.snapshot_every_seconds

        def is_due(partition: int) -> bool:
            changed = self.changed.get(partition, 0)
            since = now - self.snapshot_at.get(partition, now)
            spaced = since >= SNAPSHOT_SPACING * self.snapshot_seconds.get(partition, 0.0)
            return bool(changed) and (changed >= every_n or since >= every_s) and spaced

        def due() -> list[PartitionState]:
            return [state for partition, state in self.states.items() if is_due(partition)]

        if not due():
            return
        await self._drain()  # a snapshot covers only what is acknowledged and committed
        for state in due():
            await self._snapshot(state)

    async def _snapshot(self, state: PartitionState) -> None:
        """Write one snapshot of ``state`` and wait until the broker has every chunk. The state is
        serialised and compressed off the event loop (polls and heartbeats go on); it cannot change
        meanwhile, since every change happens under the consume loop's lock, which the caller holds."""
        assert self.producer is not None
        p = state.partition
        size = self.settings.snapshot_chunk_bytes
        began = time.perf_counter()
        loop = asyncio.get_running_loop()
        chunks = await loop.run_in_executor(None, lambda: snapshots.encode(state.to_snapshot(), size))
        futures = await snapshots.send(
            self.producer,
            self.society,
            p,
            chunks,
            events_offset=self.next_events[p],
            marks_offset=self.next_marks[p],
        )
        await asyncio.gather(*futures)
        self.changed[p] = 0
        self.snapshot_at[p] = time.monotonic()
        self.snapshot_seconds[p] = time.perf_counter() - began
        self.snapshots += 1
        log.info(
            "processor.snapshot",
            partition=p,
            events_offset=self.next_events[p],
            marks_offset=self.next_marks[p],
            bytes=sum(len(c) for c in chunks),
            chunks=len(chunks),
            seconds=round(time.perf_counter() - began, 3),
        )

    # ------------------------------------------------------------- processing
    async def _send_partial(self, p: control.WindowPartial) -> Awaitable[Any]:
        assert self.producer is not None
        fut: Awaitable[Any] = await self.producer.send(
            self.t_partials, control.dumps(p), key=str(p["window_start_us"]).encode()
        )
        return fut

    async def _send_feed(
        self, state: PartitionState, tick: int, taken: control.FeedSnapshot | None = None
    ) -> Awaitable[Any]:
        """Send the feed of ``tick`` (the state's now, or the feed ``taken`` earlier)."""
        assert self.producer is not None
        snap = state.feed_update(tick) if taken is None else state.feed_update_of(taken)
        fut: Awaitable[Any] = await self.producer.send(
            self.t_feeds, control.dumps(snap), key=str(state.partition).encode(), partition=state.partition
        )
        return fut

    async def _process(self, batch: Batch) -> None:
        assert self.producer is not None
        assert self.consumer is not None
        producer = self.producer
        now_us = int(time.time() * 1_000_000)
        futures: list[Awaitable[Any]] = []
        offsets: dict[TopicPartition, int] = {}
        # per partition: its events output and its applied marks (events appended before it, bytes)
        outs: list[tuple[int, BatchOut, list[tuple[int, bytes]]]] = []
        for tp, records in batch.items():
            state = self.states.get(tp.partition)
            if state is None:  # revoked while fetching
                continue
            out = BatchOut(producer, self.t_events, tp.partition)
            marks: list[tuple[int, bytes]] = []
            for rec in records:
                forged = self.keys.problem(rec)
                if forged is not None:  # not the stack's: no event, no watermark, no barrier
                    futures.append(await self._dead_letter(rec, forged, UNAUTHENTICATED))
                    continue
                if kafka.is_watermark(rec.headers):
                    if await self._watermark(state, rec, now_us, futures):
                        marks.append((out.appended, rec.value))
                    continue
                outcome = self._accept(state, rec, now_us)
                if isinstance(outcome, Accepted):
                    await out.append(rec.key, rec.value, [])
                elif isinstance(outcome, Rejected):
                    futures.append(await self._dead_letter(rec, outcome.reason, outcome.code))
            await out.flush()
            outs.append((tp.partition, out, marks))
            offsets[tp] = records[-1].offset + 1
            self.processed += len(records)
        await self._enqueue(_Sent(outs, futures, offsets))

    async def _enqueue(self, sent: _Sent) -> None:
        """Hand a batch to the completion task; waits while ``PENDING_BATCHES`` are ahead of it."""
        await self._unless_completion_failed(lambda: self.pending.put(sent))

    async def _drain(self) -> None:
        """Wait until every batch sent so far is acknowledged and committed."""
        await self._unless_completion_failed(self.pending.join)

    async def _unless_completion_failed(self, wait: Callable[[], Awaitable[None]]) -> None:
        """Await ``wait()``, giving up when the completion task has ended (it failed: the loop then raises
        its failure) or was never started."""
        if self.completer is None or self.completer.done():
            return
        waiting = asyncio.ensure_future(wait())
        try:
            await asyncio.wait({waiting, self.completer}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            waiting.cancel()

    async def _complete_loop(self) -> None:
        """Complete the processed batches in order (``_complete``); a failure stops the worker."""
        while True:
            sent = await self.pending.get()
            try:
                await self._complete(sent)
            except Exception as exc:
                log.error("processor.send_failed", error=repr(exc), exc_info=exc)
                self.fatal = exc
                raise
            finally:
                self.pending.task_done()

    async def _complete(self, sent: _Sent) -> None:
        """Wait for a batch's acknowledgements, write its marks (each with the events offset it applied
        at, known once the events before it are acknowledged), then commit its input offsets."""
        assert self.producer is not None
        assert self.consumer is not None
        producer, outs, futures, offsets = self.producer, sent.outs, sent.futures, sent.offsets
        if any(marks for _, _, marks in outs):  # a mark records the events offset it applied at
            await asyncio.gather(*(f for _, out, _ in outs for f in out.futures))
        mark_outs: list[tuple[int, BatchOut]] = []
        for p, out, marks in outs:
            futures.extend(out.futures)
            if marks:
                mout = BatchOut(producer, self.t_marks, p)
                for n, raw in marks:
                    await mout.append(
                        None, raw, mark_headers(out.offset_after(n, self.next_events.get(p, 0)))
                    )
                await mout.flush()
                futures.extend(mout.futures)
                mark_outs.append((p, mout))
        if futures:
            await asyncio.gather(*futures)
        for p, out, marks in outs:
            self.next_events[p] = out.offset_after(out.appended, self.next_events.get(p, 0))
            self.changed[p] = self.changed.get(p, 0) + out.appended + len(marks)
        for p, mout in mark_outs:
            self.next_marks[p] = mout.offset_after(mout.appended, self.next_marks.get(p, 0))
        if offsets and self.commits is not None:
            # refused when the group moved on without this member (its session ran out: a stalled
            # broker, a starved process): the batch stays uncommitted, the rejoin revokes and rebuilds
            # every partition, and the replayed batch is recognised as already published
            await self.commits.commit(offsets)

    @staticmethod
    def _accept(state: PartitionState, rec: Any, now_us: int) -> Outcome:
        try:
            return state.accept_action(rec.value, now_us, key=rec.key)
        except Exception as exc:  # a bug, not bad input: keep the loop going, say so loudly
            log.error("processor.internal_error", partition=rec.partition, offset=rec.offset, exc_info=exc)
            return Rejected(f"the stream worker failed on this record: {exc!r}", "internal_error")

    async def _watermark(
        self, state: PartitionState, rec: Any, now_us: int, futures: list[Awaitable[Any]]
    ) -> bool:
        """Check and apply a watermark and send what it closed; True when it counted (the caller records
        it on the marks topic), False when it was dead-lettered."""
        try:
            applied: MarkApplied | Rejected = state.accept_watermark(rec.value, now_us)
        except Exception as exc:
            log.error("processor.internal_error", partition=rec.partition, offset=rec.offset, exc_info=exc)
            applied = Rejected(f"the stream worker failed on this watermark: {exc!r}", "internal_error")
        if isinstance(applied, Rejected):
            futures.append(await self._dead_letter(rec, applied.reason, applied.code))
            return False
        for p in applied.partials:
            futures.append(await self._send_partial(p))
        if applied.tick is not None:
            futures.append(await self._send_feed(state, applied.tick))
        return True

    async def _dead_letter(self, rec: Any, reason: str, code: str) -> Awaitable[Any]:
        """Send a rejected record to the dead-letter topic (``dead_letter``)."""
        assert self.producer is not None
        key, value, headers = dead_letter(rec, reason, code)
        fut: Awaitable[Any] = await self.producer.send(self.t_dlq, value, key=key, headers=headers)
        return fut


def dead_letter(rec: Any, reason: str, code: str) -> tuple[bytes | None, bytes, list[tuple[str, bytes]]]:
    """The dead letter of a rejected record (key, value, headers), logged: at most ``DLQ_MAX_VALUE_BYTES``
    of its value, the reason, code and origin (topic, partition, offset) in headers."""
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
    return key, value, headers
