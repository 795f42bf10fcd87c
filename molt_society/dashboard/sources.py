"""Where the dashboard's figures come from: ClickHouse, the broker, the sink and the replay command.

- ``ClickHouseSource`` runs the panels' SQL where the data is, through the one access layer
  (``warehouse``): the running sink's ``/query`` endpoint when the embedded chDB is owned by a sink
  (``warehouse.running_sink``), else a read-only session of its own (a ClickHouse server, or the chDB
  directory when nothing else holds it; then it is opened for one refresh and released again, and not
  reopened while a sink claims it (``warehouse.claim``), so a sink started later takes it). The access
  layer is synchronous: its calls run on worker threads, every chDB call on the same one.
- ``BrokerWatch`` measures consumer lag the way ``society status`` does (``runtime.lag.LagReader``: high
  watermark from a real fetch minus each group's committed offset) with long-lived clients that reconnect
  by themselves, and keeps answering while the broker is unreachable: it then reports since when and the
  last error.
- ``sink_health`` reads the sink's ``GET /health``; the replay's progress is ``replay.progress``.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from molt_society.runtime.lag import LagReader
from molt_society.runtime.logs import get_logger
from molt_society.runtime.settings import Settings
from molt_society.schemas.topics import Role
from molt_society.warehouse import QueryError, SessionReader, driver_errors, running_sink, user_limits
from molt_society.warehouse.claim import claimed_by
from molt_society.warehouse.sink_http import query_http

log = get_logger(__name__)

SINK_CHECK_SECONDS = 5.0
"""How long the answer "which sink serves the chDB directory" is kept (a failed query forgets it)."""


@dataclass
class QueryResult:
    columns: list[str]
    rows: list[list[Any]]
    ms: float


class ClickHouseSource:
    """Runs SQL against the society's ClickHouse (see module docstring); failures are ``QueryError``."""

    def __init__(self, settings: Settings, society: str, http_timeout: float = 10.0) -> None:
        self.settings = settings
        self.society = society
        self.http_timeout = http_timeout
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="dashboard-clickhouse")
        self._reader: SessionReader | None = None
        self._schema_ready = False
        self._sink_url: str | None = None
        self._sink_checked = -SINK_CHECK_SECONDS
        self.mode = "unknown"

    async def sink_url(self) -> str | None:
        """URL of the sink owning the chDB directory (this society's first, then any), or None; the answer
        is kept for ``SINK_CHECK_SECONDS`` (a failed query, through the sink or directly, forgets it)."""
        if self.settings.chdb_path is None:
            return None
        now = time.monotonic()
        if now - self._sink_checked < SINK_CHECK_SECONDS:
            return self._sink_url
        self._sink_checked = now
        self._sink_url = await asyncio.to_thread(running_sink, self.settings, self.society)
        return self._sink_url

    def _forget_sink(self) -> None:
        """Look for a sink again on the next query (it may have stopped, or taken the directory)."""
        self._sink_url, self._sink_checked = None, -SINK_CHECK_SECONDS

    async def query(self, sql: str) -> QueryResult:
        url = await self.sink_url()
        began = time.perf_counter()
        try:
            if url is not None:
                self.mode = "sink"
                res = await asyncio.to_thread(query_http, url, sql, self.http_timeout)
            else:
                self.mode = "direct"
                loop = asyncio.get_running_loop()
                res = await loop.run_in_executor(self._executor, self._direct, sql)
        except (QueryError, OSError) as exc:
            self._forget_sink()
            if isinstance(exc, QueryError):
                raise
            raise QueryError(f"sink query endpoint {url}: {exc or type(exc).__name__}") from None
        # Rows stay Python values; the snapshot is encoded like the sink's /query answers (dumps_json).
        return QueryResult(res.columns, res.rows, _ms(began))

    def _direct(self, sql: str) -> Any:
        """``sql`` on this process's read-only session (opened on first use; the schema once a process)."""
        s = self.settings
        if self._reader is None and s.chdb_path is not None and (pid := claimed_by(s.chdb_path)) is not None:
            # a sink is taking the directory: opening it now could keep it from the sink
            raise QueryError(
                f"a sink (pid {pid}) is opening the chDB directory {s.chdb_path}; "
                "the figures come through its /query once it serves"
            )
        with driver_errors():
            if self._reader is None:
                self._reader = SessionReader(
                    s.clickhouse_url, s.clickhouse_reader_url, user_limits(s), schema=not self._schema_ready
                )
                self._schema_ready = True
            return self._reader.query(sql)

    def _release(self) -> None:
        if self._reader is not None:
            with contextlib.suppress(Exception):
                self._reader.close()
            self._reader = None

    async def release(self) -> None:
        """Give the embedded chDB directory back (a sink may want it); it is reopened on the next query."""
        if self._reader is not None and self.settings.chdb_path is not None:
            await asyncio.get_running_loop().run_in_executor(self._executor, self._release)

    async def close(self) -> None:
        await asyncio.get_running_loop().run_in_executor(self._executor, self._release)
        self._executor.shutdown(wait=False)


def _ms(began: float) -> float:
    return round((time.perf_counter() - began) * 1000, 2)


@dataclass
class BrokerState:
    reachable: bool | None = None  # None until the first attempt finished
    last_ok: float | None = None
    down_since: float | None = None
    error: str | None = None
    lag: dict[str, int] = field(default_factory=dict)
    records: dict[str, int] = field(default_factory=dict)
    checked_at: float | None = None


class BrokerWatch:
    """Polls high watermarks and committed offsets every ``interval`` seconds (see module docstring)."""

    def __init__(self, bootstrap: str, society: str, interval: float = 2.0, timeout: float = 4.0) -> None:
        self.bootstrap = bootstrap
        self.society = society
        self.interval = interval
        self.timeout = timeout
        self.state = BrokerState()
        self._lag = LagReader(bootstrap, society, timeout=timeout, client_id=f"society-dashboard-{society}")

    def snapshot(self) -> dict[str, Any]:
        s = self.state
        now = time.time()
        stale = s.last_ok is None or now - s.last_ok > self.interval + self.timeout + 1
        reachable = s.reachable is True and not stale
        return {
            "bootstrap": self.bootstrap,
            "reachable": reachable if s.reachable is not None else None,
            "last_ok": s.last_ok,
            "down_since": None if reachable else s.down_since,
            "error": None if reachable else (s.error or ("no answer yet" if stale else None)),
            "lag": dict(s.lag),
            "records": dict(s.records),
            "checked_at": s.checked_at,
        }

    async def run(self, stop: asyncio.Event) -> None:
        while not stop.is_set():
            began = time.time()
            try:
                await asyncio.wait_for(self._poll(), self.timeout)
            except Exception as exc:
                self._failed(exc if str(exc) else TimeoutError(f"no answer within {self.timeout:.0f} s"))
            else:
                self.state.reachable = True
                self.state.last_ok = time.time()
                self.state.down_since = None
                self.state.error = None
            self.state.checked_at = time.time()
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(stop.wait(), max(0.1, self.interval - (time.time() - began)))
        await self.close()

    def _failed(self, exc: BaseException) -> None:
        if self.state.reachable is not False:
            log.warning("dashboard.broker_unreachable", bootstrap=self.bootstrap, error=str(exc))
            self.state.down_since = time.time()
        self.state.reachable = False
        self.state.error = f"{type(exc).__name__}: {exc}"[:300]

    async def _poll(self) -> None:
        """Records per topic (the sum of its high watermarks) and each group's lag, into ``state``."""
        hws = await self._lag.highwaters()
        records = {r.value: 0 for r in Role}
        for tp, hw in hws.items():
            records[tp.topic.rsplit(".", 1)[-1]] += hw
        lag = await self._lag.group_lags(hws)
        self.state.records = records
        self.state.lag = lag

    async def close(self) -> None:
        await self._lag.close()


async def sink_health(source: ClickHouseSource) -> dict[str, Any] | None:
    """The sink's ``GET /health`` (None when no sink of this chDB directory runs)."""
    url = await source.sink_url()
    if url is None:
        return None
    try:
        doc = await asyncio.to_thread(_get_json, f"{url}/health", 2.0)
    except (OSError, ValueError):
        return None
    keep = (
        "society",
        "uptime_s",
        "rows",
        "last_insert_ms",
        "p99_insert_ms",
        "total_lag",
        "caught_up",
        "failing",
        "insert_errors",
    )
    return {k: doc.get(k) for k in keep} if isinstance(doc, dict) else None


def _get_json(url: str, timeout: float) -> Any:
    with urllib.request.urlopen(url, timeout=timeout) as resp:
        return json.loads(resp.read())
