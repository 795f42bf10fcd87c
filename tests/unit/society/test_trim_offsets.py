"""The trimmer's arithmetic: the offset below which each partition's records may go.

Expected values are worked out by hand from the rules (module docstring of ``society.trim``): the lowest
offset any reader still needs, the last ``FEED_KEEP_RECORDS`` of each feeds partition, one record kept below
the sink's committed offset, nothing trimmed where a reader has no committed offset, and the rebuild topics
only with ``streams.snapshots.needed_offsets``.
"""

from __future__ import annotations

from aiokafka import TopicPartition

from molt_society.runtime.settings import Settings
from molt_society.society.trim import FEED_KEEP_RECORDS, Readings, plan, trim_enabled, trim_point

S = "s1"


def tp(role: str, partition: int = 0) -> TopicPartition:
    return TopicPartition(f"society.{S}.{role}", partition)


def test_trim_point_is_the_lowest_offset_any_reader_needs() -> None:
    assert trim_point([40, 25, 31], 50) == 25
    assert trim_point([40], 50) == 40


def test_a_reader_without_committed_offset_means_nothing_goes() -> None:
    assert trim_point([40, None], 50) is None
    assert trim_point([None], 50) is None
    assert trim_point([], 50) is None  # nobody said what it needs


def test_keep_last_keeps_the_newest_records() -> None:
    assert trim_point([], 100, keep_last=8) == 92
    assert trim_point([], 8, keep_last=8) is None  # nothing older than the newest 8
    assert trim_point([], 3, keep_last=8) is None
    assert trim_point([], None, keep_last=8) is None  # high watermark unknown
    assert trim_point([50], 100, keep_last=8) == 50  # a reader further behind wins


def test_never_above_the_high_watermark_and_nothing_at_zero() -> None:
    assert trim_point([70], 60) == 60
    assert trim_point([0, 10], 60) is None


def test_plan_over_a_society() -> None:
    hws = {
        tp("actions", 0): 100,
        tp("actions", 1): 90,
        tp("ticks", 0): 12,
        tp("ticks", 1): 12,
        tp("feeds", 0): FEED_KEEP_RECORDS + 30,
        tp("feeds", 1): 5,
        tp("events", 0): 80,
        tp("metrics", 0): 20,
        tp("deadletter", 0): 3,
        tp("partials", 0): 9,
        TopicPartition(f"society.{S}.aggregate-pending-changelog", 0): 50,  # Faust's: never touched
        TopicPartition("society.other.actions", 0): 100,  # another society: never touched
    }
    committed: dict[str, dict[TopicPartition, int | None]] = {
        f"society.{S}.streams": {tp("actions", 0): 60, tp("actions", 1): 90},
        f"society.{S}.agents": {tp("ticks", 0): 11, tp("ticks", 1): None},
        f"society.{S}.sink": {tp("events", 0): 70, tp("metrics", 0): 20, tp("deadletter", 0): 1},
        f"society.{S}.aggregate": {tp("partials", 0): 9},
    }
    got = plan(S, Readings(hws, committed, rebuild=None))
    assert got == {
        tp("actions", 0): 60,
        tp("actions", 1): 90,
        tp("ticks", 0): 11,  # ticks 1: no committed offset, kept whole
        tp("feeds", 0): 30,  # feeds 1: fewer records than kept
        tp("metrics", 0): 19,  # the sink's last stored record stays (its resume check re-reads it)
        tp("partials", 0): 9,
        # events: no rebuild needs known; deadletter: 1 - 1 = 0, nothing to delete
    }


def test_rebuild_topics_follow_needed_offsets_and_the_sink() -> None:
    hws = {tp("events", 0): 80, tp("events", 1): 80, tp("marks", 0): 40, tp("marks", 1): 40}
    committed: dict[str, dict[TopicPartition, int | None]] = {
        f"society.{S}.sink": {tp("events", 0): 70, tp("events", 1): 30},
    }
    rebuild = {f"society.{S}.events": {0: 50, 1: 60}, f"society.{S}.marks": {0: 33}}
    got = plan(S, Readings(hws, committed, rebuild))
    assert got == {
        tp("events", 0): 50,  # the rebuild needs more than the sink
        tp("events", 1): 29,  # the sink is further behind (one stored record kept)
        tp("marks", 0): 33,  # marks 1: the rebuild said nothing, kept whole
    }


def test_trim_is_on_by_default_only_with_the_local_kafka() -> None:
    """The bundled Tansu cannot delete records and a Kafka cluster has its own retention: there only
    ``SOCIETY_TRIM=true`` starts the trimmer; the local Apache Kafka keeps every record until trimmed, so
    there it is on unless ``SOCIETY_TRIM=false``."""
    assert trim_enabled(Settings(kafka_bootstrap=None, broker="tansu", trim=True)) is True
    assert trim_enabled(Settings(kafka_bootstrap=None, broker="tansu")) is False
    assert trim_enabled(Settings(kafka_bootstrap="kafka:9092", broker="tansu")) is False
    assert trim_enabled(Settings(kafka_bootstrap="kafka:9092", broker="kafka")) is False
    assert trim_enabled(Settings(kafka_bootstrap="kafka:9092", trim=True)) is True
    assert trim_enabled(Settings(kafka_bootstrap=None, broker="tansu", trim=False)) is False
    assert trim_enabled(Settings(kafka_bootstrap=None, broker="kafka")) is True
    assert trim_enabled(Settings(kafka_bootstrap=None, broker="kafka", trim=False)) is False
