"""The one Kafka client factory (``runtime.kafka``): each profile gives the aiokafka configuration it
promises, group ids and watermark headers are the ones the stack has always used, and no product module
builds a Kafka client itself.

Clients are built and never started (no broker): their configuration is read back from the attributes
aiokafka keeps it in (``_group_id``, ``_sender._acks``, ...).
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Awaitable, Callable, Collection
from pathlib import Path
from typing import Any, TypeVar

import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient

from molt_society.runtime import kafka
from molt_society.schemas.topics import HEADER_EVENTS_OFFSET, HEADER_KIND, KIND_WATERMARK, Role
from molt_society.streams import snapshots
from molt_society.streams.processor import mark_headers

REPO = Path(__file__).resolve().parents[3]
BOOTSTRAP = "127.0.0.1:9"  # never connected to
MIB = 1 << 20
T = TypeVar("T")


def _built(make: Callable[[], T], read: Callable[[T], dict[str, Any]]) -> dict[str, Any]:
    """``read`` of a client ``make`` builds inside a running loop (aiokafka needs one); closed unstarted."""

    async def go() -> dict[str, Any]:
        client = make()
        try:
            return read(client)
        finally:
            stop = getattr(client, "stop", None) or client.close  # type: ignore[attr-defined]
            await stop()

    return asyncio.run(go())


def _producer(client: AIOKafkaProducer) -> dict[str, Any]:
    acc = client._message_accumulator
    return {
        "acks": client._sender._acks,
        "linger_ms": round(acc._linger_time * 1000),
        "max_batch_size": acc._batch_size,
        "max_request_size": client._max_request_size,
        "client_id": client.client._client_id,
    }


CONSUMER_FIELDS = (
    "group_id",
    "enable_auto_commit",
    "auto_offset_reset",
    "fetch_max_wait_ms",
    "max_poll_records",
    "max_partition_fetch_bytes",
    "fetch_max_bytes",
    "session_timeout_ms",
    "heartbeat_interval_ms",
    "rebalance_timeout_ms",
    "max_poll_interval_ms",
    "request_timeout_ms",
)


def _consumer(client: AIOKafkaConsumer) -> dict[str, Any]:
    out = {name: getattr(client, f"_{name}") for name in CONSUMER_FIELDS}
    out["client_id"] = client._client._client_id
    return out


def producer_config(profile: kafka.ProducerProfile, **overrides: Any) -> dict[str, Any]:
    return _built(lambda: kafka.producer(BOOTSTRAP, profile, **overrides), _producer)


def consumer_config(
    profile: kafka.ConsumerProfile, group: str | None = None, **overrides: Any
) -> dict[str, Any]:
    return _built(lambda: kafka.consumer(BOOTSTRAP, profile, group=group, **overrides), _consumer)


# ------------------------------------------------------------------------------------------ producers
@pytest.mark.parametrize(
    ("profile", "linger_ms", "batch", "request_size"),
    [
        ("control", 0, 16384, MIB),  # aiokafka's default batch and request sizes
        ("actions", 0, MIB, MIB),
        ("bulk", 0, MIB, 8 * MIB),
        ("small", 5, 16384, MIB),
    ],
)
def test_producer_profiles(
    profile: kafka.ProducerProfile, linger_ms: int, batch: int, request_size: int
) -> None:
    got = producer_config(profile)
    assert got["acks"] == -1  # acks="all", on every profile
    sizes = (got["linger_ms"], got["max_batch_size"], got["max_request_size"])
    assert sizes == (linger_ms, batch, request_size)


def test_producer_overrides_win_over_the_profile() -> None:
    got = producer_config("bulk", linger_ms=10, client_id="replay")
    assert (got["linger_ms"], got["client_id"], got["max_request_size"]) == (10, "replay", 8 * MIB)
    assert producer_config("small", max_request_size=16 * MIB)["max_request_size"] == 16 * MIB


# ------------------------------------------------------------------------------------------ consumers
def test_reader_profile_has_no_group_and_starts_at_the_earliest_record() -> None:
    got = consumer_config("reader")
    assert got["group_id"] is None
    assert got["enable_auto_commit"] is False
    assert got["auto_offset_reset"] == "earliest"
    assert got["fetch_max_wait_ms"] == 50


def test_member_profile_with_the_group_session_of_the_workers() -> None:
    group = kafka.group_id("s1", "streams")
    got = consumer_config("member", group, fetch_max_wait_ms=20, **kafka.member_session(3000))
    assert got["group_id"] == "society.s1.streams"
    assert (got["enable_auto_commit"], got["auto_offset_reset"], got["fetch_max_wait_ms"]) == (
        False,
        "earliest",
        20,
    )
    assert (got["session_timeout_ms"], got["heartbeat_interval_ms"], got["rebalance_timeout_ms"]) == (
        3000,
        500,
        10_000,
    )


def test_sessions() -> None:
    assert kafka.session(3000) == {"session_timeout_ms": 3000, "heartbeat_interval_ms": 500}
    assert kafka.session(300)["heartbeat_interval_ms"] == 100  # never under 100 ms
    assert kafka.member_session(3000)["rebalance_timeout_ms"] == 10_000
    assert kafka.member_session(45_000) == {
        "session_timeout_ms": 45_000,
        "heartbeat_interval_ms": 7500,
        "rebalance_timeout_ms": 45_000,
    }


def test_offsets_profile_reads_a_group_without_committing() -> None:
    got = consumer_config("offsets", "society.s1.sink", request_timeout_ms=10_000)
    assert (got["group_id"], got["enable_auto_commit"], got["request_timeout_ms"]) == (
        "society.s1.sink",
        False,
        10_000,
    )


def test_snapshot_profile_is_the_snapshot_reader() -> None:
    got = consumer_config("snapshot")
    assert got["group_id"] is None
    assert got["enable_auto_commit"] is False
    assert got["auto_offset_reset"] == "none"  # a position trimmed away raises
    assert (got["fetch_max_wait_ms"], got["max_poll_records"]) == (50, 10_000)
    assert (got["max_partition_fetch_bytes"], got["fetch_max_bytes"]) == (8 * MIB, 32 * MIB)
    assert _built(lambda: snapshots.reader(BOOTSTRAP), _consumer) == got


@pytest.mark.parametrize("profile", ["member", "offsets"])
def test_a_group_member_without_a_group_is_refused(profile: kafka.ConsumerProfile) -> None:
    with pytest.raises(ValueError, match="needs a group id"):
        kafka.consumer(BOOTSTRAP, profile)


@pytest.mark.parametrize("profile", ["reader", "snapshot"])
def test_a_groupless_profile_with_a_group_is_refused(profile: kafka.ConsumerProfile) -> None:
    with pytest.raises(ValueError, match="belongs to no group"):
        kafka.consumer(BOOTSTRAP, profile, group="society.s1.sink")


def test_admin_request_timeout() -> None:
    def read(admin: AIOKafkaAdminClient) -> dict[str, Any]:
        return {"request_timeout_ms": admin._request_timeout_ms}

    assert _built(lambda: kafka.admin(BOOTSTRAP), read) == {"request_timeout_ms": 15_000}
    assert _built(lambda: kafka.admin(BOOTSTRAP, 2.5), read) == {"request_timeout_ms": 2500}


# ------------------------------------------------------------------------------- groups and watermarks
def test_group_ids() -> None:
    assert kafka.group_id("demo", "agents") == "society.demo.agents"
    assert kafka.group_id("demo", "streams") == "society.demo.streams"
    assert kafka.group_id("demo", "sink") == "society.demo.sink"
    assert kafka.group_id("demo", "aggregate") == "society.demo.aggregate"  # the Faust app id
    assert kafka.GROUP_TOPICS == {"streams": Role.ACTIONS, "sink": Role.EVENTS, "agents": Role.TICKS}
    assert list(kafka.GROUP_TOPICS) == ["streams", "sink", "agents"]  # the order `society status` prints


def test_is_watermark() -> None:
    assert kafka.WATERMARK_HEADERS == [(HEADER_KIND, KIND_WATERMARK)]
    assert kafka.is_watermark(kafka.WATERMARK_HEADERS)
    assert kafka.is_watermark([("other", b"1"), (HEADER_KIND, KIND_WATERMARK)])
    assert kafka.is_watermark(mark_headers(7))
    assert not kafka.is_watermark(None)
    assert not kafka.is_watermark([])
    assert not kafka.is_watermark([(HEADER_KIND, b"event")])
    assert not kafka.is_watermark([("other", KIND_WATERMARK)])
    assert mark_headers(7) == [(HEADER_KIND, KIND_WATERMARK), (HEADER_EVENTS_OFFSET, b"7")]


class _Recorder:
    def __init__(self) -> None:
        self.sent: list[tuple[str, bytes, int, Any]] = []

    async def send(self, topic: str, value: bytes, *, partition: int, headers: Any) -> Awaitable[Any]:
        self.sent.append((topic, value, partition, headers))
        done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        done.set_result(None)
        return done


def test_send_watermark_reaches_every_partition_in_order() -> None:
    async def go() -> tuple[_Recorder, int]:
        rec = _Recorder()
        futures = await kafka.send_watermark(rec, "society.s.actions", b"mark", 3)
        await asyncio.gather(*futures)
        return rec, len(futures)

    rec, n = asyncio.run(go())
    assert n == 3
    assert rec.sent == [("society.s.actions", b"mark", q, kafka.WATERMARK_HEADERS) for q in range(3)]


def test_rebalance_listener_hands_partitions_on() -> None:
    seen: list[tuple[str, Collection[TopicPartition]]] = []

    async def revoked(tps: Collection[TopicPartition]) -> None:
        seen.append(("revoked", tps))

    async def assigned(tps: Collection[TopicPartition]) -> None:
        seen.append(("assigned", tps))

    listener = kafka.Rebalance(revoked, assigned)
    a, b = {TopicPartition("t", 0)}, {TopicPartition("t", 1)}

    async def go() -> None:
        await listener.on_partitions_revoked(a)
        await listener.on_partitions_assigned(b)

    asyncio.run(go())
    assert seen == [("revoked", a), ("assigned", b)]


# ------------------------------------------------------------------------------- the one factory
CONSTRUCTORS = re.compile(r"\bAIOKafka(Consumer|Producer|AdminClient)\(")


def product_folders() -> list[Path]:
    """The layers: the subpackages of ``molt_society``."""
    return sorted(p.parent for p in (REPO / "molt_society").glob("*/__init__.py"))


def test_product_folders_are_known() -> None:
    names = {p.name for p in product_folders()}
    assert {"runtime", "agents", "streams", "sinks", "society", "bench"} <= names


def test_only_the_factory_builds_kafka_clients() -> None:
    factory = (REPO / "molt_society" / "runtime" / "kafka.py").resolve()
    found = [
        f"{path.relative_to(REPO)}:{n}"
        for folder in product_folders()
        for path in sorted(folder.rglob("*.py"))
        if path.resolve() != factory
        for n, line in enumerate(path.read_text().splitlines(), 1)
        if CONSTRUCTORS.search(line)
    ]
    assert found == [], "Kafka clients built outside runtime/kafka.py: " + ", ".join(found)
