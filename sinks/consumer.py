"""The sink: a society's events, metrics and dead letters from Kafka into ClickHouse.

Delivery is at least once, rows are effectively once. The contract, per partition:

- Records are batched per (topic, partition), in offset order. A batch is flushed when it holds
  ``sink_batch_rows`` records, when it is ``sink_batch_seconds`` old, on a rebalance and on stop.
- Flush = one insert per table with ``insert_deduplication_token = "topic:partition:first-last"``, then the
  commit of ``last + 1``. The offset is never committed before the insert returned. A failed insert is
  retried, same batch and same token, with backoff (at most 5 s between tries): data is never skipped.
  A batch holding only watermark control records inserts nothing and still commits.
- On assignment, each partition resumes after ``max(_offset)`` of the rows already stored for it, so
  rows inserted by a process that died before its commit are not inserted again; the token covers a
  retry within a process; ``ReplacingMergeTree`` (query with ``FINAL``) is the last backstop. The resume
  relies on an insert being all or nothing: ClickHouse squashes an insert of fewer than ~1M rows (and
  256 MiB) into one part, so keep ``sink_batch_rows`` well below that.
- To resume, the sink seeks to ``max(_offset)`` itself and drops that record after checking it is the one
  stored there. If the broker lost the topic (Tansu keeps topics in memory only) while ClickHouse kept
  the rows, new records reuse old offsets: the sink then stops with ``PartitionMismatch`` rather than skip
  them or let their tokens collide with old ones.
- Inserts and the seek queries run on one dedicated thread and client. Queries from outside (``POST
  /query``) run on another thread, on a client of their own whose session ClickHouse keeps read-only
  (``warehouse.guard``): a slow, failing or setting-changing query cannot delay, fail or change an
  insert. At most ``query_queue`` of them wait at once; more are answered 503.
- Inserts that keep failing are a failure, not a state to hide: ``GET /health`` reports ``failing`` (since
  when, the error) at the first failed try, and after ``sink_fail_seconds`` the sink exits non-zero so the
  stack restarts it (the batch stays uncommitted: nothing is lost).
- After a broker loss the society is rebuilt on new topics (``generation`` > 0, see ``society.recover``):
  rows then name their topic ``<topic>@g<generation>`` (so offsets and deduplication tokens of the lost
  topics never collide with the new ones), and the rebuilt history is not stored again: events before
  ``resume_us`` and events, metrics already stored are dropped (counted as ``recovered_skipped``).

The sink serves ``POST /query``, ``GET /health`` and the authenticated ``POST /internal/embeddings`` (the
report's vectors; bearer secret in ``<state_dir>/<society>/sink.token``, mode 0600) on 127.0.0.1, behind
the Host/Origin/Content-Type checks of ``runtime.web_guard``, and advertises its URL in
``<state_dir>/<society>/sink.json``, because with chDB no other process can open the data directory.
"""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import ipaddress
import math
import os
import secrets
import time
from collections import deque
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import timedelta
from decimal import Decimal
from pathlib import Path
from typing import Any, TypeVar

import orjson
from aiohttp import web
from aiokafka import AIOKafkaConsumer, ConsumerRebalanceListener
from aiokafka.errors import KafkaError

from molt_society.runtime.logs import get_logger
from molt_society.runtime.settings import Settings
from molt_society.runtime.web_guard import check_bind, guard
from molt_society.schemas.control import from_us
from molt_society.schemas.topics import Role, topic_name
from molt_society.sinks.clickhouse import (
    DEAD_LETTER_COLUMNS,
    DEAD_LETTERS_TABLE,
    EVENT_COLUMNS,
    EVENTS_TABLE,
    IDENTITY_SQL,
    METRIC_COLUMNS,
    METRICS_TABLE,
    RecordLike,
    is_control,
    record_identity,
    rows_for_dead_letters,
    rows_for_events,
    rows_for_metrics,
)
from molt_society.warehouse.client import connect
from molt_society.warehouse.guard import ReadLimits, ReadOnlySession
from molt_society.warehouse.reader import open_session
from molt_society.warehouse.result import QueryError, Refused
from molt_society.warehouse.schema import ensure_schema
from molt_society.warehouse.sink_http import TOKEN_FILE

log = get_logger("sinks.consumer")

T = TypeVar("T")

MAX_BACKOFF_S = 5.0
LATENCY_WINDOW = 1000
"""Number of recent inserts the p99 latency is computed over."""
RETRIES_AFTER_STOP = 3
"""Failed tries of one batch after which a stopping sink gives up (the batch stays uncommitted)."""
MAX_QUERY_BYTES = 1 << 20
"""Largest ``/query`` request body."""
MAX_INTERNAL_BYTES = 64 << 20
"""Largest ``/internal/embeddings`` request body."""
EMBEDDING_DIM_MAX = 4096


@dataclass(frozen=True)
class _Target:
    """Where a topic's records go."""

    table: str
    columns: tuple[str, ...]
    build: Callable[[Sequence[RecordLike], list[list[Any]]], list[list[Any]]]


def _events(records: Sequence[RecordLike], rejects: list[list[Any]]) -> list[list[Any]]:
    return rows_for_events(records, rejects)


def _metrics(records: Sequence[RecordLike], rejects: list[list[Any]]) -> list[list[Any]]:
    return rows_for_metrics(records, rejects)


def _dead_letters(records: Sequence[RecordLike], rejects: list[list[Any]]) -> list[list[Any]]:
    return rows_for_dead_letters(records)


@dataclass
class _Pending:
    """Records of one partition not yet inserted, and when the first of them arrived."""

    records: list[Any] = field(default_factory=list)
    since: float = 0.0


@dataclass
class SinkStats:
    """Counters of one sink process, served by ``GET /health``.

    ``rows`` counts rows this process inserted per table (a deduplicated retry is counted once);
    ``lag`` is ``highwater - position`` per ``topic:partition`` (None until a fetch reported the
    highwater); ``caught_up`` is true when every assigned partition has a known lag of 0 and nothing is
    pending.
    """

    started_at: float = field(default_factory=time.time)
    rows: dict[str, int] = field(
        default_factory=lambda: {EVENTS_TABLE: 0, METRICS_TABLE: 0, DEAD_LETTERS_TABLE: 0}
    )
    records: int = 0
    control_records: int = 0
    rejected: int = 0
    batches: int = 0
    insert_errors: int = 0
    commit_errors: int = 0
    insert_seconds: float = 0.0
    last_insert_ms: float | None = None
    latencies_ms: deque[float] = field(default_factory=lambda: deque(maxlen=LATENCY_WINDOW))
    lag: dict[str, int | None] = field(default_factory=dict)
    committed: dict[str, int] = field(default_factory=dict)
    pending: dict[str, int] = field(default_factory=dict)
    failing_since: float | None = None  # wall time of the first failed try of the batch being retried
    failing_error: str | None = None
    failing_attempts: int = 0
    queries: int = 0
    queries_refused: int = 0
    queries_busy: int = 0
    recovered_skipped: int = 0

    def p99_ms(self) -> float | None:
        if not self.latencies_ms:
            return None
        ordered = sorted(self.latencies_ms)
        return ordered[max(0, math.ceil(0.99 * len(ordered)) - 1)]

    def snapshot(self) -> dict[str, Any]:
        """A JSON-ready copy."""
        total_rows = sum(self.rows.values())
        known = list(self.lag.values())
        return {
            "uptime_s": round(time.time() - self.started_at, 3),
            "rows": dict(self.rows),
            "records": self.records,
            "control_records": self.control_records,
            "rejected": self.rejected,
            "batches": self.batches,
            "insert_errors": self.insert_errors,
            "commit_errors": self.commit_errors,
            "last_insert_ms": self.last_insert_ms,
            "p99_insert_ms": self.p99_ms(),
            "insert_rows_per_s": round(total_rows / self.insert_seconds, 1) if self.insert_seconds else None,
            "lag": dict(self.lag),
            "total_lag": sum(v for v in known if v is not None),
            "committed": dict(self.committed),
            "pending": dict(self.pending),
            "caught_up": bool(known) and all(v == 0 for v in known) and not any(self.pending.values()),
            "failing": None
            if self.failing_since is None
            else {
                "since": self.failing_since,
                "seconds": round(time.time() - self.failing_since, 3),
                "error": self.failing_error,
                "attempts": self.failing_attempts,
            },
            "queries": {"served": self.queries, "refused": self.queries_refused, "busy": self.queries_busy},
            "recovered_skipped": self.recovered_skipped,
        }


class PartitionMismatch(RuntimeError):
    """A partition does not hold what the sink expects: the record at the stored offset is another one, or
    offsets went backwards (the topic was recreated or truncated). The sink stops rather than guess."""


class _Stopping(Exception):
    """A batch could not be inserted and the sink is stopping: leave it uncommitted."""


class InsertsFailing(RuntimeError):
    """Inserts kept failing for ``sink_fail_seconds``: the sink exits (uncommitted) to be restarted."""


def _json_default(value: Any) -> Any:
    if isinstance(value, bytes | bytearray | memoryview):
        return bytes(value).decode("utf-8", errors="replace")
    if isinstance(value, Decimal):
        return float(value)
    if isinstance(value, timedelta):
        return value.total_seconds()
    if isinstance(value, set | frozenset):
        return list(value)
    if isinstance(value, ipaddress.IPv4Address | ipaddress.IPv6Address):
        return str(value)
    return str(value)


def dumps_json(value: Any) -> bytes:
    """JSON of query results: datetimes ISO 8601 (UTC with Z), UUIDs as strings, bytes decoded, NaN null."""
    return orjson.dumps(
        value,
        default=_json_default,
        option=orjson.OPT_NON_STR_KEYS | orjson.OPT_NAIVE_UTC | orjson.OPT_UTC_Z | orjson.OPT_SERIALIZE_NUMPY,
    )


def _tp_name(tp: Any) -> str:
    return f"{tp.topic}:{tp.partition}"


class _Listener(ConsumerRebalanceListener):  # type: ignore[misc]
    def __init__(self, sink: ClickHouseSink) -> None:
        self._sink = sink

    async def on_partitions_revoked(self, revoked: list[Any]) -> None:
        await self._sink._on_revoked(revoked)

    async def on_partitions_assigned(self, assigned: list[Any]) -> None:
        await self._sink._on_assigned(assigned)


class ClickHouseSink:
    """Consumes ``society.<name>.{events,metrics,deadletter}`` into ClickHouse; see the module docstring."""

    def __init__(self, settings: Settings, bootstrap: str, society: str) -> None:
        self.settings = settings
        self.bootstrap = bootstrap
        self.society = society
        self.stats = SinkStats()
        self.url: str | None = None
        self.group_id = f"society.{society}.sink"
        self._targets: dict[str, _Target] = {
            topic_name(society, Role.EVENTS): _Target(EVENTS_TABLE, EVENT_COLUMNS, _events),
            topic_name(society, Role.METRICS): _Target(METRICS_TABLE, METRIC_COLUMNS, _metrics),
            topic_name(society, Role.DEADLETTER): _Target(
                DEAD_LETTERS_TABLE, DEAD_LETTER_COLUMNS, _dead_letters
            ),
        }
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="clickhouse")
        self._client: Any = None
        # queries from outside: their own thread, client and read-only session (never the insert path)
        self._reader_executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="clickhouse-reader")
        self._reader: ReadOnlySession | None = None
        self._queries_waiting = 0
        self._token = secrets.token_urlsafe(32)
        self._port: int | None = None
        # after a broker loss (generation > 0): what earlier generations stored already
        self._stored_events: set[str] = set()
        self._stored_metrics: set[str] = set()
        self._resume_at = None if settings.resume_us is None else from_us(settings.resume_us)
        self._consumer: Any = None
        self._pending: dict[Any, _Pending] = {}
        self._verify: dict[Any, tuple[int, str, str]] = {}
        self._next: dict[Any, int] = {}
        self._lock = asyncio.Lock()
        self._stop: asyncio.Event = asyncio.Event()

    @property
    def state_file(self) -> Path:
        """Where the running sink advertises its pid and HTTP URL."""
        return self.settings.state_dir / self.society / "sink.json"

    # --- the ClickHouse thread -----------------------------------------------------------------------

    async def _call(self, fn: Callable[..., T], *args: Any) -> T:
        """Run ``fn(*args)`` on the single ClickHouse thread."""
        return await asyncio.get_running_loop().run_in_executor(self._executor, fn, *args)

    def _open(self) -> None:
        self._client = connect(self.settings.clickhouse_url)
        ensure_schema(self._client)
        if self.settings.generation > 0:
            self._load_stored()

    def _warm_up(self) -> None:
        """One insert into a temporary table, on the insert thread, while the consumer joins its group: a
        process's first insert costs about 250 ms more than the next ones (chDB, measured), and it would
        otherwise be the first event's. Best effort: a failure only says so."""
        began = time.monotonic()
        try:
            self._client.command("CREATE TEMPORARY TABLE IF NOT EXISTS _sink_warm_up (x UInt8)")
            self._client.insert("_sink_warm_up", [[1]], column_names=["x"])
            self._client.command("DROP TEMPORARY TABLE IF EXISTS _sink_warm_up")
        except Exception as exc:
            log.info("sink.warm_up_skipped", error=repr(exc))
            return
        log.info("sink.warmed_up", seconds=round(time.monotonic() - began, 3))

    def stored_topic(self, topic: str) -> str:
        """The ``_topic`` rows of ``topic`` carry: the topic, qualified by its generation after a loss."""
        return topic if self.settings.generation == 0 else f"{topic}@g{self.settings.generation}"

    def _load_stored(self) -> None:
        """Ids stored by earlier generations that the rebuilt topics will carry again."""
        params: dict[str, Any] = {"s": self.society}
        where = ""
        if self._resume_at is not None:
            where = " AND occurred_at >= {t:DateTime64(6, 'UTC')}"
            params["t"] = self._resume_at
        self._stored_events = {
            str(r[0])
            for r in self._client.query(
                "SELECT toString(event_id) FROM events WHERE society = {s:String}" + where, parameters=params
            ).result_rows
        }
        self._stored_metrics = {
            str(r[0])
            for r in self._client.query(
                "SELECT toString(metric_id) FROM metrics WHERE society = {s:String}", parameters=params
            ).result_rows
        }
        log.info(
            "sink.generation",
            generation=self.settings.generation,
            resume_us=self.settings.resume_us,
            stored_events_after_resume=len(self._stored_events),
            stored_metrics=len(self._stored_metrics),
        )

    def _new_rows(self, target: _Target, rows: list[list[Any]], rejects: list[list[Any]]) -> list[list[Any]]:
        """Generation > 0: rows named by the qualified topic, without what earlier generations stored."""
        kept: list[list[Any]] = []
        for row in rows:
            if target.table == EVENTS_TABLE:
                if (self._resume_at is not None and row[5] < self._resume_at) or str(
                    row[0]
                ) in self._stored_events:
                    self.stats.recovered_skipped += 1
                    continue
            elif target.table == METRICS_TABLE and str(row[0]) in self._stored_metrics:
                self.stats.recovered_skipped += 1
                continue
            row[target.columns.index("_topic")] = self.stored_topic(row[target.columns.index("_topic")])
            kept.append(row)
        topic_at = DEAD_LETTER_COLUMNS.index("_topic")
        for row in rejects:
            row[topic_at] = self.stored_topic(row[topic_at])
        return kept

    def _open_reader(self) -> None:
        """The read-only session of outside queries (on the reader thread: chDB handles stay on one)."""
        s = self.settings
        self._reader = open_session(
            s.clickhouse_url, s.clickhouse_reader_url, ReadLimits(max_execution_time=s.query_timeout_seconds)
        )

    def _close_reader(self) -> None:
        if self._reader is not None:
            with contextlib.suppress(Exception):
                self._reader.close()
            self._reader = None

    async def _open_waiting(self, patience: float = 30.0) -> None:
        """Open ClickHouse; while another process holds the chDB directory only briefly (a dashboard
        reading a stored society releases it after each refresh), keep trying for ``patience`` seconds."""
        deadline = time.monotonic() + patience
        while True:
            try:
                await self._call(self._open)
                return
            except Exception as exc:
                # chDB reports a directory held by another process only as a failed start (the lock
                # message goes to stderr), so any failure to start the engine is retried for a while.
                held = any(m in str(exc) for m in ("Cannot lock file", "Unable to open the chdb engine"))
                if self.settings.chdb_path is None or not held or time.monotonic() > deadline:
                    raise
                log.warning("sink.chdb_busy", path=str(self.settings.chdb_path), retry_in_s=0.5)
                await asyncio.sleep(0.5)

    def _close(self) -> None:
        if self._client is not None:
            self._client.close()
            self._client = None

    def _resume_point(self, topic: str, partition: int) -> tuple[int, str, str] | None:
        """The highest offset of ``topic:partition`` already stored (in its table or among the sink's
        rejects), with that table and the stored row's identity; None when nothing is stored."""
        where = " WHERE _topic = {t:String} AND _partition = {p:UInt32}"
        params = {"t": self.stored_topic(topic), "p": partition}
        best: tuple[int, str] | None = None
        for table in sorted({self._targets[topic].table, DEAD_LETTERS_TABLE}):
            result = self._client.query(
                f"SELECT count(), max(_offset) FROM {table}{where}", parameters=params
            )
            count, top = result.result_rows[0]
            if count and (best is None or int(top) > best[0]):
                best = (int(top), table)
        if best is None:
            return None
        offset, table = best
        result = self._client.query(
            f"SELECT {IDENTITY_SQL[table]} FROM {table}{where} AND _offset = {{o:UInt64}} LIMIT 1",
            parameters={**params, "o": offset},
        )
        return offset, table, str(result.result_rows[0][0])

    def _insert_batch(self, target: _Target, records: list[Any], token: str) -> tuple[int, int]:
        """Build and insert one batch; returns (rows inserted into the target, rejected records)."""
        rejects: list[list[Any]] = []
        rows = target.build(records, rejects)
        if self.settings.generation > 0:
            rows = self._new_rows(target, rows, rejects)
        if rejects:
            self._client.insert(
                DEAD_LETTERS_TABLE,
                rejects,
                column_names=DEAD_LETTER_COLUMNS,
                settings={"insert_deduplication_token": f"{token}:rejects"},
            )
        if rows:
            self._client.insert(
                target.table,
                rows,
                column_names=target.columns,
                settings={"insert_deduplication_token": token},
            )
        return len(rows), len(rejects)

    def _query(self, sql: str) -> bytes:
        """One outside query on the read-only session (reader thread)."""
        if self._reader is None:
            self._open_reader()
        assert self._reader is not None
        result = self._reader.run(sql)
        return dumps_json(
            {
                "columns": list(result.column_names),
                "types": [t.name for t in result.column_types],
                "rows": [list(row) for row in result.result_rows],
            }
        )

    def _insert_embeddings(self, model: str, rows: list[tuple[int, list[float]]]) -> int:
        """The report's vectors (insert thread; parameters only, never SQL text)."""
        if rows:
            self._client.insert(
                "embeddings", [[model, h, v] for h, v in rows], column_names=["model", "text_hash", "vector"]
            )
        return len(rows)

    # --- batches ---------------------------------------------------------------------------------------

    async def _flush(self, tp: Any, records: list[Any]) -> None:
        """Insert one batch of ``tp`` (retrying until it succeeds), then commit past it. Holds the lock."""
        target = self._targets[tp.topic]
        first, last = records[0].offset, records[-1].offset
        token = f"{self.stored_topic(tp.topic)}:{tp.partition}:{first}-{last}"
        attempt = 0
        while True:
            started = time.perf_counter()
            try:
                rows, rejected = await self._call(self._insert_batch, target, records, token)
                break
            except Exception as exc:
                attempt += 1
                self.stats.insert_errors += 1
                if self.stats.failing_since is None:
                    self.stats.failing_since = time.time()
                self.stats.failing_error = repr(exc)[:1000]
                self.stats.failing_attempts = attempt
                delay = min(MAX_BACKOFF_S, 0.25 * 2 ** (attempt - 1))
                log.error(
                    "sink.insert_failed",
                    topic=tp.topic,
                    partition=tp.partition,
                    first_offset=first,
                    last_offset=last,
                    attempt=attempt,
                    retry_in_s=delay,
                    error=repr(exc),
                )
                if self._stop.is_set() and attempt >= RETRIES_AFTER_STOP:
                    raise _Stopping(token) from exc
                failing_for = time.time() - self.stats.failing_since
                if failing_for >= self.settings.sink_fail_seconds:
                    log.error(
                        "sink.giving_up",
                        seconds=round(failing_for, 1),
                        attempts=attempt,
                        error=repr(exc),
                        batch=token,
                    )
                    raise InsertsFailing(
                        f"inserts into {target.table} failed for {failing_for:.0f} s ({attempt} tries); the"
                        f" last error: {exc!r}"
                    ) from exc
                await asyncio.sleep(delay)
        if self.stats.failing_since is not None:
            log.info("sink.inserts_recovered", after_s=round(time.time() - self.stats.failing_since, 1))
            self.stats.failing_since = self.stats.failing_error = None
            self.stats.failing_attempts = 0
        elapsed = time.perf_counter() - started
        ms = elapsed * 1000
        self.stats.batches += 1
        self.stats.records += len(records)
        self.stats.rejected += rejected
        self.stats.control_records += sum(1 for r in records if is_control(r))
        if rows or rejected:
            self.stats.insert_seconds += elapsed
            self.stats.last_insert_ms = round(ms, 3)
            self.stats.latencies_ms.append(ms)
        self.stats.rows[target.table] += rows
        self.stats.rows[DEAD_LETTERS_TABLE] += rejected
        committed = True
        try:
            await self._consumer.commit({tp: last + 1})
            self.stats.committed[_tp_name(tp)] = last + 1
        except (KafkaError, AssertionError) as exc:
            # The rows are stored: after the next assignment the seek past max(_offset) skips them.
            committed = False
            self.stats.commit_errors += 1
            log.warning(
                "sink.commit_failed", topic=tp.topic, partition=tp.partition, offset=last + 1, error=repr(exc)
            )
        log.info(
            "sink.flushed",
            topic=tp.topic,
            partition=tp.partition,
            first_offset=first,
            last_offset=last,
            records=len(records),
            rows=rows,
            rejected=rejected,
            table=target.table,
            latency_ms=round(ms, 2),
            rows_per_s=round(rows / elapsed) if rows and elapsed > 0 else None,
            committed=committed,
        )

    async def _flush_due(self, force: bool = False) -> None:
        """Flush every batch that is full, too old, or (``force``) not empty."""
        async with self._lock:
            limit = self.settings.sink_batch_rows
            now = time.monotonic()
            for tp, pending in list(self._pending.items()):
                while len(pending.records) >= limit:
                    batch, pending.records = pending.records[:limit], pending.records[limit:]
                    await self._flush(tp, batch)
                    pending.since = time.monotonic()
                if pending.records and (force or now - pending.since >= self.settings.sink_batch_seconds):
                    batch, pending.records = pending.records, []
                    await self._flush(tp, batch)
                self.stats.pending[_tp_name(tp)] = len(pending.records)

    # --- rebalancing -------------------------------------------------------------------------------------

    async def _on_revoked(self, revoked: list[Any]) -> None:
        """Flush and commit everything pending before the partitions go to another member."""
        log.info("sink.partitions_revoked", partitions=sorted(_tp_name(tp) for tp in revoked))
        try:
            await self._flush_due(force=True)
        except _Stopping:
            log.warning("sink.revoke_flush_abandoned")
        async with self._lock:
            self._pending.clear()
            self.stats.pending.clear()
            self.stats.lag.clear()

    async def _on_assigned(self, assigned: list[Any]) -> None:
        """Seek each new partition to resume after the offsets already stored in ClickHouse.

        aiokafka keeps fetching while this coroutine awaits, so the partitions are paused first (before
        any await) and resumed once positioned: otherwise records fetched from the committed offset and
        again after the seek would be inserted twice.
        """
        self._consumer.pause(*assigned)
        try:
            async with self._lock:
                for tp, pending in self._pending.items():
                    if pending.records:
                        log.warning(
                            "sink.pending_dropped", partition=_tp_name(tp), records=len(pending.records)
                        )
                self._pending.clear()
                self.stats.pending.clear()
                self._verify.clear()
                self._next.clear()
                for tp in sorted(assigned, key=_tp_name):
                    stored = await self._call(self._resume_point, tp.topic, tp.partition)
                    if stored is not None:
                        # Re-read the last stored record to check it; _checked drops it, so the first new
                        # record handled is max(_offset) + 1.
                        self._consumer.seek(tp, stored[0])
                        self._verify[tp] = stored
                        self._next[tp] = stored[0]
                    log.info(
                        "sink.partition_assigned",
                        topic=tp.topic,
                        partition=tp.partition,
                        seek_to=None if stored is None else stored[0] + 1,
                    )
        finally:
            self._consumer.resume(*assigned)

    def _checked(self, tp: Any, records: list[Any]) -> list[Any]:
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
                    "sink.resume_unverified", partition=_tp_name(tp), stored=offset, first=first.offset
                )
                return records
            if first.offset < offset or record_identity(table, first) != identity:
                raise PartitionMismatch(
                    f"{_tp_name(tp)}: offset {first.offset} is not the record stored at offset {offset} in"
                    f" {table}; the broker lost or recreated the topic (Tansu keeps topics in memory only)"
                    " while ClickHouse kept the rows: use a new society name or another CLICKHOUSE_URL"
                )
            return records[1:]
        if expected is not None and first.offset < expected:
            raise PartitionMismatch(
                f"{_tp_name(tp)}: offset {first.offset} arrived after offset {expected - 1}; offsets went"
                " backwards (the topic was recreated or truncated)"
            )
        return records

    # --- the loop ----------------------------------------------------------------------------------------

    async def _update_lag(self) -> None:
        consumer = self._consumer
        for tp in consumer.assignment():
            try:
                high = consumer.highwater(tp)
                # position() waits while a partition has no position (being reset): never block on it.
                position = await asyncio.wait_for(consumer.position(tp), 0.05) if high is not None else None
            except (KafkaError, AssertionError, TimeoutError):
                continue
            self.stats.lag[_tp_name(tp)] = (
                None if high is None or position is None else max(0, high - position)
            )

    async def _consume(self) -> None:
        consumer = self._consumer
        while not self._stop.is_set():
            fetched = await consumer.getmany(timeout_ms=100)
            # No await between getmany and the append: a rebalance callback cannot slip in between.
            now = time.monotonic()
            assignment = consumer.assignment()
            for tp, fetched_records in fetched.items():
                if not fetched_records or tp not in assignment:
                    continue
                records = self._checked(tp, fetched_records)
                if not records:
                    continue
                pending = self._pending.get(tp)
                if pending is None:
                    pending = self._pending[tp] = _Pending()
                if not pending.records:
                    pending.since = now
                pending.records.extend(records)
            await self._update_lag()
            await self._flush_due()

    async def _serve(self) -> web.AppRunner:
        check_bind("127.0.0.1", allow_remote=self.settings.allow_remote, what="sink")
        app = web.Application(
            middlewares=[guard(lambda: self._port, self.settings.allowed_hosts.split(","))],
            client_max_size=MAX_INTERNAL_BYTES,
        )
        app.router.add_post("/query", self._handle_query)
        app.router.add_get("/health", self._handle_health)
        app.router.add_post("/internal/embeddings", self._handle_embeddings)
        runner = web.AppRunner(app, access_log=None)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", self.settings.sink_http_port)
        await site.start()
        self._port = int(runner.addresses[0][1])
        self.url = f"http://127.0.0.1:{self._port}"
        return runner

    async def _handle_health(self, request: web.Request) -> web.Response:
        body = self.stats.snapshot()
        body.update(society=self.society, pid=os.getpid(), url=self.url, group_id=self.group_id)
        return web.Response(body=dumps_json(body), content_type="application/json")

    async def _handle_query(self, request: web.Request) -> web.Response:
        if request.content_length is not None and request.content_length > MAX_QUERY_BYTES:
            return _error(f"a query request is at most {MAX_QUERY_BYTES} bytes", status=413)
        try:
            raw = await request.content.read(MAX_QUERY_BYTES + 1)
            doc = orjson.loads(raw)
        except orjson.JSONDecodeError as exc:
            return _error(f"request body is not JSON: {exc}")
        if len(raw) > MAX_QUERY_BYTES:
            return _error(f"a query request is at most {MAX_QUERY_BYTES} bytes", status=413)
        if not isinstance(doc, dict) or not isinstance(doc.get("sql"), str) or not doc["sql"].strip():
            return _error('expected a JSON object {"sql": "..."}')
        unknown = sorted(set(doc) - {"sql"})
        if unknown:
            return _error(
                f'unknown field(s) {", ".join(unknown)}: a query is {{"sql": "..."}} and only reads'
            )
        if self._queries_waiting >= self.settings.query_queue:
            self.stats.queries_busy += 1
            return _error(f"{self._queries_waiting} queries are already waiting; try again", status=503)
        self._queries_waiting += 1
        try:
            body = await asyncio.get_running_loop().run_in_executor(
                self._reader_executor, self._query, doc["sql"]
            )
        except Refused as exc:
            self.stats.queries_refused += 1
            return _error(str(exc), status=403, refused=True)
        except QueryError as exc:
            return _error(str(exc))
        except Exception as exc:
            return _error(repr(exc))
        finally:
            self._queries_waiting -= 1
        self.stats.queries += 1
        return web.Response(body=body, content_type="application/json")

    async def _handle_embeddings(self, request: web.Request) -> web.Response:
        """The report's embeddings, the one write from outside: bearer secret, parameters only."""
        auth = request.headers.get("Authorization", "")
        if not auth.startswith("Bearer ") or not hmac.compare_digest(auth[7:].encode(), self._token.encode()):
            return _error("this endpoint needs the sink's secret (sink.token)", status=401, refused=True)
        try:
            doc = orjson.loads(await request.read())
            model = doc["model"]
            rows: list[tuple[int, list[float]]] = [(int(h), [float(x) for x in v]) for h, v in doc["rows"]]
        except (orjson.JSONDecodeError, KeyError, TypeError, ValueError) as exc:
            return _error(f'expected {{"model": str, "rows": [[hash, [floats]], ...]}}: {exc!r}')
        if not isinstance(model, str) or not 0 < len(model) <= 200:
            return _error("model must be a name of at most 200 characters")
        for h, v in rows:
            if not 0 <= h < 1 << 64 or not 0 < len(v) <= EMBEDDING_DIM_MAX or not all(map(math.isfinite, v)):
                return _error("each row is [UInt64 hash, non-empty list of finite floats]")
        try:
            stored = await self._call(self._insert_embeddings, model, rows)
        except Exception as exc:
            return _error(repr(exc))
        return web.Response(body=dumps_json({"rows": stored}), content_type="application/json")

    def _write_state(self) -> None:
        path = self.state_file
        path.parent.mkdir(parents=True, exist_ok=True)
        token = path.parent / TOKEN_FILE
        tmp_token = token.with_suffix(".tmp")
        with contextlib.suppress(FileNotFoundError):
            tmp_token.unlink()
        fd = os.open(tmp_token, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)  # the user's eyes only
        with os.fdopen(fd, "w") as f:
            f.write(self._token)
        tmp_token.replace(token)
        tmp = path.with_suffix(".json.tmp")
        tmp.write_bytes(orjson.dumps({"pid": os.getpid(), "url": self.url}))
        tmp.replace(path)

    def _remove_state(self) -> None:
        with contextlib.suppress(FileNotFoundError, orjson.JSONDecodeError):
            if orjson.loads(self.state_file.read_bytes()).get("pid") == os.getpid():
                self.state_file.unlink()
                (self.state_file.parent / TOKEN_FILE).unlink(missing_ok=True)

    async def run(self, stop: asyncio.Event) -> None:
        """Run until ``stop`` is set; then flush and commit what is pending and release everything.

        Raises if ClickHouse cannot be opened (e.g. another process owns the chDB directory) or Kafka is
        unreachable at start.
        """
        self._stop = stop
        began = time.monotonic()
        await self._open_waiting()
        await asyncio.get_running_loop().run_in_executor(self._reader_executor, self._open_reader)
        log.info("sink.clickhouse_ready", seconds=round(time.monotonic() - began, 3))
        runner: web.AppRunner | None = None
        try:
            runner = await self._serve()
            self._write_state()
            warm = asyncio.ensure_future(self._call(self._warm_up))  # runs while the consumer joins
            session_ms = self.settings.group_session_timeout_ms
            self._consumer = AIOKafkaConsumer(
                bootstrap_servers=self.bootstrap,
                group_id=self.group_id,
                client_id=f"society-{self.society}-sink-{os.getpid()}",
                enable_auto_commit=False,
                auto_offset_reset="earliest",
                fetch_max_wait_ms=100,
                max_poll_records=20_000,
                metadata_max_age_ms=5_000,
                # the local broker holds the first join for half the session (see Settings)
                session_timeout_ms=session_ms,
                heartbeat_interval_ms=max(100, session_ms // 6),
                rebalance_timeout_ms=max(10_000, session_ms),  # a revoke flushes what is pending
            )
            self._consumer.subscribe(topics=sorted(self._targets), listener=_Listener(self))
            await self._consumer.start()
            await warm
            log.info(
                "sink.started",
                society=self.society,
                bootstrap=self.bootstrap,
                clickhouse=self.settings.clickhouse_url,
                url=self.url,
                group_id=self.group_id,
                batch_rows=self.settings.sink_batch_rows,
                batch_seconds=self.settings.sink_batch_seconds,
            )
            try:
                await self._consume()  # returns once stop is set (getmany wakes up every 100 ms)
                await self._flush_due(force=True)
            except _Stopping as exc:
                log.warning("sink.stop_flush_abandoned", batch=str(exc))
            finally:
                await self._consumer.stop()
            log.info("sink.stopped", **self.stats.snapshot())
        finally:
            if runner is not None:
                await runner.cleanup()
            self._remove_state()
            await asyncio.get_running_loop().run_in_executor(self._reader_executor, self._close_reader)
            self._reader_executor.shutdown(wait=False)
            await self._call(self._close)
            self._executor.shutdown(wait=True)


def _error(message: str, status: int = 400, refused: bool = False) -> web.Response:
    doc: dict[str, Any] = {"error": message}
    if refused:
        doc["refused"] = True
    return web.Response(status=status, body=orjson.dumps(doc), content_type="application/json")
