"""Partition-state snapshots: a state restored from a snapshot taken midway answers every later record
exactly as the uninterrupted state does (outcomes, window partials, feeds, the event-id index)."""

from __future__ import annotations

import os
import subprocess
import sys
import zlib
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

import orjson
import pytest

from molt_society.agents.behaviour import load_behaviour
from molt_society.agents.offline import simulate
from molt_society.runtime.settings import Settings
from molt_society.schemas import control
from molt_society.schemas.events import partition_key
from molt_society.schemas.wire import encode_event
from molt_society.streams import snapshots
from molt_society.streams.partition_state import (
    Accepted,
    Duplicate,
    EventIds,
    MarkApplied,
    PartitionState,
    Rejected,
    kafka_partition,
)

SOCIETY, PARTITIONS, SHARDS, TICKS, AGENTS = "snap", 2, 2, 60, 1500
TICK_US, WINDOW_US = 60_000_000, 600_000_000
PRODUCERS = [control.shard_producer(s) for s in range(SHARDS)]
NOW = 2**62  # processing time: nothing is in the future


@dataclass(frozen=True)
class Rec:
    partition: int
    kind: str  # "event" or "mark"
    key: bytes | None
    raw: bytes


def config(ids: EventIds) -> dict[str, Any]:
    return {
        "window_us": WINDOW_US,
        "feed_size": 5,
        "max_event_bytes": 65536,
        "max_future_us": 300_000_000,
        "thread_ttl_us": 20 * TICK_US,  # threads idle for 20 min are archived within the hour
        "society": SOCIETY,
        "check_keys": True,
        "registered": control.registered_producers(SHARDS),
        "event_ids": ids,
    }


def fresh_states() -> dict[int, PartitionState]:
    ids = EventIds()
    return {p: PartitionState(p, PARTITIONS, **config(ids)) for p in range(PARTITIONS)}


def _other_partition_post_id(partition: int, base: str) -> str:
    n = 0
    while kafka_partition(f"{base}-{n}".encode(), PARTITIONS) == partition:
        n += 1
    return f"{base}-{n}"


def society_records() -> list[Rec]:
    """A real society's events (the in-process run), each on its key's partition, with both shards'
    watermarks after every tick, and along the way redeliveries, conflicting copies of accepted ids (on
    the same partition and on the other one), garbage and a final mark."""
    start = datetime.fromisoformat(Settings().sim_start)
    origin = control.to_us(start)
    events = simulate(
        seed=3,
        agents=AGENTS,
        ticks=TICKS,
        behaviour=load_behaviour(),
        shards=SHARDS,
        partitions=PARTITIONS,
        tick_seconds=TICK_US / 1e6,
        start=start,
        society=SOCIETY,
    ).events
    events = sorted(events, key=lambda e: control.to_us(e.occurred_at))
    out: list[Rec] = []
    seen: list[Rec] = []
    tick = 0

    def marks(t: int, final: bool = False) -> None:
        for p in range(PARTITIONS):
            for shard in PRODUCERS:
                mark = control.watermark(shard, PRODUCERS, origin + (t + 1) * TICK_US, t, origin, final=final)
                out.append(Rec(p, "mark", None, control.dumps(mark)))

    for i, ev in enumerate(events):
        while control.to_us(ev.occurred_at) >= origin + (tick + 1) * TICK_US:
            marks(tick)
            tick += 1
        key = partition_key(ev).encode()
        rec = Rec(kafka_partition(key, PARTITIONS), "event", key, encode_event(ev))
        out.append(rec)
        seen.append(rec)
        if i % 37 == 36:  # a redelivery of an older event
            out.append(seen[(i * 7) % len(seen)])
        if i % 53 == 52:  # the id of an older event (every other time a post's) with other bytes
            posts = [r for r in seen if b'"post_created"' in r.raw]
            old = posts[-1] if (i // 53) % 2 == 0 and posts else seen[(i * 11) % len(seen)]
            doc = orjson.loads(old.raw)
            if doc["type"] == "post_created":  # a new post under that id, on the other partition
                pid = _other_partition_post_id(old.partition, doc["body"]["post_id"])
                doc["body"]["post_id"] = pid
                out.append(Rec(1 - old.partition, "event", pid.encode(), orjson.dumps(doc)))
            elif doc["type"] in ("comment_created", "vote_cast"):  # another actor, same thread
                doc["actor"] = f"{doc['actor']}-forged"
                out.append(Rec(old.partition, "event", old.key, orjson.dumps(doc)))
        if i % 101 == 100:
            out.append(Rec(i % PARTITIONS, "event", b"x", b"not json"))
    marks(tick, final=True)
    return out


def outcome(state: PartitionState, rec: Rec) -> tuple[Any, ...]:
    """What the processor would ship for ``rec``: the outcome, and for a mark its partials and feed."""
    if rec.kind == "event":
        out = state.accept_action(rec.raw, NOW, key=rec.key)
        if isinstance(out, Accepted):
            return ("accepted", out.event_id, out.event_type, out.occurred_us, out.late)
        if isinstance(out, Duplicate):
            return ("duplicate", out.event_id)
        return ("rejected", out.code, out.reason)
    applied = state.accept_watermark(rec.raw, 2_000_000_000_000_000)
    if isinstance(applied, Rejected):
        return ("mark rejected", applied.code, applied.reason)
    assert isinstance(applied, MarkApplied)
    feed = state.feed_snapshot(applied.tick) if applied.tick is not None else None
    return ("mark", applied.partials, applied.tick, feed)


@pytest.fixture(scope="module")
def records() -> list[Rec]:
    return society_records()


@pytest.fixture(scope="module")
def uninterrupted(records: list[Rec]) -> tuple[list[tuple[Any, ...]], dict[int, bytes]]:
    states = fresh_states()
    outs = [outcome(states[r.partition], r) for r in records]
    return outs, {p: s.to_snapshot() for p, s in states.items()}


def test_the_sequence_exercises_what_a_snapshot_must_keep(
    records: list[Rec], uninterrupted: tuple[list[tuple[Any, ...]], dict[int, bytes]]
) -> None:
    outs, _ = uninterrupted
    kinds = [o[0] for o in outs]
    codes = {o[1] for o in outs if o[0] == "rejected"}
    assert kinds.count("accepted") > 600
    assert kinds.count("duplicate") >= 10
    assert {"conflicting_event_id", "malformed_json", "thread_archived"} <= codes, codes
    assert any("on partition" in o[2] for o in outs if o[0] == "rejected" and o[1] == "conflicting_event_id")
    assert sum(len(o[1]) for o in outs if o[0] == "mark") >= 2 * 6  # every window of both partitions
    assert (
        sum(1 for o in outs if o[0] == "mark" and o[3] is not None) == PARTITIONS * TICKS
    )  # a feed per tick and partition


@pytest.mark.parametrize("cut", [0.1, 0.5, 0.83, 1.0])
def test_a_state_restored_midway_continues_exactly_as_the_uninterrupted_one(
    records: list[Rec], uninterrupted: tuple[list[tuple[Any, ...]], dict[int, bytes]], cut: float
) -> None:
    expected, final = uninterrupted
    at = int(len(records) * cut)
    before = fresh_states()
    outs = [outcome(before[r.partition], r) for r in records[:at]]
    assert outs == expected[:at]
    # through the wire format: compressed, cut into small chunks, joined again
    saved = {p: snapshots.decode(snapshots.encode(s.to_snapshot(), 4096)) for p, s in before.items()}
    ids = EventIds()  # a new worker: nothing of the old one survives but the snapshot
    after = {p: PartitionState.from_snapshot(raw, p, PARTITIONS, **config(ids)) for p, raw in saved.items()}
    assert len(ids) == len(before[0].event_ids)
    rest = [outcome(after[r.partition], r) for r in records[at:]]
    assert rest == expected[at:]
    assert {p: s.to_snapshot() for p, s in after.items()} == final


def test_a_snapshot_is_restored_only_by_a_worker_of_the_same_shape() -> None:
    ids = EventIds()
    s = PartitionState(1, PARTITIONS, **config(ids))
    raw = s.to_snapshot()
    with pytest.raises(ValueError, match="partition"):
        PartitionState.from_snapshot(raw, 0, PARTITIONS, **config(EventIds()))
    with pytest.raises(ValueError, match="window_us"):
        PartitionState.from_snapshot(raw, 1, PARTITIONS, **{**config(EventIds()), "window_us": WINDOW_US * 2})
    with pytest.raises(ValueError, match="not a partition-state snapshot"):
        PartitionState.from_snapshot(b"garbage", 1, PARTITIONS, **config(EventIds()))


def test_chunks_of_a_snapshot() -> None:
    state = os.urandom(50_000)  # incompressible: the chunks are the size asked for
    chunks = snapshots.encode(state, 8192)
    assert len(chunks) > 6
    assert all(len(c) <= 8192 for c in chunks)
    assert snapshots.decode(chunks) == state
    with pytest.raises(zlib.error):
        snapshots.decode(chunks[:-1])


_RESTORE_ELSEWHERE = """
import sys
from pathlib import Path
from tests.unit.streams.test_snapshots import PARTITIONS, config, outcome, Rec
from molt_society.streams.partition_state import EventIds, PartitionState
tmp = Path(sys.argv[1])
ids = EventIds()
state = PartitionState.from_snapshot((tmp / "snap").read_bytes(), 0, PARTITIONS, **config(ids))
key = (tmp / "key").read_bytes()
print(outcome(state, Rec(0, "event", key, (tmp / "old").read_bytes()))[0])
print(outcome(state, Rec(0, "event", key, (tmp / "changed").read_bytes()))[1])
"""


def test_a_snapshot_recognises_redeliveries_in_another_process(records: list[Rec], tmp_path: Path) -> None:
    """The fingerprints in a snapshot are the same in every process (Python's ``hash`` of bytes is not:
    it is keyed per process), so a worker that restored it still tells a redelivery from a conflict."""
    states = fresh_states()
    first = next(r for r in records if r.kind == "event" and r.partition == 0 and b"comment_created" in r.raw)
    for r in records[: records.index(first) + 1]:
        outcome(states[r.partition], r)
    (tmp_path / "snap").write_bytes(states[0].to_snapshot())
    (tmp_path / "old").write_bytes(first.raw)
    (tmp_path / "key").write_bytes(first.key or b"")
    doc = orjson.loads(first.raw)
    doc["body"]["content"] = doc["body"].get("content", "") + "!"
    (tmp_path / "changed").write_bytes(orjson.dumps(doc))
    root = Path(__file__).resolve().parents[3]
    env = {**os.environ, "PYTHONHASHSEED": "12345", "PYTHONPATH": str(root)}
    done = subprocess.run(
        [sys.executable, "-c", _RESTORE_ELSEWHERE, str(tmp_path)],
        capture_output=True,
        text=True,
        env=env,
        cwd=root,
        timeout=120,
        check=True,
    )
    assert done.stdout.split() == ["duplicate", "conflicting_event_id"], done.stderr[-2000:]
