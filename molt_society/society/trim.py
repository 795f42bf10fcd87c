"""Trim a society's topics: delete the records every reader has moved past, so the broker's memory is bounded.

Every ``trim_interval_seconds`` the ``Trimmer`` computes, per topic partition, the lowest offset a reader may
still read (``trim_point``) and asks the broker to delete the records below it (Kafka's DeleteRecords, which
moves the partition's log start offset). Who needs what:

- ``actions``: the stream workers' committed offset (group ``society.<name>.streams``);
- ``ticks``: the agent workers' committed offset (group ``society.<name>.agents``);
- ``feeds``: read without a group by the agent workers and the clock, from a full record of each partition on:
  the last ``FEED_KEEP_RECORDS`` records of each partition stay;
- ``partials``: the metric aggregator's committed offset (the Faust app id ``society.<name>.aggregate`` is its
  group); ``metrics`` and ``deadletter``: the sink's (``society.<name>.sink``), less ``SINK_KEEP_RECORDS``;
- ``events``, ``marks``, ``snapshots``: also what the stream workers need to rebuild their partition state
  (``streams.snapshots.needed_offsets``); ``events`` besides the sink's committed offset. Without that
  function these topics are never trimmed (said once).

A partition some reader has no committed offset for is never trimmed, and topics not named here (Faust's
changelogs: no compaction in the local broker's memory engine, a table is rebuilt from its whole changelog)
are left alone. Committed offsets are read with OffsetFetch, and the high watermark from a real fetch, by
``runtime.lag`` as ``society status`` does (the local broker's ``end_offsets`` is wrong). Every call is
bounded by a timeout; a failed round is logged and tried again at the next one, it never stops the run.

The local broker (Tansu 0.6.0, memory engine) implements neither DeleteRecords (the request panics in the
broker with "not yet implemented" and the connection closes; the broker itself goes on) nor retention by
time or size (``retention.ms``/``retention.bytes`` are accepted at creation and ignored). The trimmer then
says so once and stops asking: README "Broker memory" states what that means for a long run.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from aiokafka import TopicPartition
from aiokafka.admin import RecordsToDelete
from aiokafka.errors import (
    IncompatibleBrokerVersion,
    KafkaConnectionError,
    UnknownError,
    UnsupportedVersionError,
)

from molt_society.runtime import kafka, lag
from molt_society.runtime.broker import broker_silence
from molt_society.runtime.logs import get_logger
from molt_society.runtime.record_auth import RecordKeys
from molt_society.runtime.settings import Settings
from molt_society.schemas.topics import Role, topic_name
from molt_society.streams.feed_updates import FULL_EVERY

log = get_logger(__name__)

FEED_KEEP_RECORDS = 2 * FULL_EVERY
"""Records of each feeds partition that are never trimmed. A partition publishes one record per tick (plus
one after a rebuild): the changes of its feed, and every ``FULL_EVERY`` ticks (and first after a restart)
the whole feed (``streams.feed_updates``). A reader starting at the log start needs a full record there:
among the newest ``2 * FULL_EVERY`` records of a partition there is always one."""

SINK_KEEP_RECORDS = 1
"""Records kept below the sink's committed offset: a restarted sink re-reads the last record it stored to
check it is the one in ClickHouse (``sinks.resume``); that check needs the record to still exist."""

GROUP_READERS: dict[Role, tuple[kafka.GroupRole, ...]] = {
    Role.ACTIONS: ("streams",),
    Role.TICKS: ("agents",),
    Role.PARTIALS: ("aggregate",),
    Role.METRICS: ("sink",),
    Role.DEADLETTER: ("sink",),
    Role.EVENTS: ("sink",),
}
"""Consumer groups (``kafka.group_id(society, role)``) that read each trimmed topic."""

GROUP_KEEP: dict[kafka.GroupRole, int] = {"sink": SINK_KEEP_RECORDS}

KEEP_LAST: dict[Role, int] = {Role.FEEDS: FEED_KEEP_RECORDS}
"""Topics read without a group, of which only the newest records of each partition are needed."""

REBUILT: tuple[str, ...] = ("events", "marks", "snapshots")
"""Roles (by value) the stream workers read to rebuild partition state: trimmed only with
``streams.snapshots.needed_offsets``."""

NeededOffsets = Callable[[str, str], "dict[str, dict[int, int]] | Awaitable[dict[str, dict[int, int]]]"]


def trim_point(
    readers: Sequence[int | None], high_watermark: int | None, keep_last: int | None = None
) -> int | None:
    """The offset below which a partition's records can go (None: keep everything).

    ``readers``: for each reader, the lowest offset it may still read (None: unknown, e.g. a group with no
    committed offset: nothing may go). ``keep_last``: the partition is read by readers without a group that
    only need its newest ``keep_last`` records. Never above the high watermark; None when nothing would go.
    """
    if keep_last is not None:
        if high_watermark is None:
            return None
        candidates = [high_watermark - keep_last]
    else:
        if not readers:
            return None
        candidates = []
    for r in readers:
        if r is None:
            return None
        candidates.append(r)
    point = min(candidates)
    if high_watermark is not None:
        point = min(point, high_watermark)
    return point if point > 0 else None


@dataclass
class Readings:
    """What one round read from the broker."""

    highwaters: dict[TopicPartition, int]
    committed: dict[str, dict[TopicPartition, int | None]]  # group -> partition -> committed offset
    rebuild: dict[str, dict[int, int]] | None  # topic -> partition -> lowest offset a rebuild needs


def plan(society: str, readings: Readings) -> dict[TopicPartition, int]:
    """Per partition, the offset below which records can be deleted (partitions with nothing to delete are
    absent). Pure: the arithmetic of ``trim_point`` over the readers of each topic (module docstring)."""
    out: dict[TopicPartition, int] = {}
    rebuilt = {topic_name(society, Role(r)) for r in REBUILT if r in {x.value for x in Role}}
    for tp, hw in sorted(readings.highwaters.items()):
        role = _role_of(society, tp.topic)
        if role is None:
            continue
        readers: list[int | None] = []
        for reader in GROUP_READERS.get(role, ()):
            committed = readings.committed.get(kafka.group_id(society, reader), {}).get(tp)
            readers.append(None if committed is None else committed - GROUP_KEEP.get(reader, 0))
        if tp.topic in rebuilt:
            needed = (
                None if readings.rebuild is None else readings.rebuild.get(tp.topic, {}).get(tp.partition)
            )
            readers.append(needed)  # no answer for this partition: nothing goes
        keep = KEEP_LAST.get(role)
        if keep is None and not readers:
            continue  # nobody said what it needs: never trimmed
        point = trim_point(readers, hw, keep)
        if point is not None:
            out[tp] = point
    return out


def _role_of(society: str, topic: str) -> Role | None:
    prefix = f"society.{society}."
    if not topic.startswith(prefix):
        return None
    try:
        return Role(topic.removeprefix(prefix))
    except ValueError:
        return None


def trim_enabled(settings: Settings) -> bool:
    """``SOCIETY_TRIM``; by default on with the local Apache Kafka (whose topics keep every record until
    trimmed: ``log.retention.ms=-1``), off with the local Tansu 0.6.0 (which cannot delete records) and with
    ``KAFKA_BOOTSTRAP`` (a cluster has its own retention, configured by whoever runs it)."""
    if settings.trim is not None:
        return settings.trim
    return settings.broker == "kafka" and not settings.kafka_bootstrap


def load_needed_offsets(keys: RecordKeys | None = None) -> NeededOffsets | None:
    """``streams.snapshots.needed_offsets`` when it exists (None: events, marks and snapshots stay whole);
    with ``keys``, only snapshots the society's key signed say what may go."""
    try:
        from molt_society.streams import snapshots  # optional: another part of the pipeline
    except ImportError:
        return None
    fn = getattr(snapshots, "needed_offsets", None)
    if not callable(fn):
        return None
    if keys is None:
        return fn  # type: ignore[no-any-return]
    return lambda bootstrap, society: fn(bootstrap, society, keys=keys)


@dataclass
class Trimmer:
    """Deletes, every ``interval`` seconds, the records of ``society``'s topics that every reader has passed.

    ``supported`` is None until the broker answered a DeleteRecords request, then True, or False for a broker
    that does not implement it (the trimmer then stops asking). ``log_start`` holds, per partition, the log
    start offset the broker reported after the newest deletion."""

    bootstrap: str
    society: str
    interval: float = 10.0
    timeout: float = 10.0
    needed_offsets: NeededOffsets | None = None
    supported: bool | None = None
    log_start: dict[TopicPartition, int] = field(default_factory=dict)
    rounds: int = 0
    failures: int = 0
    last_plan: dict[TopicPartition, int] = field(default_factory=dict)
    _said_no_rebuild: bool = False

    @classmethod
    def for_settings(cls, settings: Settings, bootstrap: str, society: str) -> Trimmer:
        needed = load_needed_offsets(RecordKeys(settings.state_dir))
        return cls(bootstrap, society, interval=settings.trim_interval_seconds, needed_offsets=needed)

    async def run(self) -> None:
        """Trim every ``interval`` seconds until cancelled, or until the broker turns out not to trim."""
        log.info("trim.started", society=self.society, interval_s=self.interval)
        while self.supported is not False:
            await asyncio.sleep(self.interval)
            await self.round()

    async def round(self) -> dict[TopicPartition, int]:
        """One round: read, plan, delete. Returns the new log start of each partition trimmed (empty when
        nothing was, or the round failed: it is logged, and the next round tries again)."""
        self.rounds += 1
        began = time.monotonic()
        try:
            readings = await asyncio.wait_for(self.read(), self.timeout * 3)
            todo = {
                tp: point
                for tp, point in plan(self.society, readings).items()
                if point > self.log_start.get(tp, 0)
            }
            self.last_plan = todo
            if not todo or self.supported is False:
                return {}
            done = await self.delete(todo)
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # a broker that is slow, restarting or gone: next round
            self.failures += 1
            log.warning("trim.round_failed", society=self.society, error=repr(exc))
            return {}
        self.log_start.update(done)
        if not done:
            return done
        log.info(
            "trim.round",
            society=self.society,
            partitions=len(done),
            seconds=round(time.monotonic() - began, 3),
            log_start={f"{tp.topic}:{tp.partition}": v for tp, v in sorted(done.items())},
        )
        return done

    async def read(self) -> Readings:
        topics = [topic_name(self.society, r) for r in (*GROUP_READERS, *KEEP_LAST)]
        rebuild = await self._rebuild_needs()
        if rebuild is not None:
            topics += [topic_name(self.society, Role(r)) for r in REBUILT if r in {x.value for x in Role}]
        # a fresh reader each round: a round that failed leaves nothing behind (requests time out after
        # ``timeout``; the whole round after three times that)
        lags = lag.LagReader(self.bootstrap, self.society, timeout=self.timeout)
        try:
            hws = await lags.highwaters(sorted(set(topics)))
            wanted: dict[str, list[TopicPartition]] = {}
            for tp in sorted(hws):
                role = _role_of(self.society, tp.topic)
                for reader in GROUP_READERS.get(role, ()) if role is not None else ():
                    wanted.setdefault(kafka.group_id(self.society, reader), []).append(tp)
            committed = {group: await lags.committed(group, tps) for group, tps in sorted(wanted.items())}
        finally:
            await lags.close()
        return Readings(hws, committed, rebuild)

    async def _rebuild_needs(self) -> dict[str, dict[int, int]] | None:
        fn = self.needed_offsets
        if fn is None:
            if not self._said_no_rebuild:
                self._said_no_rebuild = True
                log.info(
                    "trim.rebuild_topics_kept",
                    society=self.society,
                    reason="streams.snapshots.needed_offsets is not available: events, marks and snapshots "
                    "are not trimmed",
                )
            return None
        if inspect.iscoroutinefunction(fn):
            result: Any = await asyncio.wait_for(fn(self.bootstrap, self.society), self.timeout)
        else:
            result = await asyncio.wait_for(asyncio.to_thread(fn, self.bootstrap, self.society), self.timeout)
            if inspect.isawaitable(result):
                result = await asyncio.wait_for(result, self.timeout)
        return {str(t): {int(p): int(o) for p, o in parts.items()} for t, parts in dict(result).items()}

    async def delete(self, todo: Mapping[TopicPartition, int]) -> dict[TopicPartition, int]:
        """DeleteRecords below ``todo``'s offsets; returns each partition's new log start offset.

        A broker that does not implement it (an unsupported version, or the local Tansu, which closes the
        connection while it still answers other requests) sets ``supported`` to False, said once."""
        admin = kafka.admin(self.bootstrap, self.timeout)
        await asyncio.wait_for(admin.start(), self.timeout)
        try:
            result = await asyncio.wait_for(
                admin.delete_records(
                    {tp: RecordsToDelete(before_offset=o) for tp, o in todo.items()},
                    timeout_ms=int(self.timeout * 1000),
                ),
                self.timeout * 2,
            )
        except (IncompatibleBrokerVersion, UnsupportedVersionError, UnknownError) as exc:
            self._unsupported(repr(exc))
            return {}
        except KafkaConnectionError as exc:
            if await broker_silence(self.bootstrap, timeout=min(5.0, self.timeout)) is None:
                self._unsupported(
                    f"the broker closed the connection on DeleteRecords and answers otherwise ({exc!r})"
                )
                return {}
            raise
        finally:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(admin.close(), self.timeout)
        self.supported = True
        return {tp: int(low) for tp, low in result.items()}

    def _unsupported(self, reason: str) -> None:
        self.supported = False
        log.warning(
            "trim.unsupported",
            society=self.society,
            bootstrap=self.bootstrap,
            reason=reason,
            consequence="the broker keeps every record; its memory grows with the run (README)",
        )
