"""The topic trimmer on the real broker, beside a real society run.

The offsets the trimmer would delete below are checked against the consumer groups' committed offsets and
the high watermarks read here, independently; the events stored in ClickHouse against the in-process run
of the same seed (``agents.offline``). On a broker that implements DeleteRecords (Apache Kafka, with
``KAFKA_BOOTSTRAP``) the log start offsets must have moved; the local Tansu 0.6.0 does not implement it (the
request panics in the broker, which goes on): the trimmer must say so, stop asking, and the run must be
whole.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from aiokafka import TopicPartition
from stack_helpers import make_settings, offline_ids, running_stack, sql

from molt_society.runtime import kafka
from molt_society.runtime.broker import broker_silence
from molt_society.runtime.settings import Settings
from molt_society.schemas.topics import Role, topic_name
from molt_society.society.drive import drive_clock, last_window_start, wait_drained
from molt_society.society.fork import save_config
from molt_society.society.trim import FEED_KEEP_RECORDS, Trimmer, load_needed_offsets, plan

pytestmark = pytest.mark.integration
TICKS = 30


async def _committed(
    bootstrap: str, group: str, tps: list[TopicPartition]
) -> dict[TopicPartition, int | None]:
    c = kafka.consumer(bootstrap, "offsets", group=group)
    await c.start()
    try:
        return {tp: await c.committed(tp) for tp in tps}
    finally:
        await c.stop()


async def _ends(
    bootstrap: str, tps: list[TopicPartition]
) -> tuple[dict[TopicPartition, int], dict[TopicPartition, int]]:
    """(log start offset, high watermark) per partition: ListOffsets(earliest), a fetch's watermark."""
    c = kafka.consumer(bootstrap, "reader", fetch_max_wait_ms=500)
    await c.start()
    try:
        starts = await c.beginning_offsets(tps)
        c.assign(tps)
        await c.seek_to_beginning(*tps)
        hws: dict[TopicPartition, int] = {}
        for _ in range(200):
            await c.getmany(timeout_ms=100, max_records=1)
            hws = {tp: hw for tp in tps if (hw := c.highwater(tp)) is not None}
            if len(hws) == len(tps):
                break
        return dict(starts), hws
    finally:
        await c.stop()


def test_trimmer_beside_a_run_deletes_only_what_every_reader_passed(
    broker: str, tmp_path: Path, society_name: str
) -> None:
    settings = make_settings(broker, tmp_path)
    with running_stack(settings, society_name) as stack:

        async def go() -> tuple[Trimmer, dict[TopicPartition, int]]:
            trimmer = Trimmer(stack.bootstrap, society_name, interval=0.3, timeout=10.0)
            task = asyncio.create_task(trimmer.run())
            _, end_us = await drive_clock(settings, stack.bootstrap, society_name, ticks=TICKS, duration=None)
            save_config(settings, society_name, end_us=end_us)
            await wait_drained(society_name, last_window_start(settings, end_us), stack)
            if trimmer.supported is not False:
                await trimmer.round()  # the drained state: everything the readers committed
            final_plan = plan(society_name, await trimmer.read())
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
            return trimmer, final_plan

        trimmer, final_plan = asyncio.run(go())
        stored = [
            r[0]
            for r in sql(stack, f"SELECT toString(event_id) FROM events WHERE society = '{society_name}'")
        ]

        def tps(role: Role, n: int) -> list[TopicPartition]:
            return [TopicPartition(topic_name(society_name, role), q) for q in range(n)]

        actions, ticks, feeds = tps(Role.ACTIONS, 4), tps(Role.TICKS, 4), tps(Role.FEEDS, 4)
        streams = asyncio.run(_committed(broker, f"society.{society_name}.streams", actions))
        agents = asyncio.run(_committed(broker, f"society.{society_name}.agents", ticks))
        starts, hws = asyncio.run(_ends(broker, actions + ticks + feeds))
        broker_answers = asyncio.run(broker_silence(broker)) is None

    # the plan: exactly the readers' committed offsets (the stack is drained), the newest feeds kept
    assert None not in streams.values()
    assert None not in agents.values()
    committed = {tp: int(v or 0) for tp, v in (streams | agents).items()}
    for tp in actions:
        assert streams[tp] == hws[tp]  # drained: every action processed
        assert final_plan[tp] == streams[tp]
    for tp in ticks:
        assert agents[tp] == hws[tp]  # drained: every tick record processed
        assert committed[tp] >= TICKS  # one tick record per shard and tick (and the final one)
        assert final_plan[tp] == agents[tp]
    for tp in feeds:  # a short run: fewer feed records than are always kept
        assert hws[tp] > TICKS
        assert final_plan.get(tp) == (hws[tp] - FEED_KEEP_RECORDS if hws[tp] > FEED_KEEP_RECORDS else None)
    events = [tp for tp in final_plan if tp.topic == topic_name(society_name, Role.EVENTS)]
    if load_needed_offsets() is None:
        assert events == []  # without the stream workers' rebuild needs, events stay whole

    if trimmer.supported:
        # a broker with DeleteRecords (Apache Kafka): records went, never past what a reader still needed
        for tp in actions + ticks:
            assert 0 < starts[tp] <= final_plan[tp]
        for tp in feeds:  # a short run: feeds not past what is always kept stay whole
            assert starts[tp] <= final_plan.get(tp, 0)
        for tp in actions + ticks:
            assert starts[tp] <= committed[tp]
    else:
        # the local Tansu 0.6.0: said once, no more asking, the broker and the run unharmed
        assert trimmer.supported is False
        assert trimmer.failures == 0
        assert broker_answers
        assert all(starts[tp] == 0 for tp in actions + ticks + feeds)

    # the run is whole: every event once, the same as the in-process run of the same seed
    assert len(stored) == len(set(stored))
    expected = offline_ids(settings, society_name, TICKS)
    assert len(expected) > 100
    assert set(stored) == expected


@pytest.mark.parametrize("kind", ["kafka", "tansu"])
def test_society_run_starts_the_trimmer_with_its_local_broker(
    tmp_path: Path, society_name: str, kind: str
) -> None:
    """``society run`` (its own broker) starts the trimmer: by default with Apache Kafka, which deletes
    what every reader passed, with ``SOCIETY_TRIM=true`` on Tansu, which cannot (said once); the run is
    whole either way."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SOCIETY_", "KAFKA_", "CLICKHOUSE_"))}
    env.update(
        SOCIETY_STATE_DIR=str(tmp_path / "state"),
        CLICKHOUSE_URL=f"chdb://{tmp_path / 'clickhouse'}",
        SOCIETY_PARTITIONS="4",
        SOCIETY_SHARDS="4",
        SOCIETY_WINDOW_SECONDS="600",
        SOCIETY_TRIM_INTERVAL_SECONDS="0.3",
        SOCIETY_BROKER=kind,
    )
    if kind == "tansu":
        env["SOCIETY_TRIM"] = "true"  # off by default there
    argv = [
        sys.executable,
        "-m",
        "molt_society.society.cli",
        "run",
        "--society",
        society_name,
        "--agents",
        "300",
    ]
    argv += ["--ticks", str(TICKS), "--seed", "7", "--tick-seconds", "60", "--no-dashboard"]
    done = subprocess.run(argv, capture_output=True, text=True, env=env, cwd=tmp_path, timeout=300)
    out = done.stdout + done.stderr
    assert done.returncode == 0, out[-5000:]
    assert "trim.round_failed" not in out
    if kind == "tansu":
        # the driver's trimmer asked its broker to delete records: Tansu 0.6.0 cannot, which is said once
        assert out.count('"event": "trim.unsupported"') == 1
    else:
        # Kafka moved the log start of what every reader had passed (its checkpoint, written at shutdown)
        assert "trim.unsupported" not in out
        checkpoint = tmp_path / "state" / society_name / "kafka" / "log" / "log-start-offset-checkpoint"
        starts = {
            (topic, int(part)): int(offset)
            for topic, part, offset in (line.split() for line in checkpoint.read_text().splitlines()[2:])
        }
        for role in ("actions", "ticks"):
            for q in range(4):
                assert starts.get((f"society.{society_name}.{role}", q), 0) > 0, (role, q, starts)

    code = (
        "import json, sys\n"
        "from molt_society.warehouse.client import connect\n"
        "sql = f\"SELECT toString(event_id) FROM events WHERE society = '{sys.argv[2]}'\"\n"
        "print(json.dumps([r[0] for r in connect(sys.argv[1]).query(sql).result_rows]))\n"
    )
    got = subprocess.run(
        [sys.executable, "-c", code, f"chdb://{tmp_path / 'clickhouse'}", society_name],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    stored: list[str] = json.loads(got.stdout.strip().splitlines()[-1])
    assert len(stored) == len(set(stored))
    settings = Settings(agents=300, seed=7, partitions=4, shards=4, tick_seconds=60.0)
    assert set(stored) == offline_ids(settings, society_name, TICKS)
