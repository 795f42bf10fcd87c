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
from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Protocol

import orjson

from molt_society.algorithms.kafka_partition import kafka_partition
from molt_society.runtime import kafka
from molt_society.runtime.batch_out import BatchOut
from molt_society.runtime.record_auth import RecordKeys
from molt_society.schemas import control
from molt_society.schemas.events import Event, partition_key_of
from molt_society.schemas.topics import Role, topic_name
from molt_society.schemas.wire import event_to_dict

MARK_EVERY = 20_000
"""Events between two marks inside one window (a window boundary always gets one). Each mark costs every
stream worker a tick: a feed update per partition and the windows it closes; at 2,000 the replay of a
1.3M-event archive spent 15% of its stream worker on marks (issue 30)."""
PRODUCER = "replay"


class Out(Protocol):
    """Where a publication appends one partition's records: a producer batch (``BatchOut``), or the stream
    worker's state machine itself (``society.replay_direct``)."""

    futures: list[Any]

    async def append(self, key: bytes | None, value: bytes, headers: list[tuple[str, bytes]]) -> None: ...

    async def flush(self) -> None: ...


@dataclass
class PublishStats:
    events: int = 0
    marks: int = 0
    first_us: int | None = None
    last_us: int | None = None
    seconds: float = 0.0


def _wire(ev: Event | dict[str, Any]) -> tuple[dict[str, Any], int | None]:
    """The wire dict of an event and its time in microseconds; None for a record without a readable zoned
    time (an archive's record that the stream worker will dead-letter with its reason)."""
    if isinstance(ev, dict):
        try:
            t = datetime.fromisoformat(ev["occurred_at"])
            return ev, (control.to_us(t) if t.tzinfo is not None else None)
        except (KeyError, TypeError, ValueError, OverflowError):
            return ev, None
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
    keys: RecordKeys,
) -> PublishStats:
    """Publish ``events`` (sorted by event time) and the watermarks; ``speed`` None = as fast as possible.

    ``handoff = (producers, watermark_us, tick)`` ends with a handoff mark instead of a final one: the
    history is a prefix that live producers (agent shards) continue from ``tick + 1``. History marks then
    carry tick -1, so no feed before the handoff's looks complete to the agents.
    """
    producer = kafka.producer(bootstrap, "bulk", keys=keys, linger_ms=10)
    await producer.start()
    try:
        topic = topic_name(society, Role.ACTIONS)
        # records go straight into per-partition batches, partitioned like the default partitioner
        # (murmur2), so a fork's copied threads land where the live agents' later actions on them will
        outs = [BatchOut(producer, topic, q) for q in range(partitions)]
        run = Publication(outs, society, int(window_seconds * 1_000_000), origin_us, handoff)
        for ev in events:
            await run.send(ev, speed)
            if run.stats.events % 20_000 == 0:
                await run.flush()
                on_progress(run.stats)
        if handoff is not None:
            await run.hand_off(*handoff)
        elif run.origin is not None:  # else nothing to replay
            await run.close(last_window_us)
            on_progress(run.stats)
        return run.stats
    finally:
        await producer.stop()


class Publication:
    """One publication's partitions, watermarks and counters (``publish``): which partition each event goes
    to and which marks go before it. ``outs``: one ``Out`` per partition of the actions topic."""

    def __init__(
        self,
        outs: Sequence[Out],
        society: str,
        window_us: int,
        origin_us: int | None,
        handoff: tuple[list[str], int, int] | None,
    ) -> None:
        self.society = society
        self.outs = outs
        self.partitions = len(outs)
        self.window_us = window_us
        self.origin = origin_us
        self.history_ticks = handoff is not None  # marks before a handoff carry tick -1
        self.stats = PublishStats()
        self.began = time.monotonic()
        self.pending: list[Awaitable[Any]] = []
        self.tick = 0
        self.since_mark = 0
        self.current_window: int | None = None

    async def send(self, ev: Event | dict[str, Any], speed: float | None) -> None:
        """Append one event, after the marks its time calls for (and a pause, when paced)."""
        d, us = _wire(ev)
        if us is None:  # no time to order or mark by: on to its stream worker, which rejects it
            await self._append(d)
            return
        stats = self.stats
        if stats.last_us is not None and us < stats.last_us:
            raise ValueError(f"events are not in event-time order at {d['event_id']}")
        if stats.first_us is None:
            stats.first_us = us
            if self.origin is None:
                self.origin = us - us % self.window_us
            await self.mark(us)
        if speed is not None:
            ahead = (us - stats.first_us) / 1e6 / speed - (time.monotonic() - self.began)
            if ahead > 0:
                await self.mark(us)
                await self.flush()
                await asyncio.sleep(ahead)
        window = us - us % self.window_us
        if self.current_window is not None and (
            window != self.current_window or self.since_mark >= MARK_EVERY
        ):
            await self.mark(us)
            self.since_mark = 0
        self.current_window = window
        await self._append(d)
        stats.last_us = us
        self.since_mark += 1

    async def _append(self, d: dict[str, Any]) -> None:
        d["society"] = self.society
        key = partition_key_of(d).encode()
        await self.outs[kafka_partition(key, self.partitions)].append(key, orjson.dumps(d), [])
        self.stats.events += 1

    async def mark(self, wm: int, *, final: bool = False) -> None:
        """A watermark at ``wm`` on every partition."""
        assert self.origin is not None
        tick = -1 if self.history_ticks else self.tick
        await self._broadcast(control.watermark(PRODUCER, [PRODUCER], wm, tick, self.origin, final=final))
        self.tick += 1
        self.stats.marks += 1

    async def _broadcast(self, mark: control.Watermark) -> None:
        raw = control.dumps(mark)
        for out in self.outs:
            await out.append(None, raw, kafka.WATERMARK_HEADERS)

    async def flush(self) -> None:
        """Send every batch and wait until all are acknowledged."""
        for out in self.outs:
            await out.flush()
            self.pending.extend(out.futures)
            out.futures.clear()
        await asyncio.gather(*self.pending)
        self.pending.clear()
        self.stats.seconds = time.monotonic() - self.began

    async def hand_off(self, successors: list[str], wm: int, last_tick: int) -> None:
        """End with a handoff mark: ``successors`` continue from ``wm`` and ``last_tick``."""
        if self.origin is None:
            self.origin = wm - wm % self.window_us
        await self._broadcast(
            control.watermark(PRODUCER, successors, wm, last_tick, self.origin, handoff=True)
        )
        await self.flush()

    async def close(self, last_window_us: int | None) -> None:
        """End with a final mark that closes every window up to ``last_window_us`` (or the last event)."""
        assert self.origin is not None
        last = self.stats.last_us or self.origin
        end = (last_window_us + 1) if last_window_us is not None else last + 1
        await self.mark(max(end, last + 1), final=True)
        await self.flush()
