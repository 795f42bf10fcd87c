"""Realistic, valid, thread-shaped benchmark data, written to record files the producer child streams.

The base society comes from ``agents.offline.simulate`` (the calibrated MoltBook-shaped behaviour model,
in process): a genesis tick (registrations, submolts, subscriptions) then posts, comments and votes whose
parents always exist. To reach N events fast, the post-genesis part is tiled: copy ``k`` is the same
activity ``k`` spans later, with every post/comment/event id remapped (a bijection on the last 48 bits of
the UUID, so references inside a copy stay valid and copies never collide). Agents are the same in every
copy, as in a society that goes on. Event times are placed in the past, ending about an hour ago, so
nothing is "in the future" for the stream processor.

Watermarks are interleaved as a single producer (``bench``) would send them: every ``1000 x partitions``
events one mark to every partition, at the start of the current tick (events of a tick are not ordered
by time, so that is the newest time no later event can precede), and a ``final`` mark at the end.

A record file is a sequence of ``<BhHI`` headers (kind, partition or -1, key length, value length) each
followed by the key and the value. ``read_records`` streams it back in chunks.
"""

from __future__ import annotations

import math
import struct
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, BinaryIO

import orjson

from molt_society.agents.behaviour import load_behaviour
from molt_society.agents.offline import simulate
from molt_society.schemas import control
from molt_society.schemas.events import partition_key
from molt_society.schemas.wire import encode_event

KIND_EVENT = 0
KIND_MARK = 1
HEADER = struct.Struct("<BhHI")
TICK_US = 60 * 1_000_000
SIM_START = datetime(2026, 1, 28, tzinfo=UTC)
PRODUCER = control.REPLAY_PRODUCER  # a producer every society registers (schemas.control)
GENESIS_TYPES = frozenset({"agent_registered", "agents_joined", "submolt_created", "agent_subscribed"})
_EPOCH = datetime(1970, 1, 1)
_MASK48 = (1 << 48) - 1
_GOLDEN = 0x9E3779B97F4A7C15


def copy_mask(k: int) -> int:
    """The 48-bit XOR mask of copy ``k`` (0 for the original)."""
    return (k * _GOLDEN) & _MASK48


def remap_id(value: str, mask: int) -> str:
    """A UUID string with its last 48 bits XOR ``mask``; other strings unchanged."""
    if not mask or len(value) != 36 or value[23] != "-":
        return value
    return f"{value[:24]}{int(value[24:], 16) ^ mask:012x}"


def iso_us(us: int) -> str:
    """The wire form of an event time given in Unix microseconds."""
    return (_EPOCH + timedelta(microseconds=us)).isoformat(timespec="microseconds") + "Z"


def key_of(doc: dict[str, Any]) -> bytes:
    """``schemas.events.partition_key`` of an event in wire (dict) form."""
    etype = doc["type"]
    body = doc["body"]
    if etype in ("post_created", "comment_created", "vote_cast"):
        return str(body["post_id"]).encode()
    if etype == "submolt_created":
        return f"submolt:{body['submolt']}".encode()
    return f"agent:{doc['actor']}".encode()


_BODY_IDS = ("post_id", "comment_id", "parent_id", "target_id")


def remapped(doc: dict[str, Any], mask: int, occurred_at: str, society: str) -> dict[str, Any]:
    """A copy of event ``doc`` with ids remapped by ``mask``, a new event time and society."""
    out = dict(doc)
    out["society"] = society
    out["occurred_at"] = occurred_at
    if mask:
        body = dict(doc["body"])
        out["body"] = body
        out["event_id"] = remap_id(doc["event_id"], mask)
        cause = doc.get("causation_id")
        if cause:
            out["causation_id"] = remap_id(cause, mask)
        for name in _BODY_IDS:
            value = body.get(name)
            if value:
                body[name] = remap_id(value, mask)
    return out


@dataclass(frozen=True, slots=True)
class BaseEvent:
    doc: dict[str, Any]
    occurred_us: int  # in the simulation's own time (from SIM_START)


@dataclass
class Dataset:
    """What was generated: counts, time range and the templates the latency run reuses."""

    events: int
    marks: int
    agents: int
    base_ticks: int
    copies: int
    origin_us: int
    end_us: int
    mean_bytes: float
    types: Counter[str]
    files: dict[str, Path]
    steady: list[BaseEvent] = field(repr=False)
    seconds: float = 0.0


def _write(out: BinaryIO, kind: int, partition: int, key: bytes, value: bytes) -> None:
    out.write(HEADER.pack(kind, partition, len(key), len(value)))
    out.write(key)
    out.write(value)


def build(
    n: int, *, partitions: int, societies: dict[str, Path], seed: int = 7, mark_every: int | None = None
) -> Dataset:
    """Generate ``n`` events (plus watermarks) once per society into ``societies[name]`` files."""
    began = time.perf_counter()
    agents = max(1000, min(10_000, n // 100))
    base_target = max(5_000, min(n // 4, 50_000))
    base_ticks = 1 + math.ceil(base_target / (agents * 0.0105))
    sim = simulate(
        seed=seed,
        agents=agents,
        ticks=base_ticks,
        behaviour=load_behaviour(),
        start=SIM_START,
        society="bench",
        partitions=partitions,
    )
    sim_start_us = control.to_us(SIM_START)
    genesis: list[BaseEvent] = []
    steady: list[BaseEvent] = []
    for ev in sim.events:
        doc = orjson.loads(encode_event(ev))
        assert key_of(doc) == partition_key(ev).encode()
        item = BaseEvent(doc, control.to_us(ev.occurred_at) - sim_start_us)
        (genesis if doc["type"] in GENESIS_TYPES else steady).append(item)
    if not steady:
        raise RuntimeError("the simulation produced no posts, comments or votes")
    genesis = genesis[:n]
    copies = max(1, math.ceil((n - len(genesis)) / len(steady)))
    span_us = base_ticks * TICK_US
    hour = 3_600 * 1_000_000
    now_us = int(time.time() * 1_000_000)
    origin_us = (now_us - copies * span_us - 2 * hour) // hour * hour
    end_us = origin_us + copies * span_us
    mark_every = mark_every or 1_000 * partitions

    handles = {name: path.open("wb", buffering=8 << 20) for name, path in societies.items()}
    types: Counter[str] = Counter()
    written = marks = size = 0

    def mark(wm_us: int, *, final: bool = False) -> None:
        nonlocal marks
        tick = (wm_us - origin_us) // TICK_US
        raw = control.dumps(control.watermark(PRODUCER, [PRODUCER], wm_us, tick, origin_us, final=final))
        for out in handles.values():
            for q in range(partitions):
                _write(out, KIND_MARK, q, b"", raw)
        marks += partitions

    def emit(doc: dict[str, Any], mask: int, occurred_us: int) -> None:
        nonlocal written, size
        at = iso_us(occurred_us)
        key = b""
        for name, out in handles.items():
            new = remapped(doc, mask, at, name)
            raw = orjson.dumps(new)
            if not key:
                key = key_of(new)
                size += len(raw)
            _write(out, KIND_EVENT, -1, key, raw)
        types[doc["type"]] += 1
        written += 1
        if written % mark_every == 0:
            mark(origin_us + (occurred_us - origin_us) // TICK_US * TICK_US)

    try:
        for item in genesis:
            emit(item.doc, 0, origin_us + item.occurred_us)
        for k in range(copies):
            mask = copy_mask(k)
            shift = origin_us + k * span_us
            for item in steady:
                if written >= n:
                    break
                emit(item.doc, mask, shift + item.occurred_us)
        mark(end_us, final=True)
    finally:
        for out in handles.values():
            out.close()
    return Dataset(
        events=written,
        marks=marks,
        agents=agents,
        base_ticks=base_ticks,
        copies=copies,
        origin_us=origin_us,
        end_us=end_us,
        mean_bytes=size / max(1, written),
        types=types,
        files=dict(societies),
        steady=steady,
        seconds=time.perf_counter() - began,
    )


def read_records(path: Path, chunk: int = 4 << 20) -> Iterator[tuple[int, int, bytes, bytes]]:
    """Stream ``(kind, partition, key, value)`` from a record file, ``chunk`` bytes at a time."""
    hsize = HEADER.size
    unpack = HEADER.unpack_from
    buf = b""
    pos = 0
    with path.open("rb") as f:
        while True:
            data = f.read(chunk)
            if not data:
                break
            buf = buf[pos:] + data
            pos = 0
            end = len(buf)
            while pos + hsize <= end:
                kind, partition, klen, vlen = unpack(buf, pos)
                stop = pos + hsize + klen + vlen
                if stop > end:
                    break
                kstart = pos + hsize
                yield kind, partition, buf[kstart : kstart + klen], buf[kstart + klen : stop]
                pos = stop
    if pos != len(buf):
        raise ValueError(f"{path}: truncated record at byte {pos}")


def write_replay_archive(
    source: Path,
    dest: Path,
    *,
    society: str,
    origin_us: int,
    last_window_us: int,
    window_seconds: float,
    compresslevel: int = 6,
) -> Counter[str]:
    """The events of record file ``source`` as a ``replay.archive`` JSON Lines archive (``.jsonl.gz``).

    Events are sorted by ``(occurred_at, event_id)`` (the publisher needs event-time order; ``occurred_at``
    has one fixed ISO form, so text order is time order); watermark records are dropped. The lines are the
    records' wire JSON as they are, which ``replay.archive.read_archive`` validates back into events.
    Returns the number of events by type.
    """
    import gzip
    from dataclasses import asdict

    from molt_society.replay.archive import ArchiveHeader

    rows: list[tuple[str, str, bytes]] = []
    types: Counter[str] = Counter()
    loads = orjson.loads
    for kind, _, _, value in read_records(source):
        if kind != KIND_EVENT:
            continue
        doc = loads(value)
        rows.append((doc["occurred_at"], doc["event_id"], value))
        types[doc["type"]] += 1
    rows.sort()
    header = ArchiveHeader(
        society=society,
        events=len(rows),
        origin_us=origin_us,
        last_window_us=last_window_us,
        window_seconds=window_seconds,
    )
    with gzip.open(dest, "wb", compresslevel=compresslevel) as out:
        out.write(orjson.dumps({"archive": asdict(header)}) + b"\n")
        for i in range(0, len(rows), 10_000):
            out.write(b"".join(r[2] + b"\n" for r in rows[i : i + 10_000]))
    return types
