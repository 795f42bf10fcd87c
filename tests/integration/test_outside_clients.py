"""Kafka clients no one here wrote read a society from the local broker (docs/kafka-clients.md).

A short real society (300 agents, 5 ticks of a simulated hour; real broker, real chDB) is run once for
the module. Then confluent-kafka (librdkafka 2.x) reads ``society.<name>.events`` by explicit assignment
and through a consumer group with the documented settings, Debian's ``kcat`` (librdkafka 2.0.2) lists the
metadata and consumes the topic with the documented flags, and the same kcat on the wheel's librdkafka
reads it through a group. The expected values are independent of the clients: the
event contract comes from the ``society schema`` command and is checked with ``jsonschema`` (draft
2020-12), and the event ids are those the sink stored in ClickHouse.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, Message, TopicPartition
from jsonschema import Draft202012Validator  # type: ignore[import-untyped]
from stack_helpers import make_settings, run_ticks, running_stack, sql

from molt_society.runtime.settings import Settings
from molt_society.schemas.topics import HEADER_KIND, Role, topic_name

pytestmark = pytest.mark.integration
AGENTS = 300
TICKS = 5
TICK_SECONDS = 3600.0
READ_DEADLINE_S = 120.0
"""A bound so a broken client fails the test instead of hanging it; not a performance figure."""

ON_KAFKA = Settings().broker == "kafka" and not os.environ.get("KAFKA_BOOTSTRAP")
"""Apache Kafka as the local broker: every client with its default settings."""

GROUP_SETTINGS: dict[str, Any] = (
    {"auto.offset.reset": "earliest"}
    if ON_KAFKA
    else {"auto.offset.reset": "earliest", "session.timeout.ms": 6000, "heartbeat.interval.ms": 1000}
)
"""The consumer-group settings docs/kafka-clients.md gives: Tansu holds a JoinGroup for about half the
session timeout, so librdkafka's 45 s default means about 23 s before the first record."""

KCAT_FLAGS = [] if ON_KAFKA else ["-X", "api.version.request=false", "-X", "broker.version.fallback=0.9.0"]
"""What Debian's kcat (librdkafka 2.0.2) needs against Tansu (docs/kafka-clients.md); nothing on Kafka."""


@dataclass(frozen=True)
class Record:
    partition: int
    offset: int
    headers: list[tuple[str, bytes]]
    value: bytes


@dataclass(frozen=True)
class Society:
    bootstrap: str
    name: str
    stored_ids: frozenset[str]
    schema: dict[str, Any]

    @property
    def events_topic(self) -> str:
        return topic_name(self.name, Role.EVENTS)


@pytest.fixture(scope="module")
def society(broker: str, tmp_path_factory: pytest.TempPathFactory) -> Society:
    tmp = tmp_path_factory.mktemp("outside_clients")
    name = "oc" + uuid.uuid4().hex[:10]
    # trim off: the clients below read the events topic from its start after the run
    settings = make_settings(broker, tmp, agents=AGENTS, tick_seconds=TICK_SECONDS, trim=False)
    with running_stack(settings, name) as stack:
        run_ticks(stack, TICKS)
        stored = sql(stack, f"SELECT toString(event_id) FROM events WHERE society = '{name}'")
    cli = Path(sys.executable).with_name("society")
    out = subprocess.run([str(cli), "schema"], capture_output=True, text=True, check=True, timeout=120)
    return Society(broker, name, frozenset(str(r[0]) for r in stored), json.loads(out.stdout))


def _consume(consumer: Consumer, partitions: int, start: Callable[[], None]) -> list[Record]:
    """Records until every one of ``partitions`` partitions reported its end (partition EOF)."""
    start()
    records: list[Record] = []
    at_end: set[int] = set()
    deadline = time.monotonic() + READ_DEADLINE_S
    try:
        while len(at_end) < partitions:
            assert time.monotonic() < deadline, f"only partitions {sorted(at_end)} reached their end"
            msg: Message | None = consumer.poll(0.2)
            if msg is None:
                continue
            err = msg.error()
            if err is not None:
                assert err.code() == KafkaError._PARTITION_EOF, str(err)
                at_end.add(int(msg.partition() or 0))
                continue
            records.append(
                Record(int(msg.partition() or 0), int(msg.offset() or 0), _headers(msg), msg.value() or b"")
            )
    finally:
        consumer.close()
    return records


def _headers(msg: Message) -> list[tuple[str, bytes]]:
    raw = msg.headers() or []
    pairs = list(raw.items()) if isinstance(raw, dict) else raw
    return [(k, v.encode() if isinstance(v, str) else (v or b"")) for k, v in pairs]


def _partitions(consumer: Consumer, topic: str) -> int:
    meta = consumer.list_topics(topic, timeout=30)
    parts = meta.topics[topic].partitions
    assert parts, f"{topic} has no partitions"
    return len(parts)


def read_by_assignment(bootstrap: str, topic: str) -> list[Record]:
    """Every record of ``topic``: each partition assigned explicitly from its start, no group."""
    c = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": "unused", "enable.partition.eof": True}
        | {"enable.auto.commit": False}
    )
    n = _partitions(c, topic)
    return _consume(c, n, lambda: c.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(n)]))


def read_by_group(bootstrap: str, topic: str) -> list[Record]:
    """Every record of ``topic`` through a new consumer group with the documented settings."""
    group = f"outside-{uuid.uuid4().hex[:8]}"
    c = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": group, "enable.partition.eof": True}
        | {"enable.auto.commit": False}
        | GROUP_SETTINGS
    )
    n = _partitions(c, topic)
    return _consume(c, n, lambda: c.subscribe([topic]))


def check_events(records: list[Record], society: Society) -> None:
    """Every record is an event that satisfies the contract; together they are what the sink stored."""
    assert len(society.stored_ids) >= 10, "the run made too few events to say anything"
    validator = Draft202012Validator(society.schema)
    ids: list[str] = []
    for r in records:
        if any(k == HEADER_KIND for k, _ in r.headers):
            continue  # a control record, checked apart in check_no_control_records
        event = json.loads(r.value)
        errors = [e.message for e in validator.iter_errors(event)]
        assert not errors, f"partition {r.partition} offset {r.offset}: {errors[:3]}"
        ids.append(str(event["event_id"]))
    assert set(ids) == society.stored_ids


def check_no_control_records(records: list[Record]) -> None:
    """The events topic carries events only: control records (watermarks) go to the marks topic."""
    control = [
        (r.partition, r.offset, r.headers) for r in records if any(k == HEADER_KIND for k, _ in r.headers)
    ]
    assert not control, f"{len(control)} control records on the events topic, first {control[:2]}"


def test_confluent_kafka_by_assignment_and_by_group_read_every_event(society: Society) -> None:
    Draft202012Validator.check_schema(society.schema)
    assigned = read_by_assignment(society.bootstrap, society.events_topic)
    grouped = read_by_group(society.bootstrap, society.events_topic)
    # both ways read the very same records
    assert sorted((r.partition, r.offset, r.value) for r in assigned) == sorted(
        (r.partition, r.offset, r.value) for r in grouped
    )
    check_events(assigned, society)
    check_no_control_records(assigned)


def _kcat() -> str:
    found = shutil.which("kcat")
    if found is None:
        pytest.fail("kcat is missing: `make kcat` installs Debian's kcat (apt-get install kcat)")
    return found


def _kcat_run(args: list[str], env: dict[str, str] | None = None) -> list[dict[str, Any]]:
    out = subprocess.run(
        [_kcat(), *args], capture_output=True, text=True, timeout=READ_DEADLINE_S, env=env, check=False
    )
    assert out.returncode == 0, f"kcat {' '.join(args)} exited {out.returncode}: {out.stderr[-2000:]}"
    return [json.loads(line) for line in out.stdout.splitlines() if line.strip()]


def _kcat_records(lines: list[dict[str, Any]]) -> list[Record]:
    records = []
    for d in lines:
        flat = d.get("headers") or []  # kcat -J: ["name", "value", "name", "value", ...]
        headers = [(str(flat[i]), str(flat[i + 1]).encode()) for i in range(0, len(flat), 2)]
        records.append(Record(int(d["partition"]), int(d["offset"]), headers, str(d["payload"]).encode()))
    return records


def test_debian_kcat_lists_and_reads_every_event_with_the_documented_flags(society: Society) -> None:
    topic = society.events_topic
    base = ["-b", society.bootstrap, *KCAT_FLAGS]
    (meta,) = _kcat_run([*base, "-L", "-J", "-t", topic])
    (listed,) = meta["topics"]
    assert listed["topic"] == topic
    assert len(listed["partitions"]) == len(read_partitions(society))
    # -o 0, not -o beginning: that needs ListOffsets v0, which this broker answers without its offsets
    records = _kcat_records(_kcat_run([*base, "-C", "-t", topic, "-o", "0", "-e", "-q", "-J"]))
    check_events(records, society)
    check_no_control_records(records)
    assigned = read_by_assignment(society.bootstrap, topic)
    assert sorted((r.partition, r.offset) for r in records) == sorted(
        (r.partition, r.offset) for r in assigned
    )


def read_partitions(society: Society) -> list[int]:
    c = Consumer({"bootstrap.servers": society.bootstrap, "group.id": "unused"})
    try:
        return list(range(_partitions(c, society.events_topic)))
    finally:
        c.close()


def test_kcat_with_a_newer_librdkafka_reads_every_event_through_a_group(
    society: Society, tmp_path: Path
) -> None:
    """Debian's kcat on confluent-kafka's librdkafka (2.x, the one the wheel ships): no protocol flags,
    ``-o beginning`` and ``-G`` work."""
    import confluent_kafka

    libs = Path(confluent_kafka.__file__).resolve().parents[1] / "confluent_kafka.libs"
    (lib,) = libs.glob("librdkafka*.so*")
    (tmp_path / "librdkafka.so.1").symlink_to(lib)
    env = os.environ | {"LD_LIBRARY_PATH": str(tmp_path)}
    group = f"kcat-{uuid.uuid4().hex[:8]}"
    settings = [f"{k}={v}" for k, v in GROUP_SETTINGS.items()]
    args = ["-b", society.bootstrap, *[x for s in settings for x in ("-X", s)], "-G", group]
    records = _kcat_records(_kcat_run([*args, society.events_topic, "-e", "-q", "-J"], env=env))
    check_events(records, society)
    check_no_control_records(records)


DOC = Path(__file__).resolve().parents[2] / "docs" / "kafka-clients.md"
DOC_FENCE = re.compile(r"^```(\w*)[^\n]*\n(.*?)^```[ \t]*$", re.M | re.S)
DOC_BLOCKS = [
    (m.group(1), m.group(2), DOC.read_text().count("\n", 0, m.start()) + 1)
    for m in DOC_FENCE.finditer(DOC.read_text())
    if m.group(1) in ("python", "sh")
]
TANSU_ONLY = "api.version.request=false"
"""The page's block for Debian's kcat against Tansu (protocol of Kafka 0.9): the page says it is Tansu's."""
KCAT_GROUP_S = 30.0
"""``kcat -G`` (the page's last command) consumes until stopped: it runs this long, then is stopped."""


@pytest.mark.parametrize(
    ("lang", "text", "line"),
    [b for b in DOC_BLOCKS if not (ON_KAFKA and TANSU_ONLY in b[1])],
    ids=lambda v: str(v) if isinstance(v, int) else None,
)
def test_the_page_s_blocks_run_as_written(society: Society, lang: str, text: str, line: int) -> None:
    """docs/kafka-clients.md's python and sh blocks as written, with the society's address for
    ``127.0.0.1:PORT`` and its events topic for ``society.demo.events`` (what a reader substitutes). The
    page's last command, a kcat group consumer, runs until stopped: it must have printed events by then."""
    body = text.replace("127.0.0.1:PORT", society.bootstrap).replace(
        "society.demo.events", society.events_topic
    )
    repo = DOC.parents[1]
    if lang == "python":
        argv = [sys.executable, "-c", body]
    else:
        argv = ["timeout", "--signal=INT", str(KCAT_GROUP_S), "bash", "-e", "-o", "pipefail", "-c", body]
    done = subprocess.run(
        argv, cwd=repo, capture_output=True, text=True, timeout=READ_DEADLINE_S, check=False
    )
    consumed_until_stopped = " -G " in body and done.returncode == 124
    said = f"{done.stdout[-2000:]}\n{done.stderr[-2000:]}"
    assert done.returncode == 0 or consumed_until_stopped, (
        f"kafka-clients.md:{line} exited {done.returncode}: {said}"
    )
    if lang == "sh":
        assert society.name in done.stdout  # the events it read name their society
