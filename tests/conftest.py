"""Shared fixtures: a real broker per test session (Tansu, or Apache Kafka with SOCIETY_BROKER=kafka), a
fresh society name and ClickHouse dir per test."""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from molt_society.runtime.apache_kafka import KafkaBroker
from molt_society.runtime.broker import LocalBroker
from molt_society.runtime.brokers import Broker


@pytest.fixture(scope="session")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """Bootstrap address of a real Kafka-protocol broker: KAFKA_BOOTSTRAP if set, else the local broker
    ``SOCIETY_BROKER`` names (Tansu by default, or Apache Kafka)."""
    external = os.environ.get("KAFKA_BOOTSTRAP")
    if external:
        yield external
        return
    folder = tmp_path_factory.mktemp("broker")
    b: Broker
    if os.environ.get("SOCIETY_BROKER") == "kafka":
        b = KafkaBroker.start(folder / "kafka", log_file=folder / "kafka.log")
    else:
        b = LocalBroker.start(log_file=folder / "tansu.log")
    try:
        yield b.bootstrap
    finally:
        b.stop()


@pytest.fixture
def society_name() -> str:
    return "t" + uuid.uuid4().hex[:10]


@pytest.fixture
def chdb_url(tmp_path: Path) -> str:
    return f"chdb://{tmp_path / 'clickhouse'}"
