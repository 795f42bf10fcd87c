"""Three Apache Kafka brokers on loopback (``runtime.apache_kafka.KafkaCluster``: a quorum of 3, topics
with 3 replicas, 2 in sync) that lose one: every acknowledged record stays readable, new records are
acknowledged by the two left, and the broker started again on its log catches up.

A society on such a cluster (``society run`` with ``KAFKA_BOOTSTRAP`` naming it, 2 stream and 2 agent
workers) whose streams group coordinator is SIGKILLed mid-run: the run finishes by itself, its stored
events equal the in-process run of the same seed (none lost, none stored twice), nothing is rebuilt from
ClickHouse, and the broker started again on its log is back in sync on every partition of the society.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import time
from pathlib import Path

import pytest
from aiokafka.admin import NewTopic
from aiokafka.errors import KafkaError
from stack_helpers import read_topic
from test_faults import KILL_AT, TICKS, assert_same_as_offline, start_run

from molt_society.runtime import kafka
from molt_society.runtime.apache_kafka import KafkaCluster

pytestmark = pytest.mark.integration
BOUND_S = 60.0
"""A bound so a cluster that never recovers fails the test instead of hanging it; not a figure."""


async def _coordinator(bootstrap: str, group: str) -> int:
    admin = kafka.admin(bootstrap)
    await admin.start()
    try:
        return int(await admin.find_coordinator(group))
    finally:
        await admin.close()


async def _out_of_sync(bootstrap: str, prefix: str, node: int) -> list[str]:
    """The partitions of the topics named ``prefix...`` whose in-sync replicas lack ``node``."""
    admin = kafka.admin(bootstrap)
    await admin.start()
    try:
        topics = [t for t in await admin.list_topics() if t.startswith(prefix)]
        meta = await admin.describe_topics(topics)
    finally:
        await admin.close()
    return [f"{t['topic']}:{p['partition']}" for t in meta for p in t["partitions"] if node not in p["isr"]]


async def _isr(bootstrap: str, topic: str) -> dict[int, tuple[int, list[int]]]:
    admin = kafka.admin(bootstrap)
    await admin.start()
    try:
        meta = await admin.describe_topics([topic])
    finally:
        await admin.close()
    return {p["partition"]: (p["leader"], sorted(p["isr"])) for p in meta[0]["partitions"]}


async def _create_and_send(bootstrap: str, topic: str, values: list[bytes]) -> None:
    admin = kafka.admin(bootstrap)
    await admin.start()
    try:
        await admin.create_topics([NewTopic(topic, 3, 3, topic_configs={"min.insync.replicas": "2"})])
    finally:
        await admin.close()
    await _send(bootstrap, topic, values)


async def _send(bootstrap: str, topic: str, values: list[bytes]) -> None:
    p = kafka.producer(bootstrap, "small", request_timeout_ms=10_000)
    await p.start()
    try:
        for i, v in enumerate(values):
            await asyncio.wait_for(p.send_and_wait(topic, v, partition=i % 3), BOUND_S)
    finally:
        await p.stop()


def _until(check: object, what: str) -> None:
    """Until ``check()`` holds; an admin request the client sent to the dead broker counts as not yet."""
    deadline = time.monotonic() + BOUND_S
    while time.monotonic() < deadline:
        with contextlib.suppress(KafkaError):
            if check():  # type: ignore[operator]
                return
        time.sleep(0.5)
    pytest.fail(f"{what} within {BOUND_S:.0f} s")


def test_a_cluster_that_loses_a_broker_keeps_every_record_and_the_broker_catches_up(tmp_path: Path) -> None:
    cluster = KafkaCluster.start(tmp_path, 3)
    try:
        first = [f"before-{i}".encode() for i in range(300)]
        asyncio.run(_create_and_send(cluster.bootstrap, "kept", first))
        assert all(isr == [1, 2, 3] for _, isr in asyncio.run(_isr(cluster.bootstrap, "kept")).values())

        victim = cluster.nodes[2]
        os.kill(victim.pid, signal.SIGKILL)
        victim.process.wait()
        alive = ",".join(n.bootstrap for n in cluster.nodes[:2])
        # the controller fences the dead broker and moves its leaderships to the two left
        _until(
            lambda: all(
                leader != 3 and isr == [1, 2] for leader, isr in asyncio.run(_isr(alive, "kept")).values()
            ),
            "the dead broker's partitions were not led by another",
        )
        second = [f"after-{i}".encode() for i in range(300)]
        asyncio.run(_send(alive, "kept", second))  # acknowledged by 2 in-sync replicas
        assert sorted(r.value for r in asyncio.run(read_topic(alive, "kept"))) == sorted(first + second)

        back = victim.respawn()
        cluster.nodes[2] = back
        back.wait_answering()
        _until(
            lambda: all(isr == [1, 2, 3] for _, isr in asyncio.run(_isr(alive, "kept")).values()),
            "the restarted broker did not catch up",
        )
    finally:
        cluster.stop()


def test_a_society_on_a_cluster_that_loses_a_broker_loses_and_duplicates_nothing(
    tmp_path: Path, society_name: str
) -> None:
    cluster = KafkaCluster.start(tmp_path / "kafka", 3)
    try:
        run = start_run(
            tmp_path,
            society_name,
            TICKS,
            "--no-dashboard",
            "--stream-workers",
            "2",
            "--agent-workers",
            "2",
            bootstrap=cluster.bootstrap,
            replication="3",
            idempotent_producer="true",
        )
        run.wait_tick(KILL_AT)
        # the worst broker to lose: the coordinator of the stream workers' group
        node = asyncio.run(_coordinator(cluster.bootstrap, kafka.group_id(society_name, "streams")))
        victim = cluster.nodes[node - 1]
        os.kill(victim.pid, signal.SIGKILL)
        victim.process.wait()
        assert run.finish() == 0, run.output[-5000:]
        assert_same_as_offline(run, TICKS)
        assert run.journal("recover.started") == []  # nothing regenerated from ClickHouse
        # no worker died or was restarted (an agent worker given back a tick it had passed by the start-up
        # rebalances reads its feeds again instead of exiting)
        assert run.journal("stack.child_exited") == []
        assert run.journal("society.resumed") == []
        assert run.journal("broker.not_answering") == []  # the cluster answered throughout
        assert "Traceback" not in run.output

        back = victim.respawn()
        cluster.nodes[node - 1] = back
        back.wait_answering()
        _until(
            lambda: asyncio.run(_out_of_sync(cluster.bootstrap, f"society.{society_name}.", node)) == [],
            f"broker {node} did not catch up on the society's topics",
        )
    finally:
        cluster.stop()
