"""Apache Kafka as the local broker (``SOCIETY_BROKER=kafka``, ``runtime.apache_kafka``): a society on it
stores exactly the events of the same society run without a broker, and its topics outlive the broker."""

from __future__ import annotations

import asyncio
import os
import signal
from pathlib import Path

import pytest
from aiokafka import TopicPartition
from stack_helpers import create_topic, make_settings, offline_ids, read_topic, run_ticks, running_stack, sql

from molt_society.runtime import kafka
from molt_society.runtime.apache_kafka import KafkaBroker, libs_dir


def test_a_society_on_apache_kafka_stores_the_offline_societys_events(
    tmp_path: Path, society_name: str
) -> None:
    libs_dir()  # fails with the fetch command when make setup did not fetch Kafka
    s = make_settings(None, tmp_path, agents=150).model_copy(update={"broker": "kafka"})
    with running_stack(s, society_name) as stack:
        assert isinstance(stack.broker, KafkaBroker)
        assert (
            stack.run_dir / "kafka" / "log" / "meta.properties"
        ).is_file()  # formatted, in the run's folder
        run_ticks(stack, 25)
        stored = [r[0] for r in sql(stack, f"SELECT event_id FROM events WHERE society = '{society_name}'")]
        broker = stack.broker
    assert broker.exited() is not None  # stopping the stack stops the broker
    assert len(stored) == len(set(stored))
    assert set(stored) == offline_ids(s, society_name, 25)

    # the same society run again in the same state folder (a second `make demo`): its topics start empty,
    # as on Tansu, instead of holding the first run's records
    again = s.model_copy(update={"clickhouse_url": f"chdb://{tmp_path / 'clickhouse-again'}"})
    with running_stack(again, society_name) as stack:
        run_ticks(stack, 25)
        second = [r[0] for r in sql(stack, f"SELECT event_id FROM events WHERE society = '{society_name}'")]
    assert sorted(second) == sorted(stored)


async def _produce(bootstrap: str, topic: str, values: list[bytes]) -> None:
    await create_topic(bootstrap, topic, 2)
    p = kafka.producer(bootstrap)
    await p.start()
    try:
        for i, v in enumerate(values):
            await p.send_and_wait(topic, v, partition=i % 2)
    finally:
        await p.stop()


@pytest.mark.parametrize("how", ["term", "kill"])
def test_topics_outlive_a_stopped_or_killed_broker(tmp_path: Path, how: str) -> None:
    """Records acknowledged by all in-sync replicas are in the log directory: a broker started again on it
    serves every one of them, whether the first stopped cleanly or was SIGKILLed."""
    data = tmp_path / "kafka"
    first = KafkaBroker.start(data, log_file=tmp_path / "broker.log")
    values = [f"record-{i}".encode() for i in range(500)]
    try:
        asyncio.run(_produce(first.bootstrap, "kept", values))
    finally:
        if how == "kill":
            os.kill(first.pid, signal.SIGKILL)
            first.process.wait()
        first.stop()
    assert first.exited() is not None
    second = KafkaBroker.start(data, log_file=tmp_path / "broker.log")
    try:
        recs = asyncio.run(read_topic(second.bootstrap, "kept"))
    finally:
        second.stop()
    assert sorted(r.value for r in recs) == sorted(values)
    assert {TopicPartition(r.topic, r.partition) for r in recs} == {
        TopicPartition("kept", 0),
        TopicPartition("kept", 1),
    }
