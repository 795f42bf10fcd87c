"""Where the sink resumes: after what ClickHouse holds, checked against what the partition delivers.

- On assignment, each partition resumes after ``max(_offset)`` of the rows already stored for it (in its
  table or among the sink's rejects), so rows inserted by a process that died before its commit are not
  inserted again; the deduplication token covers a retry within a process; ``ReplacingMergeTree`` (query
  with ``FINAL``) is the last backstop. This relies on an insert being all or nothing: ClickHouse squashes
  an insert of fewer than ~1M rows (and 256 MiB) into one part, so keep ``sink_batch_rows`` well below
  that. The sink seeks to ``max(_offset)`` itself and drops that record after checking it is the
  one stored there; later fetches must go forward. Anything else is a ``PartitionMismatch``: the broker
  lost or recreated the topic (Tansu keeps topics in memory only) while ClickHouse kept the rows, so new
  records reuse old offsets; the sink stops rather than skip them or let their tokens collide with old ones.
- After a broker loss the society is rebuilt on new topics (``Generation``, ``generation`` > 0, see
  ``society.recover``): rows then
  name their topic ``<topic>@g<generation>``, and the rebuilt history is not stored again.
"""

from __future__ import annotations

from collections.abc import Collection
from typing import Any

from molt_society.runtime.logs import get_logger
from molt_society.runtime.settings import SinkSettings
from molt_society.schemas.control import from_us
from molt_society.sinks.clickhouse import (
    DEAD_LETTER_COLUMNS,
    DEAD_LETTERS_TABLE,
    EVENT_COLUMNS,
    EVENTS_TABLE,
    IDENTITY_SQL,
    METRICS_TABLE,
    Target,
    record_identity,
)
from molt_society.sinks.sink_stats import tp_name
from molt_society.sinks.store import Store

log = get_logger(__name__)

StoredRecord = tuple[int, str, str]
"""The last record stored of a partition: its offset, the table it is in, its identity (``IDENTITY_SQL``)."""

_OCCURRED_AT = EVENT_COLUMNS.index("occurred_at")


class PartitionMismatch(RuntimeError):
    """A partition does not hold what the sink expects: the record at the stored offset is another one, or
    offsets went backwards (the topic was recreated or truncated). The sink stops rather than guess."""


class Generation:
    """After a broker loss (``generation`` > 0): the topic name rows carry, and what is stored already.

    Rows name their topic ``<topic>@g<generation>`` (so offsets and deduplication tokens of the lost topics
    never collide with the new ones); events before ``resume_us`` and events, metrics already stored are
    dropped (counted as ``recovered_skipped``)."""

    def __init__(self, settings: SinkSettings, society: str) -> None:
        self.number = settings.generation
        self.resume_us = settings.resume_us
        self.society = society
        self.resume_at = None if settings.resume_us is None else from_us(settings.resume_us)
        self.stored_events: set[str] = set()
        self.stored_metrics: set[str] = set()

    def stored_topic(self, topic: str) -> str:
        """The ``_topic`` rows of ``topic`` carry: the topic, qualified by its generation after a loss."""
        return topic if self.number == 0 else f"{topic}@g{self.number}"

    def load(self, client: Any) -> None:
        """Ids stored by earlier generations that the rebuilt topics will carry again (ClickHouse thread)."""
        params: dict[str, Any] = {"s": self.society}
        where = ""
        if self.resume_at is not None:
            where = " AND occurred_at >= {t:DateTime64(6, 'UTC')}"
            params["t"] = self.resume_at

        def ids(sql: str) -> set[str]:
            return {str(r[0]) for r in client.query(sql, parameters=params).result_rows}

        self.stored_events = ids("SELECT toString(event_id) FROM events WHERE society = {s:String}" + where)
        self.stored_metrics = ids("SELECT toString(metric_id) FROM metrics WHERE society = {s:String}")
        log.info(
            "sink.generation",
            generation=self.number,
            resume_us=self.resume_us,
            stored_events_after_resume=len(self.stored_events),
            stored_metrics=len(self.stored_metrics),
        )

    def _stored(self, table: str, row: list[Any]) -> bool:
        if table == EVENTS_TABLE:
            early = self.resume_at is not None and row[_OCCURRED_AT] < self.resume_at
            return early or str(row[0]) in self.stored_events
        return table == METRICS_TABLE and str(row[0]) in self.stored_metrics

    def new_rows(
        self, target: Target, rows: list[list[Any]], rejects: list[list[Any]]
    ) -> tuple[list[list[Any]], int]:
        """Rows named by the qualified topic, without what earlier generations stored; and how many were
        dropped. The rejects' topic is qualified in place."""
        kept: list[list[Any]] = []
        topic_at = target.columns.index("_topic")
        for row in rows:
            if self._stored(target.table, row):
                continue
            row[topic_at] = self.stored_topic(row[topic_at])
            kept.append(row)
        reject_topic_at = DEAD_LETTER_COLUMNS.index("_topic")
        for row in rejects:
            row[reject_topic_at] = self.stored_topic(row[reject_topic_at])
        return kept, len(rows) - len(kept)


def resume_point(client: Any, table: str, topic: str, partition: int) -> StoredRecord | None:
    """The highest offset of ``topic:partition`` (its stored name) already stored in ``table`` or among
    the sink's rejects, with that table and the stored row's identity; None when nothing is stored."""
    where = " WHERE _topic = {t:String} AND _partition = {p:UInt32}"
    params = {"t": topic, "p": partition}
    best: tuple[int, str] | None = None
    for name in sorted({table, DEAD_LETTERS_TABLE}):
        result = client.query(f"SELECT count(), max(_offset) FROM {name}{where}", parameters=params)
        count, top = result.result_rows[0]
        if count and (best is None or int(top) > best[0]):
            best = (int(top), name)
    if best is None:
        return None
    offset, name = best
    result = client.query(
        f"SELECT {IDENTITY_SQL[name]} FROM {name}{where} AND _offset = {{o:UInt64}} LIMIT 1",
        parameters={**params, "o": offset},
    )
    return offset, name, str(result.result_rows[0][0])


class Resume:
    """Seeks assigned partitions to what is stored, and checks each fetch of them."""

    def __init__(self, store: Store, generation: Generation, targets: dict[str, Target]) -> None:
        self._store = store
        self._generation = generation
        self._targets = targets
        self._verify: dict[Any, StoredRecord] = {}
        self._next: dict[Any, int] = {}

    async def seek(self, consumer: Any, assigned: Collection[Any]) -> None:
        """Forget earlier partitions; seek each of ``assigned`` to the last record stored of it."""
        self._verify.clear()
        self._next.clear()
        for tp in sorted(assigned, key=tp_name):
            table = self._targets[tp.topic].table
            topic = self._generation.stored_topic(tp.topic)
            stored = await self._store.run(resume_point, table, topic, tp.partition)
            if stored is not None:
                # Re-read the last stored record to check it; checked() drops it, so the first new
                # record handled is max(_offset) + 1.
                consumer.seek(tp, stored[0])
                self._verify[tp] = stored
                self._next[tp] = stored[0]
            log.info(
                "sink.partition_assigned",
                topic=tp.topic,
                partition=tp.partition,
                seek_to=None if stored is None else stored[0] + 1,
            )

    def checked(self, tp: Any, records: list[Any]) -> list[Any]:
        """``records`` of ``tp`` as fetched, checked and without the re-read last stored record.

        The first fetch after a resume must start with the record stored at ``max(_offset)`` (it is
        dropped); later fetches must continue forward. Anything else raises ``PartitionMismatch``.
        """
        first = records[0]
        expected = self._next.get(tp)
        self._next[tp] = records[-1].offset + 1
        check = self._verify.pop(tp, None)
        if check is not None:
            offset, table, identity = check
            if first.offset > offset:
                log.warning(
                    "sink.resume_unverified", partition=tp_name(tp), stored=offset, first=first.offset
                )
                return records
            if first.offset < offset or record_identity(table, first) != identity:
                raise PartitionMismatch(
                    f"{tp_name(tp)}: offset {first.offset} is not the record stored at offset {offset} in"
                    f" {table}; the broker lost or recreated the topic (Tansu keeps topics in memory only)"
                    " while ClickHouse kept the rows: use a new society name or another CLICKHOUSE_URL"
                )
            return records[1:]
        if expected is not None and first.offset < expected:
            raise PartitionMismatch(
                f"{tp_name(tp)}: offset {first.offset} arrived after offset {expected - 1}; offsets went"
                " backwards (the topic was recreated or truncated)"
            )
        return records
