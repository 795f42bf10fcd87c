"""A society on a cluster of 3 Apache Kafka brokers (replication 3, two in sync) that loses one mid-run.

Three KRaft nodes on loopback (``runtime.apache_kafka.KafkaCluster``, the brokers of
``docker/compose.yaml``), 2 stream and 2 agent workers. One broker is SIGKILLed once the society has
stored events: the run finishes with nothing lost and nothing stored twice, without rebuilding anything
from ClickHouse (the same generation of topics throughout), and the broker, started again on its log,
catches up: it is back in sync on every partition of the society's topics.
"""

from __future__ import annotations

import asyncio
import os
import signal
import threading
import time
from pathlib import Path

import pytest
from stack_helpers import make_settings, offline_ids, run_ticks, running_stack, sql

from molt_society.runtime import kafka
from molt_society.runtime.apache_kafka import KafkaCluster
from molt_society.schemas.topics import Role, topic_name

pytestmark = pytest.mark.integration
TICKS = 60
CATCH_UP_S = 120.0
"""A bound so a broker that never catches up fails the test instead of hanging it; not a figure."""


async def _out_of_sync(bootstrap: str, topics: list[str], node: int) -> list[str]:
    """The partitions of ``topics`` whose in-sync replicas lack ``node``."""
    admin = kafka.admin(bootstrap)
    await admin.start()
    try:
        meta = await admin.describe_topics(topics)
    finally:
        await admin.close()
    return [
        f"{t['topic']}:{p['partition']}"
        for t in meta
        for p in t["partitions"]
        if node not in p.get("isr", [])
    ]


def test_a_cluster_that_loses_a_broker_loses_and_duplicates_nothing(
    tmp_path: Path, society_name: str
) -> None:
    cluster = KafkaCluster.start(tmp_path / "kafka", 3)
    try:
        s = make_settings(cluster.bootstrap, tmp_path, replication=3, agents=200)
        with running_stack(s, society_name, stream_workers=2, agent_workers=2) as stack:
            victim = cluster.nodes[2]
            killed = threading.Event()

            def kill_when_events_are_stored() -> None:
                deadline = time.monotonic() + 120
                while time.monotonic() < deadline:
                    n = sql(stack, f"SELECT count() FROM events WHERE society = '{society_name}'")[0][0]
                    if n > 0:
                        os.kill(victim.pid, signal.SIGKILL)
                        killed.set()
                        return
                    time.sleep(0.2)

            killer = threading.Thread(target=kill_when_events_are_stored, daemon=True)
            killer.start()
            run_ticks(stack, TICKS)
            killer.join(5)
            assert killed.is_set(), "the broker was never killed: no event was stored"
            assert victim.exited() is not None
            per_id = "SELECT toString(event_id), count() FROM events WHERE society = '{}' GROUP BY event_id"
            rows = sql(stack, per_id.format(society_name))
        stored = {r[0]: int(r[1]) for r in rows}
        assert not {i: n for i, n in stored.items() if n > 1}, "events stored twice"
        expected = offline_ids(s, society_name, TICKS)
        assert len(expected) > 3 * TICKS
        assert set(stored) == expected  # nothing lost, nothing foreign
        assert s.generation == 0  # the same topics throughout: nothing rebuilt from ClickHouse

        # the killed broker, started again on its log, is back in sync on every partition
        back = victim.respawn()
        cluster.nodes[2] = back
        back.wait_answering()
        topics = [topic_name(society_name, r) for r in (Role.ACTIONS, Role.EVENTS, Role.TICKS, Role.FEEDS)]
        deadline = time.monotonic() + CATCH_UP_S
        lagging = asyncio.run(_out_of_sync(cluster.bootstrap, topics, 3))
        while lagging and time.monotonic() < deadline:
            time.sleep(1.0)
            lagging = asyncio.run(_out_of_sync(cluster.bootstrap, topics, 3))
        assert lagging == [], f"broker 3 not back in sync on {lagging}"
    finally:
        cluster.stop()
