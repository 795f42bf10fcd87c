"""Publish a history of events into a society's actions topic, in event-time order, with watermarks.

The replayed events go through the same stream processors and sink as a live society. The publisher is
the only producer, so its watermarks are exact: after every ``MARK_EVERY`` events (and whenever event
time enters a new metric window) it promises every partition that nothing earlier than the current event
time will follow. The first mark carries the society's origin (where the first metric window starts), the
last is final and closes every window up to the archive's last one, empty windows included, so a replay
closes exactly the windows the original run closed.

Each event is re-addressed to the target society; its id, time and body are unchanged.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import orjson
from aiokafka import AIOKafkaProducer
from aiokafka.partitioner import murmur2

from molt_society.schemas import control
from molt_society.schemas.events import Event, partition_key_of
from molt_society.schemas.topics import HEADER_KIND, KIND_WATERMARK, Role, topic_name
from molt_society.schemas.wire import event_to_dict
from molt_society.streams.batch_out import BatchOut

MARK_EVERY = 2_000
PRODUCER = "replay"


@dataclass
class PublishStats:
    events: int = 0
    marks: int = 0
    first_us: int | None = None
    last_us: int | None = None
    seconds: float = 0.0


def _wire(ev: Event | dict[str, Any]) -> tuple[dict[str, Any], int]:
    """The wire dict of an event and its time in microseconds."""
    if isinstance(ev, dict):
        return ev, control.to_us(datetime.fromisoformat(ev["occurred_at"]))
    return event_to_dict(ev), control.to_us(ev.occurred_at)


async def publish(
    events: Iterable[Event | dict[str, Any]],
    *,
    bootstrap: str,
    society: str,
    partitions: int,
    window_seconds: float,
    origin_us: int | None = None,
    last_window_us: int | None = None,
    speed: float | None = None,
    on_progress: Callable[[PublishStats], None] = lambda s: None,
    handoff: tuple[list[str], int, int] | None = None,
) -> PublishStats:
    """Publish ``events`` (sorted by event time) and the watermarks; ``speed`` None = as fast as possible.

    ``handoff = (producers, watermark_us, tick)`` ends with a handoff mark instead of a final one: the
    history is a prefix that live producers (agent shards) continue from ``tick + 1``. History marks then
    carry tick -1, so no feed before the handoff's looks complete to the agents.
    """
    window_us = int(window_seconds * 1_000_000)
    topic = topic_name(society, Role.ACTIONS)
    producer = AIOKafkaProducer(
        bootstrap_servers=bootstrap,
        acks="all",
        linger_ms=10,
        max_batch_size=1 << 20,
        max_request_size=8 << 20,
    )
    await producer.start()
    stats = PublishStats()
    began = time.monotonic()
    pending: list[Awaitable[Any]] = []
    # records go straight into per-partition batches, partitioned like the default partitioner (murmur2),
    # so a fork's copied threads land where the live agents' later actions on them will
    outs = [BatchOut(producer, topic, q) for q in range(partitions)]
    origin = origin_us
    tick = 0

    async def mark(wm: int, *, final: bool = False) -> None:
        nonlocal tick
        assert origin is not None
        raw = control.dumps(
            control.watermark(PRODUCER, [PRODUCER], wm, -1 if handoff else tick, origin, final=final)
        )
        tick += 1
        stats.marks += 1
        for out in outs:
            await out.append(None, raw, [(HEADER_KIND, KIND_WATERMARK)])

    async def flush() -> None:
        for out in outs:
            await out.flush()
            pending.extend(out.futures)
            out.futures.clear()
        await asyncio.gather(*pending)
        pending.clear()

    try:
        since_mark = 0
        current_window: int | None = None
        for ev in events:
            d, us = _wire(ev)
            if stats.last_us is not None and us < stats.last_us:
                raise ValueError(f"events are not in event-time order at {d['event_id']}")
            if stats.first_us is None:
                stats.first_us = us
                if origin is None:
                    origin = us - us % window_us
                await mark(us)
            if speed is not None:
                ahead = (us - stats.first_us) / 1e6 / speed - (time.monotonic() - began)
                if ahead > 0:
                    await mark(us)
                    await flush()
                    await asyncio.sleep(ahead)
            window = us - us % window_us
            if current_window is not None and (window != current_window or since_mark >= MARK_EVERY):
                await mark(us)
                since_mark = 0
            current_window = window
            d["society"] = society
            key = partition_key_of(d).encode()
            await outs[(murmur2(key) & 0x7FFFFFFF) % partitions].append(key, orjson.dumps(d), [])
            stats.events += 1
            stats.last_us = us
            since_mark += 1
            if stats.events % 20_000 == 0:
                await flush()
                stats.seconds = time.monotonic() - began
                on_progress(stats)
        if handoff is not None:
            successors, wm, last_tick = handoff
            if origin is None:
                origin = wm - wm % window_us
            raw = control.dumps(control.watermark(PRODUCER, successors, wm, last_tick, origin, handoff=True))
            for out in outs:
                await out.append(None, raw, [(HEADER_KIND, KIND_WATERMARK)])
            await flush()
            stats.seconds = time.monotonic() - began
            return stats
        if origin is None:  # nothing to replay
            return stats
        end = (last_window_us + 1) if last_window_us is not None else (stats.last_us or origin) + 1
        await mark(max(end, (stats.last_us or origin) + 1), final=True)
        await flush()
        stats.seconds = time.monotonic() - began
        on_progress(stats)
        return stats
    finally:
        await producer.stop()
