"""A client whose known brokers are all gone asks its bootstrap servers again (``runtime.rebootstrap``).

The broker is real and answers throughout; what is made wrong is the client's own picture of the cluster:
its metadata names one broker only, at a port nothing listens on (as a client is left when the broker it
last heard of dies). aiokafka's own client then never updates its metadata again (checked here too, so the
test shows the difference); the project's clients read it from the bootstrap list and go on reading.
"""

from __future__ import annotations

import asyncio
import socket
from collections.abc import Callable

from aiokafka import AIOKafkaConsumer, TopicPartition
from aiokafka.structs import BrokerMetadata

from molt_society.runtime import kafka
from molt_society.runtime.broker import ensure_topics
from molt_society.runtime.rebootstrap import RebootstrapClient
from molt_society.schemas.topics import Role, topic_name

GONE = 99  # the node id of the broker the client wrongly believes is the cluster


def _dead_port() -> int:
    with socket.socket() as sock:  # bound then closed: nothing listens there
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _believe_only_a_dead_broker(consumer: AIOKafkaConsumer) -> None:
    cluster = consumer._client.cluster
    cluster._brokers = {GONE: BrokerMetadata(GONE, "127.0.0.1", _dead_port(), None)}


async def _poisoned_update(make: Callable[[], AIOKafkaConsumer]) -> tuple[bool, list[int]]:
    c = make()  # made inside the event loop, as aiokafka wants
    await c.start()
    try:
        _believe_only_a_dead_broker(c)
        ok = await asyncio.wait_for(c._client.force_metadata_update(), 30)
        return bool(ok), sorted(b.nodeId for b in c._client.cluster.brokers())
    finally:
        await c.stop()


def test_aiokafkas_own_client_stays_on_the_dead_broker(broker: str) -> None:
    """The failure the project's client exists for: without it the metadata never comes back."""
    ok, brokers = asyncio.run(_poisoned_update(lambda: AIOKafkaConsumer(bootstrap_servers=broker)))
    assert not ok
    assert brokers == [GONE]


def test_the_projects_client_reads_the_cluster_from_its_bootstrap_servers(broker: str) -> None:
    def make() -> AIOKafkaConsumer:
        c = kafka.consumer(broker, "reader")
        assert isinstance(c._client, RebootstrapClient)
        return c

    ok, brokers = asyncio.run(_poisoned_update(make))
    assert ok
    assert brokers
    assert GONE not in brokers


async def _read_after_poisoning(broker: str, society: str) -> list[bytes]:
    await ensure_topics(broker, society, partitions=1, shards=1)
    topic = topic_name(society, Role.FEEDS)
    producer = kafka.producer(broker, "control")
    await producer.start()
    try:
        await producer.send_and_wait(topic, b"first", partition=0)
    finally:
        await producer.stop()
    c = kafka.consumer(broker, "reader")
    await c.start()
    try:
        _believe_only_a_dead_broker(c)
        tp = TopicPartition(topic, 0)
        c.assign([tp])
        await asyncio.wait_for(c.seek_to_beginning(tp), 60)  # the offset reset needs the partition's leader
        got: list[bytes] = []
        async with asyncio.timeout(60):
            while not got:
                batch = await c.getmany(timeout_ms=500)
                got.extend(r.value for rs in batch.values() for r in rs if r.value is not None)
        return got
    finally:
        await c.stop()


def test_a_reader_that_lost_every_broker_it_knew_reads_on(broker: str, society_name: str) -> None:
    assert asyncio.run(_read_after_poisoning(broker, society_name)) == [b"first"]
