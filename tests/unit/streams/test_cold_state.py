"""A direct replay's state processes keep little in memory, and that changes nothing they send.

- ``streams.cold_threads``: with at most ``hot`` threads in memory per partition, the least recently used
  go to disk and come back when an event of theirs arrives;
- ``EventIds(repeated)``: only the ids that occur more than once in the input are remembered
  (``importers.spill.repeated_ties`` finds them).

Each is checked by running the same history through the state processes' code (``society.replay_direct``,
in this process, no broker or store) twice, once with everything in memory (the stream worker's way:
every thread, every id) and once with a tiny ``hot`` and the repeated ids only, and comparing every record
they send to the insert process: events with their offsets, window partials, dead letters. The history is
a generated MoltBook archive with a redelivered event, a conflicting reuse of an event id and a comment on
a post that does not exist added; the thread TTL is short, so threads are also archived (from memory and
from disk) and later events in them dead-lettered.

The stream workers' record sequence of ``test_snapshots`` (a simulated society with feeds at every tick,
redeliveries, conflicting ids on both partitions, garbage, archived threads) checks the same at the level
of ``PartitionState``, feeds and snapshots included.
"""

from __future__ import annotations

import asyncio
import gzip
from dataclasses import asdict, replace
from pathlib import Path
from typing import Any

import orjson
import pytest
from test_snapshots import PARTITIONS, Rec, config, fresh_states, outcome, society_records

from molt_society.bench.archive_gen import generate
from molt_society.importers.spill import SortedSpill, repeated_ties
from molt_society.replay.archive import ArchiveHeader
from molt_society.replay.source import load_source
from molt_society.runtime.settings import Settings
from molt_society.society import replay_direct
from molt_society.streams import partition_state
from molt_society.streams.cold_threads import ColdThreads
from molt_society.streams.partition_state import EventIds, PartitionState

TTL_S = 6 * 3600.0  # the generated posts span seven days: many threads go idle for longer


def _extra(docs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    posts = [d for d in docs if d["type"] == "post_created"]
    comment = next(d for d in docs if d["type"] == "comment_created")
    redelivered = dict(posts[10])  # the same event again: a duplicate, not stored twice
    conflict = {**posts[20], "body": {**posts[20]["body"], "title": "another title"}}
    orphan = {
        **comment,
        "event_id": "0f5a3d2e-0000-4000-8000-000000000003",
        "body": {**comment["body"], "post_id": "no-such-post", "comment_id": "c-orphan", "parent_id": None},
    }
    last = max(d["occurred_at"] for d in docs)
    late = {  # a reply to the first post days after its thread went quiet: archived by then
        **comment,
        "event_id": "0f5a3d2e-0000-4000-8000-000000000005",
        "occurred_at": last,
        "body": {**comment["body"], "post_id": posts[0]["body"]["post_id"], "comment_id": "c-late"},
    }
    return [redelivered, conflict, orphan, late]


@pytest.fixture(scope="module")
def history(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("cold")
    generate(folder, 600, 11, ["observatory-sqlite"])
    with load_source(folder / "observatory.sqlite") as source:
        docs = list(source.events)
    extra = _extra(docs)
    path = folder / "history.jsonl.gz"
    header = ArchiveHeader(society="generated", events=len(docs) + len(extra), window_seconds=3600.0)
    with gzip.open(path, "wb") as f:
        f.write(orjson.dumps({"archive": asdict(header)}) + b"\n")
        for doc in [*docs, *extra]:
            f.write(orjson.dumps(doc) + b"\n")
    return path


class _Sent:
    def __init__(self) -> None:
        self.messages: list[Any] = []

    def send(self, msg: Any) -> None:
        self.messages.append(msg)


def _state_records(path: Path, *, hot: int, repeated_only: bool) -> tuple[list[Any], dict[str, int]]:
    """What the state processes send for the history (all partitions in one), and the cold stores' use."""
    settings = Settings(thread_ttl_seconds=TTL_S, replay_direct_hot_threads=hot, partitions=4)
    used = {"rows": 0, "loads": 0}
    closing = ColdThreads.close

    def count_then_close(cold: ColdThreads) -> None:
        used["rows"] += cold.rows
        used["loads"] += cold.loads
        closing(cold)

    with load_source(path) as source:
        job = replay_direct._job(settings, source, "cold")
        if not repeated_only:
            job = replace(job, repeated=None)
        job = replace(job, owned=tuple(range(settings.partitions)))
        records, progress = _Sent(), _Sent()
        with pytest.MonkeyPatch.context() as mp:
            mp.setattr(ColdThreads, "close", count_then_close)
            asyncio.run(replay_direct._states(records, progress, job))  # type: ignore[arg-type]
    return records.messages, used


def test_threads_on_disk_and_repeated_ids_only_change_nothing_sent(history: Path) -> None:
    everything, roomy = _state_records(history, hot=1_000_000, repeated_only=False)
    lean, tight = _state_records(history, hot=3, repeated_only=True)
    assert roomy == {"rows": 0, "loads": 0}  # nothing went to disk
    assert tight["rows"] > 500, tight  # threads went to disk
    assert tight["loads"] > 100, tight  # and came back
    codes = sorted(
        dict(m[5])["dlq-code"].decode() for m in everything if m[0] == "dead_letter"
    )  # headers: (name, value)
    assert "thread_archived" in codes, codes
    assert "conflicting_event_id" in codes, codes
    assert "unknown_post" in codes, codes
    events = sum(len(m[4]) for m in everything if m[0] == "events")
    assert events > 2_000
    assert lean == everything


def test_repeated_ties_are_the_ids_seen_more_than_once(tmp_path: Path) -> None:
    ids = [bytes([i % 251, i // 251]) + bytes(14) for i in range(3_000)]
    twice = {ids[7], ids[2_999], ids[1_000]}
    spill = SortedSpill(run_size=700, folder=tmp_path, tally_ties=True)
    for i, tie in enumerate([*ids, *twice, ids[7]]):
        spill.add(i % 13, tie, b"x")
    try:
        got = repeated_ties(spill.seal())
    finally:
        spill.close()
    assert got == frozenset(int.from_bytes(t[:8], "big") for t in twice)
    plain = SortedSpill(folder=tmp_path)
    plain.add(0, ids[0], b"x")
    assert repeated_ties(plain.seal()) is None  # no side files: the caller remembers every id
    plain.close()


def test_event_ids_remember_only_repeated_ones() -> None:
    uid_once, uid_twice = 5 << 64 | 1, 9 << 64 | 2
    ids = partition_state.EventIds(frozenset({9}))
    ids.add(uid_once, 123, 0)
    ids.add(uid_twice, 456, 0)
    assert ids.get(uid_once) is None
    assert len(ids) == 1
    assert ids.unpack(ids.get(uid_twice) or 0) == (456, 0)


def test_a_state_with_cold_threads_answers_every_record_as_one_without(tmp_path: Path) -> None:
    records: list[Rec] = society_records()
    warm = fresh_states()
    expected = [outcome(warm[r.partition], r) for r in records]
    final = {p: s.to_snapshot() for p, s in warm.items()}
    ids = EventIds()
    colds = {p: ColdThreads(tmp_path) for p in range(PARTITIONS)}
    try:
        states = {
            p: PartitionState(p, PARTITIONS, **config(ids), cold=colds[p], hot_threads=2)
            for p in range(PARTITIONS)
        }
        got = [outcome(states[r.partition], r) for r in records]
        assert got == expected  # outcomes, partials and every tick's feeds
        assert sum(c.loads for c in colds.values()) > 100
        for p, state in states.items():  # a snapshot holds every thread, in memory or not
            restored = PartitionState.from_snapshot(state.to_snapshot(), p, PARTITIONS, **config(EventIds()))
            before = PartitionState.from_snapshot(final[p], p, PARTITIONS, **config(EventIds()))
            assert sorted(t.row() for t in restored.threads.values()) == sorted(
                t.row() for t in before.threads.values()
            )
    finally:
        for cold in colds.values():
            cold.close()
    assert not any(tmp_path.iterdir())  # the databases are removed
