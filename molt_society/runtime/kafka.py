"""The one place Kafka clients are made: named profiles, consumer-group ids, the watermark headers.

Every process builds its aiokafka clients here (``grep AIOKafkaConsumer(`` finds only this module), so a
setting that must hold everywhere (acks=all, no auto-commit, the group session the local broker needs)
is written once (and every producer and consumer asks its bootstrap servers again when no broker it
knows answers: ``runtime.rebootstrap``). A profile is a set of aiokafka keyword arguments; a caller adds
what is its own (``fetch_max_wait_ms`` from its settings, a ``client_id``) as overrides.

Profiles:

- producers: ``control`` (ticks and markers: acks=all, no linger), ``actions`` (agents: no linger, 1 MiB
  batches), ``bulk`` (the stream worker, replays, benchmarks: also 8 MiB requests), ``small`` (a few events,
  5 ms linger). No linger where a simulated tick waits on the send: a batch still gathers what is sent
  before the sender's next turn of the event loop, and the 5 ms the agents' actions and the stream
  worker's feed each waited were a third of a tick's round trip (BENCHMARKS.md, aging).
- consumers: ``reader`` (no group, assigned partitions, from the earliest record), ``member`` (a group
  member committing by hand, with the short session of ``Settings.group_session_timeout_ms``), ``offsets``
  (reads a group's committed offsets without joining it), ``snapshot`` (no group, large fetches, no
  offset reset: a missing offset is an error).

Also here: ``group_id`` (``society.<name>.<role>``, the one spelling of a group), ``member_session`` (the
session, heartbeat and rebalance timeouts of a group member), ``Rebalance`` (the one rebalance listener of
the agent worker, the stream processor and the sink), ``WATERMARK_HEADERS`` / ``is_watermark`` /
``send_watermark`` (a watermark is a control record marked by a header, sent to every partition).

Idempotence: the local Tansu broker has none, so a producer asks for it only where ``settings.idempotent``
says (the local Apache Kafka, or ``SOCIETY_IDEMPOTENT_PRODUCER=true`` for a cluster).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Collection
from typing import Any, Literal

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, ConsumerRebalanceListener, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient

from molt_society.runtime.rebootstrap import use_rebootstrap
from molt_society.runtime.record_auth import RecordKeys
from molt_society.runtime.settings import get_settings, idempotent
from molt_society.schemas.topics import HEADER_KIND, KIND_WATERMARK, Role

ProducerProfile = Literal["control", "actions", "bulk", "small"]
ConsumerProfile = Literal["reader", "member", "offsets", "snapshot"]
GroupRole = Literal["agents", "streams", "sink", "aggregate"]
# "aggregate": the metric aggregator's Faust app id, which Faust uses as its consumer group (streams.app,
# society.trim); it has no entry in GROUP_TOPICS (its lag is not reported)

MIB = 1 << 20
METADATA_MAX_AGE_MS = 5_000
"""How old a client's cluster metadata may get: a partition whose leader died is led by another broker of a
cluster once the controller fences the dead one (9 s), and a client learns it at its next metadata
refresh. aiokafka's default (5 min) kept clients retrying the dead broker that long (aiokafka 0.14)."""
SNAPSHOT_FETCH_BYTES = 8 * MIB  # one partition's fetch: a snapshot chunk and its framing fit

PRODUCERS: dict[str, dict[str, Any]] = {
    "control": {"acks": "all", "linger_ms": 0},
    "actions": {"acks": "all", "linger_ms": 0, "max_batch_size": MIB},
    "bulk": {"acks": "all", "linger_ms": 0, "max_batch_size": MIB, "max_request_size": 8 * MIB},
    "small": {"acks": "all", "linger_ms": 5},
}

CONSUMERS: dict[str, dict[str, Any]] = {
    "reader": {
        "group_id": None,
        "enable_auto_commit": False,
        "auto_offset_reset": "earliest",
        "fetch_max_wait_ms": 50,
    },
    "member": {"enable_auto_commit": False, "auto_offset_reset": "earliest"},
    "offsets": {"enable_auto_commit": False},
    "snapshot": {
        "group_id": None,
        "enable_auto_commit": False,
        "auto_offset_reset": "none",
        "fetch_max_wait_ms": 50,
        "max_poll_records": 10_000,
        "max_partition_fetch_bytes": SNAPSHOT_FETCH_BYTES,
        "fetch_max_bytes": SNAPSHOT_FETCH_BYTES * 4,
    },
}

# which topic each consumer group reads (its lag is measured on that topic)
GROUP_TOPICS: dict[GroupRole, Role] = {"streams": Role.ACTIONS, "sink": Role.EVENTS, "agents": Role.TICKS}


def group_id(society: str, role: GroupRole) -> str:
    """The consumer group of ``role`` in ``society``: ``society.<name>.<role>``."""
    return f"society.{society}.{role}"


def session(timeout_ms: int) -> dict[str, Any]:
    """Group-session settings for a ``member``: heartbeats six times a session, never under 100 ms.

    The local broker holds a group's first join for half the session, so a short one starts a stack
    sooner; the members give their event loop a turn often enough to keep it (see ``Settings``)."""
    return {"session_timeout_ms": timeout_ms, "heartbeat_interval_ms": max(100, timeout_ms // 6)}


REBALANCE_TIMEOUT_MIN_MS = 10_000


def member_session(timeout_ms: int) -> dict[str, Any]:
    """``session`` plus a rebalance timeout of at least ``REBALANCE_TIMEOUT_MIN_MS``: a member whose revoke
    has work to finish (commit a batch, flush what is pending) gets that long to rejoin. Used by the agent
    worker (``agents.worker``) and the stream worker (``streams.processor``)."""
    return {**session(timeout_ms), "rebalance_timeout_ms": max(REBALANCE_TIMEOUT_MIN_MS, timeout_ms)}


class SigningProducer(AIOKafkaProducer):  # type: ignore[misc]
    """A producer that signs every record of a society topic (``runtime.record_auth``): the records the
    stack's readers accept as the stack's own."""

    def __init__(self, *, keys: RecordKeys, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.keys = keys

    async def send(
        self,
        topic: str,
        value: bytes | None = None,
        key: bytes | None = None,
        partition: int | None = None,
        timestamp_ms: int | None = None,
        headers: list[tuple[str, bytes]] | None = None,
    ) -> Any:
        signed = self.keys.headers(topic, key, value, headers)
        return await super().send(
            topic, value, key=key, partition=partition, timestamp_ms=timestamp_ms, headers=signed or None
        )


def signed_headers(
    producer: AIOKafkaProducer, topic: str, key: bytes | None, value: bytes, headers: list[tuple[str, bytes]]
) -> list[tuple[str, bytes]]:
    """``headers`` with the record's signature when ``producer`` signs (``SigningProducer``), for records
    appended to a batch by hand (``runtime.batch_out``)."""
    if isinstance(producer, SigningProducer):
        return producer.keys.headers(topic, key, value, headers)
    return headers


def producer(
    bootstrap: str, profile: ProducerProfile = "bulk", *, keys: RecordKeys | None = None, **overrides: Any
) -> SigningProducer:
    """A producer of ``profile`` (not started); idempotent where the broker has it (``settings.idempotent``:
    the local Apache Kafka), so that a send retried over a broker's restart is stored once. It signs the
    records of society topics with the keys under ``keys`` (default: the settings' state folder)."""
    kwargs = {"metadata_max_age_ms": METADATA_MAX_AGE_MS, **PRODUCERS[profile], **overrides}
    settings = get_settings()
    if idempotent(settings):
        kwargs.setdefault("enable_idempotence", True)
    made = SigningProducer(
        keys=keys if keys is not None else RecordKeys(settings.state_dir),
        bootstrap_servers=bootstrap,
        **kwargs,
    )
    use_rebootstrap(made)
    return made


def consumer(
    bootstrap: str,
    profile: ConsumerProfile = "reader",
    *,
    group: str | None = None,
    **overrides: Any,
) -> AIOKafkaConsumer:
    """A consumer of ``profile`` (not started); ``group`` is required by ``member`` and ``offsets``."""
    if profile in ("member", "offsets") and group is None:
        raise ValueError(f"a {profile!r} consumer needs a group id")
    if profile not in ("member", "offsets") and group is not None:
        raise ValueError(f"a {profile!r} consumer belongs to no group (got {group!r})")
    kwargs: dict[str, Any] = {"metadata_max_age_ms": METADATA_MAX_AGE_MS, **CONSUMERS[profile], **overrides}
    if group is not None:
        kwargs["group_id"] = group
    made = AIOKafkaConsumer(bootstrap_servers=bootstrap, **kwargs)
    use_rebootstrap(made)
    return made


def admin(bootstrap: str, timeout_s: float = 15.0) -> AIOKafkaAdminClient:
    """An admin client (not started) whose requests time out after ``timeout_s``."""
    return AIOKafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=int(timeout_s * 1000))


WATERMARK_HEADERS: list[tuple[str, bytes]] = [(HEADER_KIND, KIND_WATERMARK)]


def is_watermark(headers: Any) -> bool:
    """True when a record's headers mark it as a watermark (a control record, not an event)."""
    if not headers:  # an event's record: most of them
        return False
    return any(k == HEADER_KIND and v == KIND_WATERMARK for k, v in headers)


async def send_watermark(
    producer: AIOKafkaProducer, topic: str, value: bytes, partitions: int
) -> list[Awaitable[Any]]:
    """Send the watermark record ``value`` to each of ``partitions`` partitions of ``topic``, in order (every
    reader of a partition must see it); the futures of the sends. Used by the agent worker."""
    return [
        await producer.send(topic, value, partition=q, headers=WATERMARK_HEADERS) for q in range(partitions)
    ]


OnPartitions = Callable[[Collection[TopicPartition]], Awaitable[None]]
"""A rebalance callback: it gets the partitions revoked or assigned (aiokafka passes a set)."""


class Rebalance(ConsumerRebalanceListener):  # type: ignore[misc]
    """A rebalance listener that hands revoked and assigned partitions to two coroutines (aiokafka wants a
    ``ConsumerRebalanceListener`` subclass). Used by the agent worker, the stream worker and the sink."""

    def __init__(self, on_revoked: OnPartitions, on_assigned: OnPartitions) -> None:
        self._on_revoked = on_revoked
        self._on_assigned = on_assigned

    async def on_partitions_revoked(self, revoked: Collection[TopicPartition]) -> None:
        await self._on_revoked(revoked)

    async def on_partitions_assigned(self, assigned: Collection[TopicPartition]) -> None:
        await self._on_assigned(assigned)
