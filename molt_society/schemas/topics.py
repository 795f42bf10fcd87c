"""The topics of a society: name, key, partitions, and who writes and reads each.

Every society has its own set of topics, ``society.<name>.<role>``, so societies never mix and a replay
into a new society starts from empty topics. The table is also rendered in docs/topics.md.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

HEADER_KIND = "society-kind"
"""Header that marks a control record (``watermark``) among actions and on the marks topic; never on an
event: the events topic carries events only."""
KIND_WATERMARK = b"watermark"
HEADER_EVENTS_OFFSET = "society-events-offset"
"""On a marks record: the offset of the events partition the mark applies at (the events partition's next
offset then), so a rebuild interleaves marks and events exactly as the live worker saw them."""

SNAPSHOT_ID = "snapshot-id"
"""Headers of a partition-state snapshot chunk (``streams.snapshots``): which snapshot, which chunk of how
many, and the events and marks offsets the snapshot covers (everything below them is in the state)."""
SNAPSHOT_CHUNK = "snapshot-chunk"
SNAPSHOT_CHUNKS = "snapshot-chunks"
SNAPSHOT_EVENTS_OFFSET = "snapshot-events-offset"
SNAPSHOT_MARKS_OFFSET = "snapshot-marks-offset"

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
    MARKS = "marks"
    SNAPSHOTS = "snapshots"


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
        "agent workers, importers/replay, any producer holding the society's key (header society-sig)",
        "stream workers (validation, group society.<name>.streams)",
        "one event (JSON) per record, or a watermark control record (header society-kind=watermark)",
    ),
    TopicSpec(
        Role.EVENTS,
        "same as actions (same partition as the action)",
        "P",
        "stream workers: valid events, deduplicated (events only, no control records)",
        "sink (group society.<name>.sink); stream workers rebuilding partition state; any Kafka client",
        "the accepted event, byte for byte as the agent sent it",
    ),
    TopicSpec(
        Role.MARKS,
        "none (partition = the events partition)",
        "P",
        "stream workers: every watermark that counted, in the order it was applied",
        "stream workers rebuilding partition state (with events, by offset)",
        "the watermark as received; headers society-kind=watermark and society-events-offset (the events"
        " partition's next offset when the mark applied)",
    ),
    TopicSpec(
        Role.SNAPSHOTS,
        "events partition number (partition = the events partition)",
        "P",
        "stream workers: the state of each owned partition every SOCIETY_SNAPSHOT_EVERY_EVENTS accepted"
        " events or SOCIETY_SNAPSHOT_EVERY_SECONDS",
        "stream workers rebuilding partition state; the trimmer (`streams.snapshots.needed_offsets`)",
        "zlib-compressed partition state in chunks; headers snapshot-id, -chunk, -chunks, -events-offset,"
        " -marks-offset (the offsets it covers)",
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
