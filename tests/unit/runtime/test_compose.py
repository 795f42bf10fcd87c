"""``docker/compose.yaml``'s brokers run the settings of the 3-node cluster the tests start
(``runtime.apache_kafka.server_properties`` with replication 3): the same Kafka, the same properties."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from molt_society.runtime.apache_kafka import KAFKA_VERSION, Node, server_properties

COMPOSE = Path(__file__).resolve().parents[3] / "docker" / "compose.yaml"
PER_NODE = {  # where a node is, not how it behaves: differs between containers and loopback by design
    "node.id",
    "controller.quorum.voters",
    "listeners",
    "advertised.listeners",
    "listener.security.protocol.map",
    "log.dirs",
}


def _compose() -> dict[str, Any]:
    doc = yaml.safe_load(COMPOSE.read_text())
    assert isinstance(doc, dict)
    return doc


def _as_property(env: str) -> str:
    """The apache/kafka image's rule: KAFKA_ prefix dropped, ``_`` -> ``.``, lower case."""
    return env.removeprefix("KAFKA_").lower().replace("_", ".")


def test_compose_brokers_use_the_cluster_tests_settings() -> None:
    services = _compose()["services"]
    brokers = {k: v for k, v in services.items() if k.startswith("kafka-")}
    assert sorted(brokers) == ["kafka-1", "kafka-2", "kafka-3"]
    cluster = Node(19092, 19093, 1, "1@a:1,2@b:2,3@c:3", replication=3)
    expected = {
        k: v
        for k, v in (
            line.split("=", 1) for line in server_properties(Path("/x"), 1, 2, cluster).splitlines() if line
        )
        if k not in PER_NODE
    }
    for name, svc in brokers.items():
        assert svc["image"] == f"apache/kafka:{KAFKA_VERSION}"
        env = svc["environment"]
        got = {_as_property(k): str(v).lower() for k, v in env.items() if k.startswith("KAFKA_")}
        for key, value in expected.items():
            assert got.get(key) == value.lower(), (
                f"{name}: {key} is {got.get(key)!r}, the tests run {value!r}"
            )
        assert int(env["KAFKA_NODE_ID"]) == int(name.removeprefix("kafka-"))
        assert env["KAFKA_CONTROLLER_QUORUM_VOTERS"] == "1@kafka-1:9093,2@kafka-2:9093,3@kafka-3:9093"
    assert expected["min.insync.replicas"] == "2"
    assert expected["default.replication.factor"] == "3"


def test_the_society_uses_every_broker_with_three_replicas() -> None:
    doc = _compose()
    env = doc["x-society-env"]
    assert env["KAFKA_BOOTSTRAP"] == "kafka-1:9092,kafka-2:9092,kafka-3:9092"
    assert int(env["SOCIETY_REPLICATION"]) == 3
    assert str(env["SOCIETY_IDEMPOTENT_PRODUCER"]) == "true"
    for name, svc in doc["services"].items():
        command = " ".join(map(str, svc.get("command") or []))
        assert "kafka:9092" not in command, f"{name} names a broker that is not there"
