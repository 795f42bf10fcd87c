"""The Apache Kafka distribution and node configuration (``runtime.apache_kafka``), without starting it."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from pydantic import ValidationError

from molt_society.runtime.apache_kafka import (
    KAFKA_VERSION,
    KafkaMissing,
    fetch,
    libs_dir,
    new_cluster_id,
    server_properties,
)
from molt_society.runtime.settings import Settings


def test_a_missing_distribution_says_how_to_fetch_it(tmp_path: Path) -> None:
    with pytest.raises(KafkaMissing) as err:
        libs_dir(tmp_path)
    assert "python -m molt_society.runtime.apache_kafka fetch" in str(err.value)
    assert "SOCIETY_BROKER=tansu" in str(err.value)
    with pytest.raises(KafkaMissing, match="not installed"):
        fetch(tmp_path, maven="no-such-maven-here")
    assert not (tmp_path / "libs").exists()  # nothing half-fetched passes for a distribution


def test_a_complete_distribution_is_found_and_not_fetched_again(tmp_path: Path) -> None:
    libs = tmp_path / "libs"
    libs.mkdir()
    (libs / f"kafka_2.13-{KAFKA_VERSION}.jar").write_bytes(b"")
    assert libs_dir(tmp_path) == libs
    assert fetch(tmp_path, maven="no-such-maven-here") == libs


def test_one_kraft_node_on_loopback_with_its_log_in_the_data_folder(tmp_path: Path) -> None:
    props = dict(
        line.split("=", 1) for line in server_properties(tmp_path, 19092, 19093).splitlines() if line
    )
    assert props["process.roles"] == "broker,controller"
    assert props["listeners"] == "PLAINTEXT://127.0.0.1:19092,CONTROLLER://127.0.0.1:19093"
    assert props["controller.quorum.voters"] == "1@127.0.0.1:19093"
    assert props["log.dirs"] == str(tmp_path / "log")
    assert props["offsets.topic.replication.factor"] == "1"


def test_the_broker_setting(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("SOCIETY_BROKER", raising=False)
    assert Settings().broker == "kafka"  # the default: BENCHMARKS.md, the two local brokers
    monkeypatch.setenv("SOCIETY_BROKER", "tansu")
    assert Settings().broker == "tansu"
    monkeypatch.setenv("SOCIETY_BROKER", "redpanda")
    with pytest.raises(ValidationError):
        Settings()


@pytest.mark.parametrize(
    ("env", "expected"),
    [
        ({"SOCIETY_BROKER": "tansu"}, False),  # Tansu 0.6.0 has no idempotent producer
        ({}, True),  # the local Apache Kafka by default
        ({"SOCIETY_BROKER": "kafka"}, True),
        ({"SOCIETY_BROKER": "kafka", "KAFKA_BOOTSTRAP": "k1:9092"}, False),  # a cluster: its owner says
        ({"KAFKA_BOOTSTRAP": "k1:9092", "SOCIETY_IDEMPOTENT_PRODUCER": "true"}, True),
        ({"SOCIETY_BROKER": "kafka", "SOCIETY_IDEMPOTENT_PRODUCER": "false"}, False),
    ],
)
def test_producers_are_idempotent_where_the_broker_is(
    monkeypatch: pytest.MonkeyPatch, env: dict[str, str], expected: bool
) -> None:
    import asyncio

    from molt_society.runtime import kafka
    from molt_society.runtime.settings import get_settings

    for key in ("SOCIETY_BROKER", "KAFKA_BOOTSTRAP", "SOCIETY_IDEMPOTENT_PRODUCER"):
        monkeypatch.delenv(key, raising=False)
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    get_settings.cache_clear()
    try:

        async def made() -> bool:
            p = kafka.producer("127.0.0.1:9", "actions")
            return p._txn_manager is not None  # aiokafka keeps a sequence manager only when idempotent

        assert asyncio.run(made()) is expected
    finally:
        get_settings.cache_clear()


def test_cluster_ids_never_read_as_an_option() -> None:
    """``kafka-storage format -t ID``: an id starting with ``-`` (1 in 64 of URL-safe base64) is taken for
    an option and formatting fails; every id is 22 characters of URL-safe base64 (16 bytes)."""
    ids = [new_cluster_id() for _ in range(5000)]
    assert not [i for i in ids if i.startswith("-")]
    assert all(len(i) == 22 and re.fullmatch(r"[A-Za-z0-9_-]+", i) for i in ids)
    assert len(set(ids)) == len(ids)
