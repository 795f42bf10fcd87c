"""The events topic carries events only; watermarks go to the marks topic and partition state to the
snapshots topic, from which a restarted stream worker rebuilds (real broker, real stack).

Expected values come from independent sources: every record of the events topic decoded as an event
(``schemas.wire.decode_event``), the records and offsets read back from the topics themselves, the count
stored by the sink, and an in-process run of the same seed (``agents.offline.simulate``) for the society
a restarted worker finishes.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

import orjson
import pytest
from stack_helpers import make_settings, read_topic, run_ticks, running_stack, sql
from test_faults import offline_ids, start_run, stored_id_counts

from molt_society.schemas.topics import HEADER_KIND, SNAPSHOT_CHUNK, Role, topic_name
from molt_society.schemas.wire import decode_event
from molt_society.streams.processor import mark_events_offset
from molt_society.streams.snapshots import needed_offsets

pytestmark = pytest.mark.integration


def _highwaters(records: list[Any]) -> dict[int, int]:
    hw: dict[int, int] = defaultdict(int)
    for r in records:
        hw[r.partition] = max(hw[r.partition], r.offset + 1)
    return hw


def test_events_topic_holds_only_events_and_marks_and_snapshots_say_where_they_apply(
    broker: str, tmp_path: Path, society_name: str
) -> None:
    settings = make_settings(
        broker, tmp_path, agents=1500, snapshot_every_events=100, snapshot_every_seconds=0.5
    )
    with running_stack(settings, society_name) as stack:
        run_ticks(stack, 30)
        stored = sql(stack, f"SELECT count() FROM events WHERE society = '{society_name}'")[0][0]
        needed = asyncio.run(needed_offsets(broker, society_name))
        events = asyncio.run(read_topic(broker, topic_name(society_name, Role.EVENTS)))
        marks = asyncio.run(read_topic(broker, topic_name(society_name, Role.MARKS)))
        snaps = asyncio.run(read_topic(broker, topic_name(society_name, Role.SNAPSHOTS)))

    # every record of the events topic is an event of this society; no control records
    for r in events:
        assert not any(k == HEADER_KIND for k, _ in r.headers or ()), r
        assert decode_event(r.value, max_bytes=1 << 20).society == society_name
    assert len(events) == stored > 300

    # marks: the watermarks, each with the events offset it applied at, in order, within the events log
    events_hw = _highwaters(events)
    assert len(marks) > len(events) / 10
    by_partition: dict[int, list[int]] = defaultdict(list)
    for m in marks:
        assert set(orjson.loads(m.value)) >= {"producer", "watermark_us", "tick"}
        by_partition[m.partition].append(mark_events_offset(m.headers))
    for p, offsets in by_partition.items():
        assert offsets == sorted(offsets)
        assert offsets[0] >= 0
        assert offsets[-1] <= events_hw[p]

    # needed_offsets: per partition the offsets of its newest snapshot, which are on the topics
    events_t, marks_t = topic_name(society_name, Role.EVENTS), topic_name(society_name, Role.MARKS)
    snaps_t = topic_name(society_name, Role.SNAPSHOTS)
    assert set(needed) == {events_t, marks_t, snaps_t}
    marks_hw = _highwaters(marks)
    newest_first_chunk: dict[int, int] = {}
    for s in snaps:
        if dict(s.headers)[SNAPSHOT_CHUNK] == b"0":
            newest_first_chunk[s.partition] = s.offset
    for p in range(settings.partitions):
        assert 0 < needed[events_t][p] <= events_hw[p]
        assert 0 < needed[marks_t][p] <= marks_hw[p]
        assert needed[snaps_t][p] == newest_first_chunk[p]
        first = next(s for s in snaps if s.partition == p and s.offset == newest_first_chunk[p])
        headers = dict(first.headers)
        assert int(headers["snapshot-events-offset"]) == needed[events_t][p]
        assert int(headers["snapshot-marks-offset"]) == needed[marks_t][p]


def _log_records(path: Path, event: str) -> list[dict[str, Any]]:
    out = []
    for line in path.read_text(errors="replace").splitlines():
        if event in line and line.startswith("{"):
            try:
                doc = json.loads(line)
            except ValueError:
                continue
            if doc.get("event") == event:
                out.append(doc)
    return out


TICKS, KILL_AT = 60, 30


def test_a_restarted_stream_worker_rebuilds_from_its_snapshots_and_the_society_is_whole(
    tmp_path: Path, society_name: str
) -> None:
    run = start_run(
        tmp_path,
        society_name,
        TICKS,
        "--no-dashboard",
        snapshot_every_events="150",
        snapshot_every_seconds="1",
    )
    log_path = run.state_dir / society_name / "streams-0.log"
    run.wait_tick(KILL_AT)
    deadline = time.monotonic() + 120
    while {r["partition"] for r in _log_records(log_path, "processor.snapshot")} != set(range(4)):
        assert time.monotonic() < deadline, "no snapshot of every partition"
        time.sleep(0.2)
    victim = run.pid_of("streams")
    os.kill(victim, signal.SIGKILL)
    run.wait_event("stack.child_restarted")
    rc = run.finish()
    assert rc == 0, run.output[-5000:]
    rebuilt = _log_records(log_path, "processor.rebuilt")
    after_kill = rebuilt[4:]  # the first worker rebuilt four empty partitions at the start
    assert [r["snapshot_events_offset"] for r in rebuilt[:4]] == [0, 0, 0, 0]
    # each later worker rebuilds all four (one more if the aggregate watch restarted it: aggregate.stalled)
    stalls = len(_log_records(log_path, "aggregate.stalled"))
    assert len(after_kill) == 4 * (1 + stalls), rebuilt
    for i in range(0, len(after_kill), 4):
        assert sorted(r["partition"] for r in after_kill[i : i + 4]) == [0, 1, 2, 3], rebuilt
    for r in after_kill:  # from a snapshot, replaying only what came after it
        assert r["snapshot_events_offset"] > 0, r
    # the stored society is the uninterrupted in-process one: nothing lost, foreign or stored twice
    counts = stored_id_counts(run)
    expected = offline_ids(society_name, TICKS)
    assert len(expected) > 200
    assert set(counts) == expected
    assert {i: n for i, n in counts.items() if n > 1} == {}
