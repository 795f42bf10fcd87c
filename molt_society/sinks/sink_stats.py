"""The sink's counters: what ``GET /health`` answers and ``sink.stopped`` logs.

One ``SinkStats`` per process, written by the batching (rows, inserts, failures), the consume loop (lag)
and the endpoints (queries); read by ``snapshot``.
"""

from __future__ import annotations

import math
import time
from collections import deque
from dataclasses import dataclass, field
from typing import Any

from molt_society.sinks.clickhouse import DEAD_LETTERS_TABLE, EVENTS_TABLE, METRICS_TABLE

LATENCY_WINDOW = 1000
"""Number of recent inserts the p99 latency is computed over."""


def tp_name(tp: Any) -> str:
    """``topic:partition``, the key of a partition in the counters and the logs."""
    return f"{tp.topic}:{tp.partition}"


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
