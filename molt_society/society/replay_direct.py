"""``society replay --through direct``: a history straight into ClickHouse through the stream workers' own
state machines, without the broker.

Through the stack, every event of a replay crosses the broker three times (actions, events, metrics) and
is signed and verified four times; the stream worker is the critical path at a few thousand events per
second, and the local broker keeps every record (issue 30: a 1.35M-event archive took 290-380 s on two
cores). The direct path computes the same rows with the same code, in processes spawned once the import
has sorted the history on disk (each with its own memory, not a copy of the importer's):

- **the publication** (a thread of this process, which is otherwise idle meanwhile) reads the sorted events
  off the import's spill files once and drives ``replay.publisher.Publication`` (the partitioning and
  watermarks of a published replay); each partition's records go, in batches, to the state process that
  owns it.
- **state processes** (``replay_direct_processes``, 2 by default), each owning its share of the
  partitions, run the records of each owned partition through one
  ``streams.partition_state.PartitionState`` (built by ``streams.processor.state_config``, as a stream
  worker builds them). An accepted event is the record the worker would have appended to the events topic,
  at the offset it would have had there; a rejected one is the dead letter it would have sent
  (``streams.processor.dead_letter``); a watermark's window partials go on as they would travel on the
  partials topic.
- **the insert process** opens the store, merges each window's partials of every partition with
  ``streams.aggregate.window_metrics`` into the metric records the aggregator would have sent, turns all
  records into rows with the sink's own builders (``sinks.clickhouse``) and inserts them with the sink's
  deduplication tokens (``topic:partition:first-last``), in batches of ``replay_direct_batch``. Dead
  letters wait on disk and are numbered by their origin at the end, whatever process sent them first.
- this process shows progress and watches the others: one that dies or says nothing for ``STALL_S``, or a
  publication that fails, ends the replay with a message, and the others with it (they also die with this
  process).

A state process's memory does not grow with the history: at most ``replay_direct_hot_threads`` threads
per partition stay in memory, the least recently used wait on disk (``streams.cold_threads``) until an
event of theirs comes; and of the accepted event ids, which a stream worker keeps to know a redelivery or
a conflicting reuse, it keeps only those that occur more than once in the sorted history
(``importers.spill.repeated_ties``, found from the import's sort before the processes start): no other
id can come again. Neither changes a record sent (``tests/unit/streams/test_cold_state.py``).

So the stored events, metrics and dead letters are those of a replay through a stack with as many stream
workers as there are state processes (tested against the stack on a history that fits both ways), with the
Kafka coordinates its topics would have given them; only ``emitted_at`` of a metric (the wall clock)
differs. Batches are cut by count, so their tokens do not depend on timing: a direct replay killed part
way and run again into the same society stores each row once (tested).

The insert process opens the store (chDB: claimed, ``warehouse.claim``), so a local stack must not hold it
meanwhile. No topic is written: a society replayed this way has its record in ClickHouse only (what
``society sql``, ``report``, ``dashboard`` and ``fork`` read), not a log a stack could continue.
"""

from __future__ import annotations

import asyncio
import contextlib
import multiprocessing
import os
import struct
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from multiprocessing.connection import Connection, wait
from pathlib import Path
from queue import Queue
from typing import Any

import orjson
from rich.console import Console

from molt_society.importers.spill import SortedSpill, repeated_ties
from molt_society.replay.publisher import Publication, PublishStats
from molt_society.replay.source import SortedEvents, Source
from molt_society.runtime.broker import die_with_parent
from molt_society.runtime.gc_tuning import tune_gc
from molt_society.runtime.logs import get_logger
from molt_society.runtime.settings import Settings
from molt_society.schemas import control
from molt_society.schemas.topics import Role, topic_name
from molt_society.sinks.batching import insert_rows
from molt_society.sinks.clickhouse import Target, targets
from molt_society.society.progress_lines import ReplayProgress
from molt_society.streams.aggregate import InfluenceMemory, window_metrics
from molt_society.streams.cold_threads import ColdThreads
from molt_society.streams.event_ids import EventIds
from molt_society.streams.outcomes import Accepted, Rejected
from molt_society.streams.partition_state import PartitionState
from molt_society.streams.processor import dead_letter, state_config
from molt_society.warehouse.claim import claimed_by, drop_claim, write_claim
from molt_society.warehouse.client import connect
from molt_society.warehouse.schema import ensure_schema

log = get_logger(__name__)

QUEUED = 2
"""Messages received and waiting for their insert, at most (a batch of 50,000 events is about 40 MB)."""
FEED_BATCH = 2_000
"""Records of the actions topic sent to a state process at a time (a few hundred KB)."""
STALL_S = 300.0
"""A state process says how far it is every ``replay_direct_batch`` events (seconds apart); silence this
long while it is alive is a stall: the processes are stopped and the replay fails, saying so."""


class DirectReplayError(RuntimeError):
    """A direct replay could not run or did not finish (the message says why)."""


@dataclass(slots=True)
class Record:
    """One record as a topic would have held it (``sinks.clickhouse.RecordLike``)."""

    topic: str
    partition: int
    offset: int
    key: bytes | None
    value: bytes | None
    headers: list[tuple[str, bytes]] = field(default_factory=list)


@dataclass(frozen=True)
class Job:
    """What a state process needs (picklable: it is spawned)."""

    settings: Settings
    society: str
    runs: list[Path]
    count: int
    lo: int | None
    hi: int | None
    window_us: int
    origin_us: int | None
    last_window_us: int | None
    repeated: frozenset[int] | None = None  # ids occurring more than once (``EventIds``'s ``repeated``)
    owned: tuple[int, ...] = ()  # the partitions this state process owns

    @property
    def partitions(self) -> int:
        return self.settings.partitions


# --------------------------------------------------------------------------------- the publication
Entry = tuple[int, bytes | None, bytes, list[tuple[str, bytes]]]
"""One record of the actions topic: (partition, key, value, headers)."""


class _FeedOut:
    """One partition of the actions topic as the publication sees it (``replay.publisher.Out``): its
    records join the batch of the state process that owns the partition (``_Feed``)."""

    def __init__(self, feed: _Feed, partition: int) -> None:
        self.feed, self.partition = feed, partition
        self.futures: list[Any] = []

    async def append(self, key: bytes | None, value: bytes, headers: list[tuple[str, bytes]]) -> None:
        self.feed.add(self.partition, key, value, headers)

    async def flush(self) -> None:
        return None


class _Feed:
    """The job's history through ``replay.publisher.Publication`` once (the partitioning and watermarks of
    a published replay): each state process gets its partitions' records, in order, ``FEED_BATCH`` at a
    time, through ``sends[k]`` (``owner[q]``: the state process of partition q); then ``("end",)``. Run by
    a thread of this process, which is otherwise idle while the state and insert processes work (before,
    every state process read, decoded and partitioned the whole history and kept its share)."""

    def __init__(self, job: Job, sends: list[Callable[[Any], None]], owner: list[int]) -> None:
        self.job, self.sends, self.owner = job, sends, owner
        self.batches: list[list[Entry]] = [[] for _ in sends]
        self.stats: PublishStats | None = None
        self.error: BaseException | None = None

    def add(self, partition: int, key: bytes | None, value: bytes, headers: list[tuple[str, bytes]]) -> None:
        k = self.owner[partition]
        batch = self.batches[k]
        batch.append((partition, key, value, headers))
        if len(batch) >= FEED_BATCH:
            self.sends[k](("records", batch))
            self.batches[k] = []

    async def publish(self) -> PublishStats:
        job = self.job
        outs = [_FeedOut(self, q) for q in range(job.partitions)]
        run = Publication(outs, job.society, job.window_us, job.origin_us, None)
        for doc in SortedEvents(SortedSpill.of_runs(job.runs, job.count), job.lo, job.hi, job.count):
            await run.send(doc, None)
        if run.origin is not None:
            await run.close(job.last_window_us)
        run.stats.seconds = time.monotonic() - run.began
        self.stats = run.stats  # before the ends: a state process's "done" means it is set
        for k, send in enumerate(self.sends):
            if self.batches[k]:
                send(("records", self.batches[k]))
                self.batches[k] = []
            send(("end",))
        return run.stats

    def run(self) -> None:
        """``publish`` (in a thread): its statistics in ``stats``, or what it raised in ``error``."""
        try:
            asyncio.run(self.publish())
        except BaseException as exc:
            self.error = exc


# --------------------------------------------------------------------------------- the state processes
class _StateOut:
    """One partition's records handled in place by its state machine, as the stream worker's ``_process``
    handles them: an accepted event joins the partition's pending events (sent to the insert process
    ``batch`` at a time, with the offset the first would have on the events topic), a rejected record is
    sent as its dead letter, a watermark's partials are sent as they would travel on the partials topic."""

    def __init__(self, state: PartitionState, actions: str, send: Callable[[Any], None], batch: int) -> None:
        self.state, self.actions, self.send, self.batch = state, actions, send, batch
        self.offset = 0  # the record's offset on the actions topic (events and marks interleaved)
        self.events_next = 0  # the next offset on the events topic
        self.keys: list[bytes | None] = []
        self.values: list[bytes] = []

    def take(self, key: bytes | None, value: bytes, headers: list[tuple[str, bytes]]) -> None:
        state, offset = self.state, self.offset
        self.offset = offset + 1
        now_us = time.time_ns() // 1000
        if headers:  # a watermark (the publication's only records with headers)
            applied = state.accept_watermark(value, now_us)
            if isinstance(applied, Rejected):
                self._dead_letter(offset, key, value, applied.reason, applied.code)
                return
            if applied.partials:
                self.send(("partials", [control.dumps(p) for p in applied.partials]))
            return
        outcome = state.accept_action(value, now_us, key=key)
        if isinstance(outcome, Accepted):
            self.keys.append(key)
            self.values.append(value)  # exactly its length: unpickled, not orjson's buffer
            if len(self.values) >= self.batch:
                self.send_events()
        elif isinstance(outcome, Rejected):
            self._dead_letter(offset, key, value, outcome.reason, outcome.code)

    def send_events(self) -> None:
        if self.values:
            self.send(("events", self.state.partition, self.events_next, self.keys, self.values))
            self.events_next += len(self.values)
            self.keys, self.values = [], []

    def _dead_letter(self, offset: int, key: bytes | None, value: bytes, reason: str, code: str) -> None:
        rec = Record(self.actions, self.state.partition, offset, key, value)
        self.send(("dead_letter", self.state.partition, offset, *dead_letter(rec, reason, code)))


class _States:
    """The partitions one state process owns: their state machines (``PartitionState``, built as a stream
    worker builds them), fed ``Entry`` batches; what they make goes to ``send`` (the insert process)."""

    def __init__(self, job: Job, send: Callable[[Any], None]) -> None:
        config = state_config(job.settings, job.society, EventIds(job.repeated))
        actions = topic_name(job.society, Role.ACTIONS)
        hot, batch = job.settings.replay_direct_hot_threads, job.settings.replay_direct_batch
        self.colds = [ColdThreads() for _ in job.owned]
        self.outs = {
            q: _StateOut(
                PartitionState(q, job.partitions, **config, cold=cold, hot_threads=hot), actions, send, batch
            )
            for q, cold in zip(job.owned, self.colds, strict=True)
        }
        self.events = 0  # events (not watermarks) taken

    def take(self, entries: list[Entry]) -> None:
        outs = self.outs
        for partition, key, value, headers in entries:
            outs[partition].take(key, value, headers)
            if not headers:
                self.events += 1

    def finish(self) -> None:
        for out in self.outs.values():
            out.send_events()

    def close(self) -> None:
        for cold in self.colds:
            cold.close()


def _name_process(name: str) -> None:
    """The process's name as ``ps`` and ``top`` show it (Linux; at most 15 characters)."""
    with contextlib.suppress(OSError):
        Path("/proc/self/comm").write_text(name[:15])


def state_main(parent: int, feed: Connection, records: Connection, control_: Connection, job: Job) -> None:
    """A state process: the ``Entry`` batches ``feed`` brings (``_Feed``) through its partitions' state
    machines, until ``("end",)``; its records to ``records`` (the insert process), then ``("end", events)``
    there; progress, then ``("done", events)`` (or ``("failed", message)``) to ``control_`` (this
    process's parent)."""
    die_with_parent(parent)
    _name_process("society-state")
    tune_gc()
    states = _States(job, records.send)
    try:
        told, every = 0, job.settings.replay_direct_batch
        while (msg := feed.recv())[0] == "records":
            states.take(msg[1])
            if states.events - told >= every:
                told = states.events
                control_.send(("progress", told))
        states.finish()
        records.send(("end", states.events))
        control_.send(("done", states.events))
    except BaseException as exc:
        control_.send(("failed", f"a state process: {type(exc).__name__}: {exc}"))
        raise
    finally:
        states.close()
        feed.close()
        records.close()
        control_.close()


async def _states(conn: Connection, control_: Connection, job: Job) -> PublishStats:
    """The publication and every partition of ``job.owned`` in this process (what the processes of a
    direct replay do between them): the records it makes go to ``conn``; ``control_`` is not used."""
    states = _States(job, conn.send)

    def take(msg: Any) -> None:
        if msg[0] == "records":
            states.take(msg[1])

    try:
        stats = await _Feed(job, [take], [0] * job.partitions).publish()
        states.finish()
        return stats
    finally:
        states.close()


# ------------------------------------------------------------------------------------ the insert process
class _Inserts:
    """This process's side: records -> rows (the sink's builders) -> inserts, with the sink's tokens."""

    def __init__(self, settings: Settings, society: str) -> None:
        self.settings = settings
        self.by_topic: dict[str, Target] = targets(society)
        self.client: Any = None
        self.contexts: dict[str, Any] = {}
        self.rows = 0
        self.rejected = 0

    def open(self, society: str) -> None:
        path = self.settings.chdb_path
        if path is not None:
            holder = claimed_by(path)
            if holder is not None:
                raise DirectReplayError(
                    f"the store {path} is held by a running sink (pid {holder}): stop that stack "
                    "(`society stop`) or replay through it (`--through stack`)"
                )
            write_claim(path, society)
        try:
            self.client = connect(self.settings.clickhouse_url)
            ensure_schema(self.client)
        except Exception as exc:
            if path is not None:
                drop_claim(path)
            raise DirectReplayError(f"cannot open the store {self.settings.clickhouse_url}: {exc}") from exc

    def close(self) -> None:
        if self.client is not None:
            self.client.close()
            self.client = None
        path = self.settings.chdb_path
        if path is not None:
            drop_claim(path)

    def insert_pairs(
        self, topic: str, partition: int, first: int, pairs: list[tuple[bytes | None, bytes]]
    ) -> None:
        """Records ``first``, ``first + 1``, ... of a topic partition, as (key, value) pairs."""
        self.insert_records([Record(topic, partition, first + i, k, v) for i, (k, v) in enumerate(pairs)])

    def insert_records(self, records: list[Record]) -> None:
        """One batch of one topic partition, built and inserted as the sink does (``sinks.batching``)."""
        first, last = records[0], records[-1]
        target = self.by_topic[first.topic]
        rejects: list[list[Any]] = []
        rows = target.build(records, rejects)
        token = f"{first.topic}:{first.partition}:{first.offset}-{last.offset}"
        insert_rows(self.client, target, rows, rejects, token, self.contexts)
        self.rows += len(rows)
        self.rejected += len(rejects)


class _Aggregate:
    """The aggregator's part (``streams.app.Aggregator.take``): a window's metrics once every partition
    closed it, one record per metric (key: its name), in the order the aggregator sends them. Each state
    process sends its partitions' partials in window order, so windows complete in order."""

    def __init__(self, society: str, partitions: int, top_k: int) -> None:
        self.society, self.partitions, self.top_k = society, partitions, top_k
        self.pending: dict[int, dict[int, bytes]] = {}
        self.memory = InfluenceMemory()

    def take(self, raw: bytes) -> list[tuple[bytes, bytes, int]]:
        """One partial; the metric records (key, value, metric events in it) of the window it completes,
        if it does."""
        partial: control.WindowPartial = control.loads(raw)
        start = partial["window_start_us"]
        got = self.pending.setdefault(start, {})
        got[partial["partition"]] = raw
        if len(got) < self.partitions:
            return []
        del self.pending[start]
        partials = [control.loads(got[q]) for q in range(self.partitions)]
        by_name: dict[str, list[control.MetricEvent]] = {}
        for m in window_metrics(self.society, partials, self.memory, top_k=self.top_k):
            by_name.setdefault(m["metric"], []).append(m)
        return [(name.encode(), control.dumps(values), len(values)) for name, values in by_name.items()]


_DEAD = struct.Struct(">iII")  # key length (-1: none), value length, headers length


class _DeadLetters:
    """Dead letters of every state process, held on disk (``SortedSpill``) by their origin (partition,
    offset on the actions topic) and numbered in that order at the end: the same offsets, batches and
    tokens in every run, whichever process sent first."""

    def __init__(self) -> None:
        self.spill = SortedSpill()

    def add(self, partition: int, offset: int, key: bytes | None, value: bytes, headers: list[Any]) -> None:
        head = orjson.dumps([[k, v.hex()] for k, v in headers])
        frame = _DEAD.pack(-1 if key is None else len(key), len(value), len(head))
        self.spill.add(partition, offset.to_bytes(8, "big"), frame + (key or b"") + value + head)

    def records(self) -> Iterator[tuple[bytes | None, bytes, list[tuple[str, bytes]]]]:
        for raw in self.spill:
            nk, nv, nh = _DEAD.unpack_from(raw)
            at = _DEAD.size
            key = None if nk < 0 else raw[at : at + nk]
            at += max(nk, 0)
            value = raw[at : at + nv]
            head = orjson.loads(raw[at + nv : at + nv + nh])
            yield key, value, [(k, bytes.fromhex(v)) for k, v in head]


def insert_main(
    parent: int, feeds: list[Connection], control_: Connection, settings: Settings, society: str
) -> None:
    """The insert process: opens the store, then inserts what the state processes send (``feeds``) until
    each has sent ``("end", ...)``: their events as they come, the metrics of each window once every
    partition closed it, the dead letters at the end; then ``("stored", rows, rejected)`` to ``control_``
    (or ``("failed", message)``). One thread per state process receives while the main thread inserts, so
    a state process does not wait on an insert (at most ``QUEUED`` messages wait here)."""
    die_with_parent(parent)
    _name_process("society-insert")
    tune_gc()
    inserts = _Inserts(settings, society)
    queue: Queue[Any] = Queue(maxsize=QUEUED)

    def receive(conn: Connection) -> None:
        while True:
            try:
                msg = conn.recv()
            except EOFError:
                msg = ("gone",)
            queue.put(msg)
            if msg[0] in ("end", "gone"):
                return

    metrics_topic = topic_name(society, Role.METRICS)
    aggregate = _Aggregate(society, settings.partitions, settings.top_k)
    metrics: list[tuple[bytes | None, bytes]] = []
    metrics_next = metric_rows = 0
    size = settings.replay_direct_batch
    dead = _DeadLetters()
    try:
        inserts.open(society)
        control_.send(("opened",))
        for conn in feeds:
            threading.Thread(target=receive, args=(conn,), name="receive", daemon=True).start()
        ended = 0
        while ended < len(feeds):
            msg = queue.get()
            kind = msg[0]
            if kind == "events":
                _, partition, first, keys, values = msg
                pairs = list(zip(keys, values, strict=True))
                inserts.insert_pairs(topic_name(society, Role.EVENTS), partition, first, pairs)
                control_.send(("inserted", inserts.rows))
            elif kind == "partials":
                for raw in msg[1]:
                    for key, value, n in aggregate.take(raw):
                        metrics.append((key, value))
                        metric_rows += n
                if metric_rows >= size:  # a record holds a metric's rows of a window: hundreds at size
                    inserts.insert_pairs(metrics_topic, 0, metrics_next, metrics)
                    metrics_next += len(metrics)
                    metrics, metric_rows = [], 0
            elif kind == "dead_letter":
                dead.add(*msg[1:])
            elif kind == "end":
                ended += 1
            else:
                raise DirectReplayError("a state process ended before it had sent everything")
        if metrics:
            inserts.insert_pairs(metrics_topic, 0, metrics_next, metrics)
        dlq_topic, dlq_next, letters = topic_name(society, Role.DEADLETTER), 0, list[Record]()
        for dkey, dvalue, dheaders in dead.records():
            letters.append(Record(dlq_topic, 0, dlq_next + len(letters), dkey, dvalue, dheaders))
            if len(letters) >= size:
                inserts.insert_records(letters)
                dlq_next += len(letters)
                letters = []
        if letters:
            inserts.insert_records(letters)
        control_.send(("stored", inserts.rows, inserts.rejected))
    except BaseException as exc:
        control_.send(("failed", f"the insert process: {type(exc).__name__}: {exc}"))
        raise
    finally:
        dead.spill.close()
        inserts.close()
        for conn in feeds:
            conn.close()
        control_.close()


def replay_direct(
    settings: Settings,
    source: Source,
    *,
    society: str,
    console: Console | None = None,
    source_name: str | None = None,
) -> PublishStats:
    """Replay ``source`` into ``society``'s tables without the broker (see module docstring); returns what
    went through (as ``replay.publisher.publish`` would have published it)."""
    job = _job(settings, source, society)
    settings = job.settings
    n = max(1, min(settings.replay_direct_processes, settings.partitions))
    ctx = multiprocessing.get_context("spawn")  # each its own memory, not a copy of the importer's
    inputs = [ctx.Pipe(duplex=False) for _ in range(n)]  # this process -> state process k
    feeds = [ctx.Pipe(duplex=False) for _ in range(n)]  # state process k -> the insert process
    controls = [ctx.Pipe(duplex=False) for _ in range(n + 1)]  # each process -> this one
    ends: list[Any] = [end for pair in inputs + feeds + controls for end in pair]
    owned = [tuple(range(k, settings.partitions, n)) for k in range(n)]  # state process k's partitions
    me = os.getpid()
    inserter = ctx.Process(
        target=insert_main, args=(me, [r for r, _ in feeds], controls[n][1], settings, society), name="insert"
    )
    states = [
        ctx.Process(
            target=state_main,
            args=(
                me,
                inputs[k][0],
                feeds[k][1],
                controls[k][1],
                replace(job, owned=owned[k]),
            ),
            name=f"state-{k}",
        )
        for k in range(n)
    ]
    owner = [k for q in range(settings.partitions) for k in range(n) if q in owned[k]]
    feed = _Feed(job, [w.send for _, w in inputs], owner)
    try:
        inserter.start()
        # the store first: a store held by a running stack fails here, before the events are read
        _expect_opened(controls[n][0], inserter)
        for proc in states:
            proc.start()
        for end in [*(e for pair in feeds for e in pair), *(r for r, _ in inputs), *(w for _, w in controls)]:
            end.close()  # theirs now: an end left open here would hide a process's exit
        threading.Thread(target=feed.run, name="replay-feed", daemon=True).start()
        log.info("replay.direct_started", society=society, events=job.count, pids=[inserter.pid])
        watched = {controls[k][0]: proc for k, proc in enumerate(states)} | {controls[n][0]: inserter}
        return _watch(watched, feed, job, console or Console(), source_name)
    finally:
        for proc in [inserter, *states]:
            if proc.is_alive():
                proc.terminate()
            if proc.pid is not None:
                proc.join(10)
        for end in ends:
            end.close()


def _job(settings: Settings, source: Source, society: str) -> Job:
    header = source.header
    window_seconds = header.window_seconds if header and header.window_seconds else settings.window_seconds
    events = source.events
    runs = events.spill.seal()
    return Job(
        settings=settings.model_copy(update={"window_seconds": window_seconds}),
        society=society,
        runs=runs,
        count=len(events),
        lo=events.lo,
        hi=events.hi,
        window_us=int(window_seconds * 1_000_000),
        origin_us=header.origin_us if header else None,
        last_window_us=header.last_window_us if header else None,
        repeated=repeated_ties(runs),
    )


def _expect_opened(conn: Connection, proc: Any) -> None:
    while not conn.poll(1.0):
        if not proc.is_alive():
            raise DirectReplayError(
                f"the insert process ended (exit code {proc.exitcode}) before opening the store"
            )
    msg = conn.recv()
    if msg[0] != "opened":
        raise DirectReplayError(str(msg[1]))


def _check_alive(conns: dict[Connection, Any], heard: float) -> None:
    """Raise when a watched process has died, or when none said anything for ``STALL_S``."""
    for proc in conns.values():
        if not proc.is_alive():
            raise DirectReplayError(
                f"the {proc.name} process ended (exit code {proc.exitcode}) before it had finished. Run "
                "the same command again: what is stored is stored once."
            )
    if time.monotonic() - heard > STALL_S:
        log.error("replay.direct_stalled", silent_s=round(time.monotonic() - heard))
        raise DirectReplayError(
            f"the direct replay made no progress for {STALL_S:.0f} s and was stopped. Run the same command "
            "again: what is stored is stored once."
        )


def _watch(
    conns: dict[Connection, Any],
    feed: _Feed,
    job: Job,
    console: Console,
    source_name: str | None,
) -> PublishStats:
    """Progress and the end of every process (``conns``: the control end of each) and of the publication
    (``feed``, a thread of this process); a process that dies or goes silent, or a publication that fails,
    ends the replay."""
    states = len(conns) - 1
    label = "[bold]replay[/bold] (direct)"
    shown = ReplayProgress(console, job.settings.state_dir, job.society, job.count, source_name, label)
    began = heard = time.monotonic()
    done: dict[Connection, int] = {}  # events each state process has been through (its partitions')
    stored: tuple[int, int] | None = None
    finished = 0
    with shown:
        while finished < states or stored is None:
            ready = [end for end in wait(list(conns), timeout=1.0) if isinstance(end, Connection)]
            if not ready:
                _check_alive(conns, heard)
            if feed.error is not None:
                _check_alive(conns, heard)  # a process that died is why the publication could not send
                raise DirectReplayError(
                    f"the direct replay failed reading the history: {type(feed.error).__name__}: {feed.error}"
                )
            for conn in ready:
                try:
                    msg = conn.recv()
                except EOFError:
                    del conns[conn]
                    if not conns:
                        raise DirectReplayError("the processes of the direct replay ended early") from None
                    continue
                heard = time.monotonic()
                kind = msg[0]
                if kind in ("progress", "done"):
                    done[conn] = msg[1]
                    total = sum(done.values())
                    shown.update(total, total / max(time.monotonic() - began, 1e-6))
                    finished += kind == "done"
                elif kind == "stored":
                    stored = (msg[1], msg[2])
                elif kind == "failed":
                    raise DirectReplayError(f"the direct replay failed in {msg[1]}")
        stats = feed.stats
        assert stats is not None  # every state process ended after the publication's ("end",)
        assert stored is not None
        stats.seconds = time.monotonic() - began
        shown.finish(stats.events, stats.seconds)
    log.info(
        "replay.direct_done",
        society=job.society,
        events=stats.events,
        rows=stored[0],
        rejected=stored[1],
        seconds=round(stats.seconds, 1),
    )
    return stats
