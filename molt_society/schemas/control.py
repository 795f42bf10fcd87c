"""Control records that travel beside events: watermarks, ticks, feed snapshots, window partials, metrics.

They are plain JSON dicts (orjson) built and read through these helpers; none of them is an agent action
and none is stored as an event.

Watermark: a producer's promise that it will write no more events with ``occurred_at`` earlier than
``watermark_us`` to this partition. A partition's watermark is the minimum over the ``producers`` named in
the marks (``None`` until every producer has spoken). Event-time windows close on watermarks, never on
wall-clock time, so a replay closes them exactly where the live run did.

Watermarks travel on the actions topic, where anyone may write, so ``parse_watermark`` checks each one
before it counts: its shape and types, its bounds (times from the epoch to no further ahead of the wall
clock than events may be), and its producers, which must be ones the society registered
(``registered_producers``: the agent shards and the replay/fork publisher). A mark that fails is
dead-lettered; an unknown producer would otherwise join the partition's producers and, never speaking
again, hold the partition's watermark (and the simulated society's clock) back forever.
"""

from __future__ import annotations

import hashlib
import uuid
from collections.abc import Iterable
from datetime import UTC, datetime, timedelta
from typing import Any, NotRequired, TypedDict

import orjson

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_METRIC_NS = uuid.UUID("6f1e3a52-8a0c-4c1b-9a7b-0b5c1d7e2f10")
_METRIC_NS_BYTES = _METRIC_NS.bytes


def to_us(value: datetime) -> int:
    """Microseconds since the Unix epoch of an aware datetime."""
    delta = value.astimezone(UTC) - _EPOCH
    return (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds


def from_us(value: int) -> datetime:
    """The UTC datetime of microseconds since the epoch."""
    return _EPOCH + timedelta(microseconds=value)


REPLAY_PRODUCER = "replay"
"""The producer name of the replay/fork publisher (``replay.publisher.PRODUCER``)."""
MAX_WATERMARK_BYTES = 64 * 1024
"""A watermark naming 1,024 shards is about 13 KiB; anything larger is not one."""
MAX_TICK = 2**53 - 1


def shard_producer(shard: int) -> str:
    """The producer name of agent shard ``shard`` (``agents.worker.shard_producer``)."""
    return f"shard-{shard}"


def registered_producers(shards: int) -> frozenset[str]:
    """Who may write a society's watermarks: its ``shards`` agent shards and the replay/fork publisher."""
    return frozenset(shard_producer(s) for s in range(shards)) | {REPLAY_PRODUCER}


def describe_producers(names: Iterable[str]) -> str:
    """``shard-0 to shard-7 and replay``: a short description of a set of producer names."""
    shards = sorted(int(n[6:]) for n in names if n[6:].isdecimal() and n == shard_producer(int(n[6:])))
    others = sorted(n for n in names if not (n[6:].isdecimal() and n == shard_producer(int(n[6:]))))
    if len(shards) > 2 and shards == list(range(shards[0], shards[-1] + 1)):
        parts = [f"{shard_producer(shards[0])} to {shard_producer(shards[-1])}", *others]
    else:
        parts = [shard_producer(k) for k in shards] + others
    if not parts:
        return "none"
    return parts[0] if len(parts) == 1 else f"{', '.join(parts[:-1])} and {parts[-1]}"


class InvalidControl(Exception):
    """A control record that cannot be used; ``reason`` says why, for a person."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


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


_WATERMARK_INTS = ("watermark_us", "tick", "origin_us")
_WATERMARK_BOOLS = ("final", "handoff")
_WATERMARK_FIELDS = frozenset({"producer", "producers", *_WATERMARK_INTS, *_WATERMARK_BOOLS})


def parse_watermark(
    raw: bytes | None, *, registered: frozenset[str] | None, now_us: int, max_future_us: int
) -> Watermark:
    """The watermark in ``raw``, checked; raises ``InvalidControl`` with a readable reason.

    ``registered``: the producers the society registered (None: any name). ``watermark_us`` and
    ``origin_us`` must lie between the epoch and ``now_us + max_future_us`` (how far ahead of the wall
    clock an event may be), ``tick`` between -1 (history before a handoff) and 2**53 - 1.
    """
    if raw is None:
        raise InvalidControl("watermark record has no value")
    if len(raw) > MAX_WATERMARK_BYTES:
        raise InvalidControl(f"watermark is {len(raw)} bytes, over the {MAX_WATERMARK_BYTES}-byte limit")
    try:
        doc = orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        raise InvalidControl(f"watermark is not valid JSON: {exc}") from None
    if not isinstance(doc, dict):
        raise InvalidControl(f"a watermark is a JSON object, got {type(doc).__name__}")
    _check_fields(doc)
    mark: Watermark = {
        "producer": doc["producer"],
        "producers": doc["producers"],
        "watermark_us": doc["watermark_us"],
        "tick": doc["tick"],
        "origin_us": doc["origin_us"],
        "final": doc.get("final", False),
        "handoff": doc.get("handoff", False),
    }
    _check_bounds(mark, now_us + max_future_us)
    if registered is not None:
        _check_producers(mark, registered)
    return mark


def _quote(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 60 else f"{text[:60]}..."


def _check_fields(doc: dict[str, Any]) -> None:
    unknown = sorted(k for k in doc if k not in _WATERMARK_FIELDS)
    if unknown:
        raise InvalidControl(f"watermark has unknown field {_quote(unknown[0])}")
    for name in ("producer", "producers", *_WATERMARK_INTS):
        if name not in doc:
            raise InvalidControl(f"watermark has no '{name}' field")
    if not isinstance(doc["producer"], str):
        raise InvalidControl(f"watermark field 'producer' must be a string, not {_quote(doc['producer'])}")
    producers = doc["producers"]
    if not isinstance(producers, list) or not producers or not all(isinstance(p, str) for p in producers):
        raise InvalidControl(
            f"watermark field 'producers' must be a non-empty list of names, not {_quote(producers)}"
        )
    for name in _WATERMARK_INTS:
        value = doc[name]
        if isinstance(value, bool) or not isinstance(value, int):
            raise InvalidControl(f"watermark field '{name}' must be an integer, not {_quote(value)}")
    for name in _WATERMARK_BOOLS:
        if not isinstance(doc.get(name, False), bool):
            raise InvalidControl(f"watermark field '{name}' must be true or false, not {_quote(doc[name])}")


def _check_bounds(mark: Watermark, latest_us: int) -> None:
    for name, value in (("watermark_us", mark["watermark_us"]), ("origin_us", mark["origin_us"])):
        if value < 0:
            raise InvalidControl(f"watermark field '{name}' is {value}, before the Unix epoch")
        if value > latest_us:
            ahead = (value - latest_us) / 1e6
            raise InvalidControl(
                f"watermark field '{name}' is {ahead:,.0f} s beyond the latest event time allowed now "
                "(the wall clock plus the future skew limit)"
            )
    if not -1 <= mark["tick"] <= MAX_TICK:
        raise InvalidControl(f"watermark tick {mark['tick']} is outside -1..{MAX_TICK}")


def _check_producers(mark: Watermark, registered: frozenset[str]) -> None:
    named = [mark["producer"], *mark["producers"]]
    unknown = sorted({p for p in named if p not in registered})
    if unknown:
        shown = ", ".join(_quote(p) for p in unknown[:3]) + (
            f" and {len(unknown) - 3} more" if len(unknown) > 3 else ""
        )
        raise InvalidControl(
            f"watermark names producer{'s' if len(unknown) > 1 else ''} {shown} that this society did not "
            f"register (its producers are {describe_producers(registered)})"
        )


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
    joined_agents: NotRequired[int]  # agents registered by agents_joined cohorts in the window
    removed: NotRequired[dict[str, int]]  # "post"/"comment" -> content_removed that removed it first
    banned: NotRequired[int]  # agent_banned events in the window
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
    """Deterministic id of a metric value: the same window of the same society always gets the same id:
    ``str(uuid.uuid5(_METRIC_NS, "society|metric|window_start_us|dim"))``, computed as RFC 4122 section 4.3
    says (SHA-1 of the namespace and the name, version 5, the RFC's variant) without ``uuid.UUID``'s
    validation, in a third of the time (a replay makes one per metric row: 1.3M at 1.35M events)."""
    digest = bytearray(
        hashlib.sha1(
            _METRIC_NS_BYTES + f"{society}|{metric}|{window_start_us}|{dim}".encode(), usedforsecurity=False
        ).digest()
    )
    digest[6] = (digest[6] & 0x0F) | 0x50
    digest[8] = (digest[8] & 0x3F) | 0x80
    h = digest[:16].hex()
    return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"


def dumps(value: Any) -> bytes:
    return orjson.dumps(value)


def loads(raw: bytes) -> Any:
    return orjson.loads(raw)
