"""The topics of a society: name, key, partitions, and who writes and reads each.

Every society has its own set of topics, ``society.<name>.<role>``, so societies never mix and a replay
into a new society starts from empty topics. The table is also rendered in docs/topics.md.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

HEADER_KIND = "society-kind"
"""Header that marks a control record (``watermark``) among events; absent on events."""
KIND_WATERMARK = b"watermark"

DLQ_REASON = "dlq-reason"
DLQ_CODE = "dlq-code"
DLQ_TOPIC = "dlq-origin-topic"
DLQ_PARTITION = "dlq-origin-partition"
DLQ_OFFSET = "dlq-origin-offset"
DLQ_KEY = "dlq-origin-key"
DLQ_ORIGINAL_BYTES = "dlq-original-bytes"
"""Size of the rejected value; the dead letter keeps at most its first MiB (``DLQ_TRUNCATED``: true)."""
DLQ_TRUNCATED = "dlq-truncated"


class Role(StrEnum):
    ACTIONS = "actions"
    EVENTS = "events"
    DEADLETTER = "deadletter"
    TICKS = "ticks"
    FEEDS = "feeds"
    PARTIALS = "partials"
    METRICS = "metrics"


@dataclass(frozen=True)
class TopicSpec:
    role: Role
    key: str
    partitions: str
    writers: str
    readers: str
    value: str


TOPIC_SPECS: tuple[TopicSpec, ...] = (
    TopicSpec(
        Role.ACTIONS,
        "thread (post id) for post/comment/vote; agent:<id>; submolt:<name>",
        "P (SOCIETY_PARTITIONS, default 4)",
        "agent workers, importers/replay, any producer",
        "stream workers (validation, group society.<name>.streams)",
        "one event (JSON) per record, or a watermark control record (header society-kind=watermark)",
    ),
    TopicSpec(
        Role.EVENTS,
        "same as actions (same partition as the action)",
        "P",
        "stream workers: valid events, deduplicated, plus forwarded watermarks",
        "sink (group society.<name>.sink); stream workers rebuilding partition state",
        "the accepted event, byte for byte as the agent sent it",
    ),
    TopicSpec(
        Role.DEADLETTER,
        "original key",
        "1",
        "stream workers",
        "sink (dead_letters table), `society status`",
        "the rejected bytes (at most the first MiB); headers dlq-reason, dlq-code,"
        " dlq-origin-topic/-partition/-offset/-key, dlq-original-bytes, dlq-truncated",
    ),
    TopicSpec(
        Role.TICKS,
        "shard number",
        "S (SOCIETY_SHARDS, default 8)",
        "the clock (`society run`)",
        "agent workers (group society.<name>.agents): a shard is a partition",
        "tick control record {tick, sim_time, final}",
    ),
    TopicSpec(
        Role.FEEDS,
        "events partition number",
        "P",
        "stream workers: per partition and tick, top posts per submolt by new and hot",
        "agent workers and the clock (all partitions, no group)",
        "feed snapshot {tick, partition, submolts{name: {new, hot}}}",
    ),
    TopicSpec(
        Role.PARTIALS,
        "window start",
        "1",
        "stream workers: per partition and closed event-time window",
        "metric aggregator (Faust agent, group society.<name>.aggregate)",
        "window partial: histograms, interaction edges, counts",
    ),
    TopicSpec(
        Role.METRICS,
        "metric name",
        "1",
        "metric aggregator",
        "sink (metrics table), dashboards",
        "metric event {metric_id, metric, window_start, window_end, dim, value}",
    ),
)


def topic_name(society: str, role: Role) -> str:
    """The topic of ``role`` in ``society``."""
    return f"society.{society}.{role.value}"


def topics_markdown() -> str:
    """The topic table as Markdown."""
    lines = [
        "| topic | key | partitions | written by | read by | value |",
        "|---|---|---|---|---|---|",
    ]
    for s in TOPIC_SPECS:
        lines.append(
            f"| `society.<name>.{s.role.value}` | {s.key} | {s.partitions} "
            f"| {s.writers} | {s.readers} | {s.value} |"
        )
    return "\n".join(lines) + "\n"
