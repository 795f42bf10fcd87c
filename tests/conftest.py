"""Shared fixtures: a real broker per test session (the local broker ``SOCIETY_BROKER`` names, or the
settings' default), a fresh society name and ClickHouse dir per test."""

from __future__ import annotations

import os
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from molt_society.runtime.apache_kafka import KafkaBroker
from molt_society.runtime.broker import LocalBroker
from molt_society.runtime.brokers import Broker
from molt_society.runtime.settings import Settings

# The unit tests stand in one folder per layer (tests/unit/<layer>/test_<module>.py), the helpers they share
# (stored_events, loopback_chat) in tests/unit. A test imports another's fixtures by its module name
# (``from test_importers import DATA``): every folder is on the path, and no two test files share a name
# (tests/unit/test_layers.py).
_UNIT = Path(__file__).resolve().parent / "unit"
for _folder in [_UNIT, *sorted(p for p in _UNIT.iterdir() if p.is_dir() and p.name != "__pycache__")]:
    if str(_folder) not in sys.path:
        sys.path.insert(0, str(_folder))


@pytest.fixture(scope="session")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """Bootstrap address of a real Kafka-protocol broker: KAFKA_BOOTSTRAP if set, else the local broker
    ``SOCIETY_BROKER`` names (Apache Kafka or Tansu; the settings' default when unset)."""
    external = os.environ.get("KAFKA_BOOTSTRAP")
    if external:
        yield external
        return
    folder = tmp_path_factory.mktemp("broker")
    b: Broker
    if Settings().broker == "kafka":
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
