"""Shared fixtures: a real Tansu broker per test session, a fresh society name and ClickHouse dir per test."""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from molt_society.runtime.broker import LocalBroker


@pytest.fixture(scope="session")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """Bootstrap address of a real Kafka-protocol broker: KAFKA_BOOTSTRAP if set, else a local Tansu."""
    external = os.environ.get("KAFKA_BOOTSTRAP")
    if external:
        yield external
        return
    log_file = tmp_path_factory.mktemp("broker") / "tansu.log"
    b = LocalBroker.start(log_file=log_file)
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
