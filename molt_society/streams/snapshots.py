"""Partition-state snapshots: what lets a society's events and marks topics be trimmed.

A stream worker rebuilds a partition it (re)gains from the newest complete snapshot of that partition's
state and the events and marks recorded after it (``streams.processor``). Without snapshots it would
replay the partition from its first event, so no record could ever be deleted and a rebuild would take
longer the older the society.

Layout: topic ``society.<name>.snapshots`` has one partition per events partition; a snapshot of events
partition ``p`` is on its partition ``p``. Its value is ``PartitionState.to_snapshot()`` compressed with
zlib and cut into records of at most ``snapshot_chunk_bytes`` (Kafka's default record limit is 1 MiB).
Every chunk carries the headers ``snapshot-id`` (random), ``snapshot-chunk`` (0-based), ``snapshot-chunks``
(how many), ``snapshot-events-offset`` and ``snapshot-marks-offset``: the state holds every record of the
events and marks partitions below these offsets, and nothing at or above them.

A snapshot is complete when its ``n`` chunks lie on ``n`` consecutive offsets, first chunk 0 and last
chunk ``n - 1`` with the same id (one writer sends its chunks in order, so nothing else can be between);
a worker that died mid-snapshot leaves an incomplete one, which is skipped.

``needed_offsets`` is the one function the trimmer (``society.trim``) calls to learn what the stream
workers still need; see its docstring.
"""

from __future__ import annotations

import time
import uuid
import zlib
from collections.abc import AsyncIterator, Awaitable
from dataclasses import dataclass
from typing import Any

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition

from molt_society.runtime import kafka
from molt_society.runtime.broker import partition_count
from molt_society.runtime.logs import get_logger
from molt_society.runtime.record_auth import RecordKeys
from molt_society.schemas.topics import (
    SNAPSHOT_CHUNK,
    SNAPSHOT_CHUNKS,
    SNAPSHOT_EVENTS_OFFSET,
    SNAPSHOT_ID,
    SNAPSHOT_MARKS_OFFSET,
    Role,
    topic_name,
)

log = get_logger(__name__)

READ_STALL_S = 120.0
"""Reading a partition that makes no progress for this long raises ``TimeoutError``."""


@dataclass(frozen=True)
class SnapshotInfo:
    """Where a complete snapshot is and what it covers; ``payload`` is the uncompressed state (or None
    when only the headers were read)."""

    partition: int
    snapshot_id: str
    first_offset: int  # offset of its first chunk in the snapshots partition
    chunks: int
    events_offset: int
    marks_offset: int
    payload: bytes | None = None


def encode(state: bytes, chunk_bytes: int) -> list[bytes]:
    """The chunks of a snapshot: ``state`` compressed (zlib, fast level), cut every ``chunk_bytes``."""
    packed = zlib.compress(state, 1)
    return [packed[i : i + chunk_bytes] for i in range(0, len(packed), chunk_bytes)] or [packed]


def decode(chunks: list[bytes]) -> bytes:
    """The state bytes of a snapshot's chunks (in order); raises ``zlib.error`` if they are damaged."""
    return zlib.decompress(b"".join(chunks))


async def send(
    producer: AIOKafkaProducer,
    society: str,
    partition: int,
    chunks: list[bytes],
    *,
    events_offset: int,
    marks_offset: int,
) -> list[Awaitable[Any]]:
    """Send one snapshot (``encode``) of events partition ``partition``, chunk by chunk in order; the
    futures of the sends (the snapshot counts once all are acknowledged)."""
    topic = topic_name(society, Role.SNAPSHOTS)
    sid = uuid.uuid4().hex.encode()
    common = [
        (SNAPSHOT_ID, sid),
        (SNAPSHOT_CHUNKS, str(len(chunks)).encode()),
        (SNAPSHOT_EVENTS_OFFSET, str(events_offset).encode()),
        (SNAPSHOT_MARKS_OFFSET, str(marks_offset).encode()),
    ]
    key = str(partition).encode()
    futures: list[Awaitable[Any]] = []
    for i, chunk in enumerate(chunks):
        headers = [*common, (SNAPSHOT_CHUNK, str(i).encode())]
        futures.append(await producer.send(topic, chunk, key=key, partition=partition, headers=headers))
    return futures


# ------------------------------------------------------------------------------------------ reading
def reader(bootstrap: str) -> AIOKafkaConsumer:
    """A consumer without a group for explicit assignment and seeks (``runtime.kafka``'s ``snapshot``
    profile: large fetches, and ``auto_offset_reset="none"``: a position trimmed away meanwhile raises
    instead of silently jumping elsewhere in the log)."""
    return kafka.consumer(bootstrap, "snapshot")


async def bounds(
    consumer: AIOKafkaConsumer, tps: list[TopicPartition]
) -> dict[TopicPartition, tuple[int, int]]:
    """(log start offset, high watermark) of assigned partitions, the latter from a real fetch answer
    (``end_offsets`` is wrong on the local broker). One request for the starts, one fetch for them all."""
    begins = await consumer.beginning_offsets(tps)
    for tp in tps:
        consumer.seek(tp, begins[tp])
    deadline = time.monotonic() + READ_STALL_S
    while True:
        highs = {tp: consumer.highwater(tp) for tp in tps}
        if all(h is not None for h in highs.values()):
            return {tp: (begins[tp], int(highs[tp] or 0)) for tp in tps}
        if time.monotonic() > deadline:
            raise TimeoutError(f"no fetch answer for {[str(tp) for tp in tps if highs[tp] is None]}")
        await consumer.getmany(*tps, timeout_ms=100, max_records=1)


async def records(
    consumer: AIOKafkaConsumer, tp: TopicPartition, start: int, end: int | None = None
) -> AsyncIterator[Any]:
    """The records of an assigned partition from offset ``start`` to ``end`` (default: the high
    watermark when the reading catches up with it), in order. Raises ``TimeoutError`` when no progress
    is made for ``READ_STALL_S``."""
    consumer.seek(tp, start)
    position = start
    progress = time.monotonic()
    while end is None or position < end:
        batch = await consumer.getmany(tp, timeout_ms=200)
        for rec in batch.get(tp, []):
            if end is not None and rec.offset >= end:
                return
            position = rec.offset + 1
            progress = time.monotonic()
            yield rec
        if end is None:
            hw = consumer.highwater(tp)
            if hw is not None and await consumer.position(tp) >= hw:
                return
        if time.monotonic() - progress > READ_STALL_S:
            raise TimeoutError(
                f"no progress reading {tp.topic} partition {tp.partition} for {READ_STALL_S:.0f} s "
                f"(at offset {position})"
            )


def _header(rec: Any, name: str) -> bytes | None:
    for k, v in rec.headers or ():
        if k == name:
            return bytes(v)
    return None


def _chunk_info(rec: Any) -> tuple[str, int, int, int, int] | None:
    """(id, chunk, chunks, events offset, marks offset) of a snapshot record, None if it is not one."""
    try:
        sid = _header(rec, SNAPSHOT_ID)
        fields = [_header(rec, h) for h in (SNAPSHOT_CHUNK, SNAPSHOT_CHUNKS)]
        offsets = [_header(rec, h) for h in (SNAPSHOT_EVENTS_OFFSET, SNAPSHOT_MARKS_OFFSET)]
        if sid is None or None in fields or None in offsets:
            return None
        i, n, eo, mo = (int(v or b"") for v in (*fields, *offsets))
    except ValueError:
        return None
    if not 0 <= i < n or eo < 0 or mo < 0:
        return None
    return sid.decode(errors="replace"), i, n, eo, mo


async def _one(consumer: AIOKafkaConsumer, tp: TopicPartition, offset: int) -> Any | None:
    async for rec in records(consumer, tp, offset, offset + 1):
        return rec
    return None


def snapshots_partition(society: str, partition: int) -> TopicPartition:
    """The snapshots partition of events partition ``partition``."""
    return TopicPartition(topic_name(society, Role.SNAPSHOTS), partition)


async def newest(
    consumer: AIOKafkaConsumer,
    tp: TopicPartition,
    span: tuple[int, int],
    *,
    payload: bool = True,
    keys: RecordKeys | None = None,
) -> SnapshotInfo | None:
    """The newest complete snapshot on snapshots partition ``tp`` (assigned to ``consumer``; ``span``: its
    ``bounds``), with its state bytes when ``payload``, or None when there is none.

    Walks back from the end of the partition: a complete snapshot ends with its last chunk, whose first
    chunk is ``chunks - 1`` offsets before it. A damaged one (chunks that do not decompress) is skipped
    with a warning, and so is one whose chunks the society's key (``keys``) did not sign.
    """
    begin, hw = span
    pos = hw
    while pos > begin:
        last = await _one(consumer, tp, pos - 1)
        if last is None:
            return None
        pos = last.offset
        info = _chunk_info(last)
        if info is None or info[1] != info[2] - 1:
            continue
        sid, _, n, eo, mo = info
        first_offset = last.offset - (n - 1)
        if first_offset < begin:
            continue
        if n == 1:
            chunks = [last]
        elif payload:
            chunks = [r async for r in records(consumer, tp, first_offset, last.offset + 1)]
        else:
            first = await _one(consumer, tp, first_offset)
            chunks = [first] if first is not None else []
        infos = [_chunk_info(r) for r in chunks]
        expected = list(range(n)) if payload or n == 1 else [0]
        if [(c[0], c[1]) if c else None for c in infos] != [(sid, i) for i in expected]:
            continue  # chunks of another writer in between, or a torn snapshot
        forged = next((p for p in (keys.problem(r) for r in [*chunks, last]) if p), None) if keys else None
        if forged is not None:
            log.warning("snapshot.forged", partition=tp.partition, offset=first_offset, reason=forged)
            continue
        state: bytes | None = None
        if payload:
            try:
                state = decode([bytes(r.value) for r in chunks])
            except zlib.error as exc:
                log.warning("snapshot.damaged", partition=tp.partition, offset=first_offset, error=str(exc))
                continue
        return SnapshotInfo(tp.partition, sid, first_offset, n, eo, mo, state)
    return None


async def needed_offsets(
    bootstrap: str, society: str, *, keys: RecordKeys | None = None
) -> dict[str, dict[int, int]]:
    """Per topic and partition, the lowest offset the stream workers still need to rebuild their state.

    Keyed by topic name: ``society.<name>.events`` and ``society.<name>.marks`` -> {partition: the offset
    the newest complete snapshot of that partition covers up to}, and ``society.<name>.snapshots`` ->
    {partition: the offset of that snapshot's first chunk}. A partition without a complete snapshot maps
    to 0 in all three (a rebuild replays it from its first record). Records below these offsets may be
    deleted as far as the stream workers are concerned; the caller must also keep whatever the sink and
    other consumers have not yet read (their committed offsets).

    Snapshots only move forward, so offsets read here stay safe to trim to while newer snapshots appear.
    Reads the last chunk and the first chunk of each newest snapshot, never a whole snapshot; with ``keys``,
    a snapshot the society's key did not sign does not count.
    """
    events = topic_name(society, Role.EVENTS)
    marks = topic_name(society, Role.MARKS)
    snaps = topic_name(society, Role.SNAPSHOTS)
    partitions = await partition_count(bootstrap, events)
    out: dict[str, dict[int, int]] = {events: {}, marks: {}, snaps: {}}
    consumer = reader(bootstrap)
    await consumer.start()
    try:
        tps = [snapshots_partition(society, p) for p in range(partitions)]
        consumer.assign(tps)
        spans = await bounds(consumer, tps)
        for p, tp in enumerate(tps):
            info = await newest(consumer, tp, spans[tp], payload=False, keys=keys)
            out[events][p] = info.events_offset if info else 0
            out[marks][p] = info.marks_offset if info else 0
            out[snaps][p] = info.first_offset if info else 0
    finally:
        await consumer.stop()
    return out
