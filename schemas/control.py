"""Control records that travel beside events: watermarks, ticks, feed snapshots, window partials, metrics.

They are plain JSON dicts (orjson) built and read through these helpers; none of them is an agent action
and none is stored as an event.

Watermark: a producer's promise that it will write no more events with ``occurred_at`` earlier than
``watermark_us`` to this partition. A partition's watermark is the minimum over the ``producers`` named in
the marks (``None`` until every producer has spoken). Event-time windows close on watermarks, never on
wall-clock time, so a replay closes them exactly where the live run did.
"""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta
from typing import Any, NotRequired, TypedDict

import orjson

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_METRIC_NS = uuid.UUID("6f1e3a52-8a0c-4c1b-9a7b-0b5c1d7e2f10")


def to_us(value: datetime) -> int:
    """Microseconds since the Unix epoch of an aware datetime."""
    delta = value.astimezone(UTC) - _EPOCH
    return (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds


def from_us(value: int) -> datetime:
    """The UTC datetime of microseconds since the epoch."""
    return _EPOCH + timedelta(microseconds=value)


class Watermark(TypedDict):
    producer: str
    producers: list[str]
    watermark_us: int
    tick: int
    origin_us: int
    final: bool
    handoff: bool


def watermark(
    producer: str,
    producers: list[str],
    watermark_us: int,
    tick: int,
    origin_us: int,
    *,
    final: bool = False,
    handoff: bool = False,
) -> Watermark:
    """A watermark control record.

    ``origin_us`` is the society's first instant (windows start there). A ``final`` mark ends the log at
    ``watermark_us``: the window that contains it closes too, although it is not over. A ``handoff`` mark
    retires its producer and hands its watermark and tick to ``producers`` (how a fork passes from the
    replayed history to the live agent shards).
    """
    return {
        "producer": producer,
        "producers": producers,
        "watermark_us": watermark_us,
        "tick": tick,
        "origin_us": origin_us,
        "final": final,
        "handoff": handoff,
    }


class Tick(TypedDict):
    tick: int
    shard: int
    sim_time_us: int
    origin_us: int  # the society's first instant: sim_start in simulated time, the run's start in real time
    final: bool
    wall_time: float


class FeedItem(TypedDict):
    post_id: str
    author: str
    submolt: str
    title: str
    created_us: int
    score: int
    comments: int
    hot: float
    recent: list[list[Any]]  # [comment_id, author, depth, occurred_us, text excerpt], oldest first
    excerpt: NotRequired[str]  # the start of the post's content


class FeedSnapshot(TypedDict):
    tick: int
    partition: int
    watermark_us: int
    submolts: dict[str, dict[str, list[FeedItem]]]


class WindowPartial(TypedDict):
    window_start_us: int
    window_end_us: int
    partition: int
    partitions: int
    counts: dict[str, int]
    active_agents: list[str]
    edges: list[list[Any]]  # [src, dst, weight]
    size_hist: dict[str, int]  # comments per thread -> threads (cumulative at window end)
    participants_hist: dict[str, int]
    depth_hist: dict[str, int]
    threads_touched: list[list[Any]]  # [post_id, comments, participants, depth]


class MetricEvent(TypedDict):
    metric_id: str
    society: str
    metric: str
    window_start_us: int
    window_end_us: int
    dim: str
    value: float
    emitted_at: float


def metric_id(society: str, metric: str, window_start_us: int, dim: str) -> str:
    """Deterministic id of a metric value: the same window of the same society always gets the same id."""
    return str(uuid.uuid5(_METRIC_NS, f"{society}|{metric}|{window_start_us}|{dim}"))


def dumps(value: Any) -> bytes:
    return orjson.dumps(value)


def loads(raw: bytes) -> Any:
    return orjson.loads(raw)
