"""The sink's batches: records pending per partition, when they are flushed, and the flush itself.

- Records are batched per (topic, partition), in offset order. A batch is flushed when it holds
  ``sink_batch_rows`` records, when it is ``sink_batch_seconds`` old, on a rebalance and on stop.
- Flush = one insert per table with ``insert_deduplication_token = "topic:partition:first-last"``, then the
  commit of ``last + 1``. The offset is never committed before the insert returned. A failed insert is
  retried, same batch and same token, with backoff (at most 5 s between tries): data is never skipped.
  A batch holding only watermark control records inserts nothing and still commits.
- Inserts that keep failing are a failure, not a state to hide: ``failing`` (since when, the error) is set
  at the first failed try, and after ``sink_fail_seconds`` ``InsertsFailing`` ends the sink so the stack
  restarts it (the batch stays uncommitted: nothing is lost).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from molt_society.runtime.logs import get_logger
from molt_society.runtime.settings import SinkSettings
from molt_society.sinks.clickhouse import DEAD_LETTER_COLUMNS, DEAD_LETTERS_TABLE, Target, is_control
from molt_society.sinks.resume import Generation
from molt_society.sinks.sink_stats import SinkStats, tp_name
from molt_society.sinks.store import Store

log = get_logger(__name__)

MAX_BACKOFF_S = 5.0
RETRIES_AFTER_STOP = 3
"""Failed tries of one batch after which a stopping sink gives up (the batch stays uncommitted)."""

Commit = Callable[[dict[Any, int]], Awaitable[bool]]
"""Commits ``{partition: next offset}``; True when the broker took it (``Commits.commit``)."""


class BatchAbandoned(Exception):
    """A batch could not be inserted and the sink is stopping: leave it uncommitted."""


class InsertsFailing(RuntimeError):
    """Inserts kept failing for ``sink_fail_seconds``: the sink exits (uncommitted) to be restarted."""


@dataclass
class _Pending:
    """Records of one partition not yet inserted, and when the first of them arrived."""

    records: list[Any] = field(default_factory=list)
    since: float = 0.0


@dataclass
class Batcher:
    """Pending records per partition, flushed into their tables and committed; see the module docstring.

    ``lock`` is held by every flush; whoever else changes the pending batches (a rebalance) holds it too.
    ``stop`` set: a batch whose insert keeps failing is abandoned after ``RETRIES_AFTER_STOP`` tries.
    """

    settings: SinkSettings
    stats: SinkStats
    store: Store
    generation: Generation
    targets: dict[str, Target]
    commit: Commit
    stop: asyncio.Event
    lock: asyncio.Lock = field(default_factory=asyncio.Lock, init=False)
    _pending: dict[Any, _Pending] = field(default_factory=dict, init=False)

    def add(self, tp: Any, records: list[Any], now: float) -> None:
        """Append fetched records of ``tp`` (no await: a rebalance cannot slip in)."""
        pending = self._pending.get(tp)
        if pending is None:
            pending = self._pending[tp] = _Pending()
        if not pending.records:
            pending.since = now
        pending.records.extend(records)

    def clear(self, *, warn: bool) -> None:
        """Forget every pending record (after a rebalance); ``warn`` logs each batch dropped."""
        if warn:
            for tp, pending in self._pending.items():
                if pending.records:
                    log.warning("sink.pending_dropped", partition=tp_name(tp), records=len(pending.records))
        self._pending.clear()
        self.stats.pending.clear()

    async def flush_due(self, force: bool = False) -> None:
        """Flush every batch that is full, too old, or (``force``) not empty."""
        async with self.lock:
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
                self.stats.pending[tp_name(tp)] = len(pending.records)

    async def _flush(self, tp: Any, records: list[Any]) -> None:
        """Insert one batch of ``tp`` (retrying until it succeeds), then commit past it. Holds the lock."""
        target = self.targets[tp.topic]
        first, last = records[0].offset, records[-1].offset
        where = {"topic": tp.topic, "partition": tp.partition, "first_offset": first, "last_offset": last}
        token = f"{self.generation.stored_topic(tp.topic)}:{tp.partition}:{first}-{last}"
        (rows, rejected), elapsed = await self._insert_retrying(target, records, token, where)
        self._count(target, records, rows, rejected, elapsed)
        committed = await self._commit_past(tp, last)
        log.info(
            "sink.flushed",
            **where,
            records=len(records),
            rows=rows,
            rejected=rejected,
            table=target.table,
            latency_ms=round(elapsed * 1000, 2),
            rows_per_s=round(rows / elapsed) if rows and elapsed > 0 else None,
            committed=committed,
        )

    async def _insert_retrying(
        self, target: Target, records: list[Any], token: str, where: dict[str, Any]
    ) -> tuple[tuple[int, int], float]:
        """(rows, rejects) inserted, and the seconds the successful try took; retries until it succeeds."""
        attempt = 0
        while True:
            started = time.perf_counter()
            try:
                done = await self.store.run(self._insert, target, records, token)
                break
            except Exception as exc:
                attempt += 1
                await asyncio.sleep(self._failed(exc, attempt, target, token, where))
        if self.stats.failing_since is not None:
            log.info("sink.inserts_recovered", after_s=round(time.time() - self.stats.failing_since, 1))
            self.stats.failing_since = self.stats.failing_error = None
            self.stats.failing_attempts = 0
        return done, time.perf_counter() - started

    def _failed(
        self, exc: Exception, attempt: int, target: Target, token: str, where: dict[str, Any]
    ) -> float:
        """Count and log a failed try; returns the backoff before the next one, or raises when the sink
        stops (``BatchAbandoned``) or inserts failed for too long (``InsertsFailing``)."""
        stats = self.stats
        stats.insert_errors += 1
        if stats.failing_since is None:
            stats.failing_since = time.time()
        stats.failing_error = repr(exc)[:1000]
        stats.failing_attempts = attempt
        delay: float = min(MAX_BACKOFF_S, 0.25 * 2 ** (attempt - 1))
        log.error("sink.insert_failed", **where, attempt=attempt, retry_in_s=delay, error=repr(exc))
        if self.stop.is_set() and attempt >= RETRIES_AFTER_STOP:
            raise BatchAbandoned(token) from exc
        failing_for = time.time() - stats.failing_since
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
        return delay

    def _insert(self, client: Any, target: Target, records: list[Any], token: str) -> tuple[int, int]:
        """Build and insert one batch (ClickHouse thread); returns (rows inserted into the target, rejected
        records)."""
        self.store.check_folder()
        rejects: list[list[Any]] = []
        rows = target.build(records, rejects)
        if self.generation.number > 0:
            rows, skipped = self.generation.new_rows(target, rows, rejects)
            self.stats.recovered_skipped += skipped
        insert_rows(client, target, rows, rejects, token)
        return len(rows), len(rejects)

    def _count(self, target: Target, records: list[Any], rows: int, rejected: int, elapsed: float) -> None:
        stats = self.stats
        stats.batches += 1
        stats.records += len(records)
        stats.rejected += rejected
        stats.control_records += sum(1 for r in records if is_control(r))
        if rows or rejected:
            ms = elapsed * 1000
            stats.insert_seconds += elapsed
            stats.last_insert_ms = round(ms, 3)
            stats.latencies_ms.append(ms)
        stats.rows[target.table] += rows
        stats.rows[DEAD_LETTERS_TABLE] += rejected

    async def _commit_past(self, tp: Any, last: int) -> bool:
        """Commit ``last + 1`` on ``tp`` (``runtime.consume_loop.Commits``: in order, bounded, said when
        it fails); False when the broker did not take it. The rows are stored either way: after the next
        assignment the seek past ``max(_offset)`` skips them."""
        if not await self.commit({tp: last + 1}):
            self.stats.commit_errors += 1
            return False
        self.stats.committed[tp_name(tp)] = last + 1
        return True


def insert_rows(
    client: Any,
    target: Target,
    rows: list[list[Any]],
    rejects: list[list[Any]],
    token: str,
    contexts: dict[str, Any] | None = None,
) -> None:
    """Insert one batch as the sink does: the records it could not turn into rows as dead letters under
    ``<token>:rejects``, then the rows under ``token`` (ClickHouse's deduplication of a repeated insert).
    ``contexts``: clickhouse-connect insert contexts kept per table by the caller, so that a table's column
    types are asked once rather than at every insert (``society.replay_direct``)."""
    if rejects:
        client.insert(
            DEAD_LETTERS_TABLE,
            rejects,
            column_names=DEAD_LETTER_COLUMNS,
            settings={"insert_deduplication_token": f"{token}:rejects"},
        )
    if not rows:
        return
    if contexts is None:
        client.insert(
            target.table, rows, column_names=target.columns, settings={"insert_deduplication_token": token}
        )
        return
    context = contexts.get(target.table)
    if context is None:
        context = contexts[target.table] = client.create_insert_context(target.table, target.columns)
    context.settings = {**context.settings, "insert_deduplication_token": token}
    client.insert(data=rows, context=context)
