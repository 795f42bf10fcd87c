"""The Faust application of a stream worker.

One Faust worker process hosts, for one society:

- the ``ActionProcessor`` service (validation, events, dead letters, feeds, window partials; see
  ``streams.processor`` for why it is a batch loop and not a per-event agent), ``ProcessorService``: the
  worker starts it before the app, so that it does not wait for the app's group and tables;
- the ``aggregate`` agent: a Faust agent over the partials topic that waits until every partition has
  closed a window, computes the window's metrics (``streams.aggregate``) and publishes them on the metrics
  topic. Its state lives in Faust tables (changelog-backed), so a restarted or rebalanced worker resumes
  where the last one stopped. Updates are idempotent: a partial for a window already computed is ignored,
  and a repeated partial replaces an identical one. Windows are computed in order, and partials Faust
  never handed to the agent are read back from the partials topic (``streams.window_order``). The agent
  takes the next partial only once the table updates of the last one are acknowledged (``AckedTable``):
  Faust alone can commit a partial's offset
  before its update reaches the changelog, and a worker killed then lost that partial for good (the
  window never completed and the run never drained; CI, stop 35);
- the aggregate watch: a partial the agent has been on for ``AGGREGATE_STALL_S`` (waiting on the broker, a
  changelog acknowledgement or its metrics computation; counted from the broker's last unanswered check,
  if any), or as long idle while the partials topic holds
  partials it has not taken (Faust clears its stream buffer when a rebalance resumes the flow, and its
  fetcher does not always go back to the committed offset: ``make test`` saw every partial fetched and
  windows 4-12 never computed after a restart; and its table recovery after a restart once waited for
  ever on changelogs read to their end, the agent never starting), is a stall: the worker logs
  ``aggregate.stalled`` with where the agent waits and stops (SIGTERM to itself, so that its consumers
  leave their groups; ``os._exit(STALL_EXIT)`` if that stop hangs) so that the stack restarts it.
  Nothing is lost by that (the partial's offset is not committed; the restarted worker recovers its
  tables and takes the partial again), where waiting would have kept the run from ever draining.

Run several workers for the same society and they share the partitions through their consumer groups.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import os
import signal
import sys
import threading
import time
from typing import Any, cast

import faust
import mode
from aiokafka import TopicPartition
from faust.types import TP, FutureMessage

from molt_society.runtime import kafka
from molt_society.runtime.lag import LagReader
from molt_society.runtime.logs import get_logger
from molt_society.runtime.record_auth import RecordKeys
from molt_society.runtime.settings import Settings
from molt_society.runtime.stack_dump import await_chain
from molt_society.schemas import control
from molt_society.schemas.topics import Role, topic_name
from molt_society.streams import snapshots
from molt_society.streams.aggregate import InfluenceMemory, window_metrics
from molt_society.streams.processor import ActionProcessor
from molt_society.streams.window_order import ReadBack, earliest_window, next_window

log = get_logger(__name__)

AGGREGATE_STALL_S = 60.0
READ_BACK_CHUNK = 500  # partials read back from the topic per request, newest first
STALL_EXIT = 75  # EX_TEMPFAIL: the stack restarts the worker
END_OFFSET_TIMEOUT_S = 10.0
STOP_GRACE_S = 20.0
STALL_STOP = threading.Event()  # set once the aggregate watch stopped this worker as stalled


class AckedTable(faust.Table[str, bytes]):
    """A Faust table whose changelog writes can be awaited (``settled``).

    Faust's commit flushes its producer's buffer before committing input offsets, but that flush gives up
    after waiting 0.1 s for any one record (``faust.transport.producer.Buffer.flush_atmost``): on a loaded
    machine it committed the offset of a partial whose table update was still in the buffer, and a worker
    killed then came back without the update. An agent that awaits ``settled()`` before taking its next
    record cannot have that record's offset committed ahead of its changelog records."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._unacked: list[FutureMessage] = []

    def send_changelog(self, *args: Any, **kwargs: Any) -> FutureMessage:
        fut: FutureMessage = super().send_changelog(*args, **kwargs)
        self._unacked.append(fut)
        return fut

    async def settled(self) -> None:
        """Return once every changelog record written so far is acknowledged by the broker."""
        unacked, self._unacked = self._unacked, []
        if unacked:
            await asyncio.gather(*unacked)


def acked_table(app: faust.App, name: str) -> AckedTable:
    table = AckedTable(
        app, name=name, default=None, beacon=app.tables.beacon, partitions=1, value_type=bytes, key_type=str
    )
    app.tables.add(table)
    return table


def create_app(settings: Settings, bootstrap: str, society: str, *, data_dir: str) -> faust.App:
    """The Faust app of one society's stream worker."""
    app = faust.App(
        kafka.group_id(society, "aggregate"),  # the app id: also its consumer group
        broker=f"kafka://{bootstrap}",
        value_serializer="raw",
        key_serializer="raw",
        processing_guarantee="at_least_once",
        web_enabled=False,
        topic_partitions=1,
        topic_replication_factor=settings.replication,
        consumer_auto_offset_reset="earliest",
        store="memory://",
        datadir=data_dir,
        producer_max_request_size=16 << 20,
        broker_commit_every=100,
        broker_commit_interval=0.5,
        stream_wait_empty=False,
        consumer_metadata_max_age_ms=kafka.METADATA_MAX_AGE_MS,
        producer_metadata_max_age_ms=kafka.METADATA_MAX_AGE_MS,
    )
    partials_topic = app.topic(
        topic_name(society, Role.PARTIALS), value_serializer="raw", key_serializer="raw"
    )
    aggregator = Aggregator(app, settings, society, bootstrap)

    @app.agent(partials_topic, concurrency=1)
    async def aggregate(stream: faust.StreamT[bytes]) -> None:
        async for event in stream.events():
            forged = aggregator.keys.problem(event.message)
            if forged is not None:  # a partial from outside would count in the window's metrics
                log.warning("aggregate.forged_partial", offset=event.message.offset, reason=forged)
                continue
            aggregator.busy_since = time.monotonic()
            aggregator.taken = event.message.offset
            try:
                await aggregator.take(event.value)
            finally:
                aggregator.busy_since = None

    @app.timer(interval=5.0)  # type: ignore[untyped-decorator]
    async def watch_aggregate() -> None:
        await aggregator.check_stall()

    return app


class Aggregator:
    """The ``aggregate`` agent's state and work: partials wait in the ``pending`` table until every
    partition has closed their window, then the window's metrics go to the metrics topic and the
    influence memory (top-k, superstars, last window) to the ``influence`` table."""

    def __init__(self, app: faust.App, settings: Settings, society: str, bootstrap: str) -> None:
        self.app, self.settings, self.society, self.bootstrap = app, settings, society, bootstrap
        self.keys = RecordKeys(settings.state_dir)
        self.ends: LagReader | None = None  # reads the partials topic's end offset
        self.metrics_topic = app.topic(
            topic_name(society, Role.METRICS), value_serializer="raw", key_serializer="raw"
        )
        # key "<window_start_us>:<partition>" -> partial JSON; deleted once the window is computed
        self.pending = acked_table(app, "pending")
        # key "memory" -> {"top_k": [...], "supers": [...], "last_window_us": int}
        self.influence = acked_table(app, "influence")
        self.partials_tp = TP(topic_name(society, Role.PARTIALS), 0)
        self.busy_since: float | None = None  # when the agent took the partial it is on
        self.taken = -1  # the offset of the newest partial the agent took
        self.group = kafka.group_id(society, "aggregate")  # the app's consumer group (create_app)
        self.lag_since: float | None = None
        # when the watch last asked the broker and had no answer: a stall counts from after that (the
        # agent waits for the broker as everything does; a 30 s SIGSTOP of the broker, then the rebalance
        # it causes, stopped a healthy worker as stalled)
        self.unanswered_at: float | None = None
        self.partitions = 1  # of the actions topic, and the window length: as the partials say
        self.window_us = int(settings.window_seconds * 1_000_000)
        self.first_checked: set[int] = set()  # first windows checked for earlier partials not taken
        self.holes_read: set[int] = set()  # windows whose missing partials were read back from the topic
        self.recent: int | None = None  # the window of the partial taken last

    def load_memory(self) -> InfluenceMemory:
        raw = self.influence.get("memory")
        if raw is None:
            return InfluenceMemory()
        d: dict[str, Any] = control.loads(raw)
        return InfluenceMemory(
            top_k=frozenset(d["top_k"]) if d["top_k"] is not None else None,
            supers=frozenset(d["supers"]) if d["supers"] is not None else None,
            last_window_us=d["last_window_us"],
        )

    def save_memory(self, m: InfluenceMemory) -> None:
        self.influence["memory"] = control.dumps(
            {
                "top_k": sorted(m.top_k) if m.top_k is not None else None,
                "supers": sorted(m.supers) if m.supers is not None else None,
                "last_window_us": m.last_window_us,
            }
        )

    async def take(self, raw: bytes) -> None:
        """One partial: keep it; then compute, in order, every window whose partials are all there
        (``streams.window_order``)."""
        partial: control.WindowPartial = control.loads(raw)
        start = partial["window_start_us"]
        memory = self.load_memory()
        if memory.last_window_us is not None and start <= memory.last_window_us:
            return  # already computed (a partition re-emitted it after a rebuild)
        self.pending[f"{start}:{partial['partition']}"] = raw
        await self.pending.settled()
        self.partitions = partial["partitions"]
        self.window_us = partial["window_end_us"] - start
        self.recent = start
        while await self._next():
            pass

    async def _next(self) -> bool:
        """Compute the next window if its partials are all there, reading back from the topic what a hole
        or the first window lacks; True when there may be more to do."""
        memory = self.load_memory()
        last = memory.last_window_us
        nxt = next_window(
            last,
            self.window_us,
            self.partitions,
            lambda start, q: self.pending.get(f"{start}:{q}") is not None,
            earliest=earliest_window(self.pending.keys()) if last is None else None,
            recent=self.recent,
        )
        if nxt is None:
            return False
        first = last is None and nxt.start_us not in self.first_checked
        hole = nxt.hole and nxt.start_us not in self.holes_read  # read back once; then as they come
        if hole or (nxt.ready and first):
            self.first_checked.add(nxt.start_us)
            if hole:
                self.holes_read.add(nxt.start_us)
                log.warning(
                    "aggregate.partials_not_taken",
                    window_start_us=nxt.start_us,
                    partitions=sorted(nxt.missing),
                    complete_later=nxt.later_complete,
                    action="reading them back from the partials topic",
                )
            found = await self._read_back(ReadBack(nxt.start_us, nxt.missing, earlier=first))
            if found:
                return True
            if hole:
                log.error(
                    "aggregate.window_incomplete",
                    window_start_us=nxt.start_us,
                    partitions=sorted(nxt.missing),
                    reason="their partials are not on the partials topic; later windows wait for them",
                )
                return False
        if not nxt.ready:
            return False
        await self._compute(nxt.start_us, memory)
        return True

    async def _read_back(self, want: ReadBack) -> int:
        """Put in ``pending`` the partials ``want`` keeps, read back in chunks from the newest partial the
        agent took (signed ones only, as the agent takes them); how many were new."""
        topic = self.partials_tp.topic
        tp = TopicPartition(topic, 0)
        reader = snapshots.reader(self.bootstrap)
        await reader.start()
        added = 0
        try:
            reader.assign([tp])
            begin, end = (await snapshots.bounds(reader, [tp]))[tp]
            hi = min(end, self.taken + 1)
            while hi > begin and not want.done:
                lo = max(begin, hi - READ_BACK_CHUNK)
                async for rec in snapshots.records(reader, tp, lo, hi):
                    if self.keys.problem(rec) is not None:
                        continue
                    p: control.WindowPartial = control.loads(rec.value)
                    key = f"{p['window_start_us']}:{p['partition']}"
                    # all kept windows are after the last computed (``_next`` asks for those only)
                    if want.keep(p["window_start_us"], p["partition"]) and self.pending.get(key) is None:
                        self.pending[key] = rec.value
                        added += 1
                hi = lo
        finally:
            await reader.stop()
        await self.pending.settled()
        log.info("aggregate.read_back", window_start_us=want.start_us, added=added, from_offset=hi)
        return added

    async def _compute(self, start: int, memory: InfluenceMemory) -> None:
        """Window ``start``'s metrics to the metrics topic, then the window marked computed."""
        pending = self.pending
        keys = [f"{start}:{q}" for q in range(self.partitions)]
        partials = [control.loads(pending[k]) for k in keys]
        metrics = await asyncio.get_running_loop().run_in_executor(
            None,
            functools.partial(window_metrics, self.society, partials, memory, top_k=self.settings.top_k),
        )
        by_name: dict[str, list[control.MetricEvent]] = {}
        for m in metrics:
            by_name.setdefault(m["metric"], []).append(m)
        # the window's metrics are on the broker before the window is marked computed
        sent = [
            await self._send_metrics(name.encode(), control.dumps(values)) for name, values in by_name.items()
        ]
        await asyncio.gather(*sent)
        self.save_memory(memory)
        for k in keys:
            del pending[k]
        await self.influence.settled()
        await pending.settled()
        log.info("window.computed", window_start_us=start, metrics=len(metrics))

    async def _send_metrics(self, key: bytes, value: bytes) -> Any:
        """Send one metric's records, signed (``runtime.record_auth``): the sink stores only those."""
        topic = self.metrics_topic.get_topic_name()
        return await self.metrics_topic.send(
            key=key, value=value, headers=self.keys.headers(topic, key, value)
        )

    def owns(self, tp: TopicPartition) -> bool:
        """Whether Faust's consumer has ``tp`` assigned (True when that cannot be told: the watch then
        looks, as it did before it asked)."""
        try:
            assigned = self.app.consumer.assignment()
            return any(t.topic == tp.topic and t.partition == tp.partition for t in assigned)
        except Exception:
            return True

    async def lagging_since(self) -> float | None:
        """Since when the agent has been idle while the partials topic holds partials it has not taken, or
        None. Faust clears its stream buffer when a rebalance resumes the flow, and its fetcher does not
        always go back to the committed offset (the cleared partials are never taken); its table recovery
        after a restart can also wait for ever on changelogs it has read to the end (the agent never
        starts). The topic's end offset is asked of the broker, so both show."""
        tp = TopicPartition(self.partials_tp.topic, 0)
        if not self.owns(tp):
            # another worker of the group holds the partials: its lag is not this one's (seen: with two
            # stream workers the one without the partition stopped as stalled after 60 s, a rebalance and
            # rebuild of every partition in the middle of a replay); nor does it need a client to ask
            self.lag_since = None
            return None
        # a client of its own: Faust's consumer answers through its thread's queue, which a stuck
        # recovery holds up too
        if self.ends is None:
            self.ends = LagReader(self.bootstrap, self.society, timeout=END_OFFSET_TIMEOUT_S)
        try:
            ends = await asyncio.wait_for(self.ends.highwaters([tp.topic]), END_OFFSET_TIMEOUT_S)
            end = ends.get(tp)
            done = await asyncio.wait_for(self.ends.committed(self.group, [tp]), END_OFFSET_TIMEOUT_S)
        except Exception:  # a broker slow or away: the agent waits for it, as everything does
            self.unanswered_at = time.monotonic()
            reader, self.ends = self.ends, None
            with contextlib.suppress(Exception):
                await asyncio.wait_for(reader.close(), END_OFFSET_TIMEOUT_S)
            self.lag_since = None
            return None
        # what is not taken starts after the newest partial taken or the group's committed offset,
        # whichever is later: a restarted worker has taken nothing and has nothing to take when its group
        # committed every partial (seen: such a worker stopped as stalled 60 s after a restart, CI stop 38)
        next_up = max(self.taken + 1, done.get(tp) or 0)
        if self.busy_since is not None or end is None or end <= next_up:
            self.lag_since = None
        elif self.lag_since is None:
            self.lag_since = time.monotonic()
        return self.lag_since

    def recovery_remaining(self) -> int:
        """Changelog records Faust's table recovery has still to read (0 when it is not recovering)."""
        recovery = self._recovery()
        try:
            return int(recovery.active_remaining_total()) if recovery.in_recovery else 0
        except Exception:  # Faust's counters mid-rebalance (a partition without offsets yet): unknown
            return 0

    def _recovery(self) -> Any:
        """Faust's table recovery service (``faust.tables.recovery.Recovery``; not in ``TableManagerT``)."""
        return cast(Any, self.app.tables).recovery

    def phase(self) -> dict[str, Any]:
        """Where Faust is, for the stall report: a rebalance, a table recovery and what it has left."""
        try:
            return {
                "rebalancing": bool(self.app.rebalancing),
                "in_recovery": bool(self._recovery().in_recovery),
                "recovery_remaining": self.recovery_remaining(),
                "assigned": sorted(str(tp) for tp in self.app.consumer.assignment()),
            }
        except Exception as exc:  # a report, never a reason for the watch itself to fail
            return {"unknown": repr(exc)}

    async def check_stall(self) -> None:
        """Exit with ``STALL_EXIT`` (said first) when the agent has stalled for ``AGGREGATE_STALL_S``, counted
        from when the broker last answered the watch if it did not answer since the stall began."""
        lag = await self.lagging_since()  # asks the broker, busy or not
        since, why = self.busy_since, "on one partial"
        if since is None:
            since, why = lag, "idle with partials on the topic it has not taken"
        if since is not None and self.unanswered_at is not None:
            since = max(since, self.unanswered_at)
        if since is None or time.monotonic() - since < AGGREGATE_STALL_S:
            return
        waits = [
            f"{f.f_code.co_filename}:{f.f_lineno} {f.f_code.co_name}"
            for task in asyncio.all_tasks()
            if "aggregate" in repr(task.get_coro()) or "_execute_actor" in repr(task.get_coro())
            for f in await_chain(task.get_coro())[-6:]
        ]
        log.error(
            "aggregate.stalled",
            state=why,
            taken_offset=self.taken,
            seconds=round(time.monotonic() - since),
            faust=self.phase(),
            waits=waits,
            action="stopping to be restarted",
        )
        sys.stderr.flush()
        self.stop_worker()

    def stop_worker(self) -> None:
        """Stop this worker so that the stack restarts it: SIGTERM first, the worker's own orderly stop, in
        which its consumers leave their groups (killed, a worker stays a member until its session times
        out, and that eviction's rebalance is what lost Faust's fetched partials again in the next one);
        ``os._exit(STALL_EXIT)`` after ``STOP_GRACE_S`` if the stop itself hangs. Nothing committed is lost
        either way; the rest is replayed."""
        STALL_STOP.set()  # streams.__main__ exits with STALL_EXIT after the orderly stop too
        timer = threading.Timer(STOP_GRACE_S, os._exit, args=(STALL_EXIT,))
        timer.daemon = True
        timer.start()
        os.kill(os.getpid(), signal.SIGTERM)


class ProcessorService(mode.Service):
    """Hosts the ``ActionProcessor`` in the stream worker's lifecycle.

    Give it to the worker before the app (``faust.Worker(app, ProcessorService(...))``, see
    ``streams.__main__``): the worker then starts it first, and its consumer joins its group while the Faust
    app starts and joins its own. As an ``@app.service`` it started only once the app had joined its group
    and recovered its tables, and the broker holds a first join for half the session timeout: the two joins
    one after the other kept the first event about 6 s later (BENCHMARKS.md, start-up). A failure of the
    processor's run still crashes the worker (mode crashes the service's whole beacon path up to the root),
    which then exits non-zero."""

    def __init__(self, settings: Settings, bootstrap: str, society: str, **kwargs: Any) -> None:
        self._stop = asyncio.Event()
        self._proc = ActionProcessor(settings, bootstrap, society)
        super().__init__(**kwargs)

    async def on_start(self) -> None:
        self.add_future(self._proc.run(self._stop))

    async def on_stop(self) -> None:
        self._stop.set()
