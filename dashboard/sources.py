"""Where the dashboard's figures come from: ClickHouse, the broker, the sink and the replay command.

- ``ClickHouseSource`` runs the panels' SQL where the data is, through the one access layer
  (``warehouse``): the running sink's ``/query`` endpoint when the embedded chDB is owned by a sink, else a
  read-only session of its own (a ClickHouse server, or the chDB directory when nothing else holds it;
  then it is opened for one refresh and released again, so a sink started later can take it).
- ``BrokerWatch`` measures consumer lag the way ``society status`` does (high watermark from a real
  fetch minus each group's committed offset) with long-lived clients that reconnect by themselves, and
  keeps answering while the broker is unreachable: it then reports since when and the last error.
- ``sink_health`` reads the sink's ``GET /health``; the replay's progress is ``replay.progress``.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

import aiohttp
from aiokafka import AIOKafkaConsumer, TopicPartition

from molt_society.runtime.logs import get_logger
from molt_society.runtime.settings import Settings
from molt_society.schemas.topics import Role, topic_name
from molt_society.society.status import GROUPS  # consumer group suffix -> the topic its lag is measured on
from molt_society.warehouse import QueryError, ReadLimits, ReadOnlySession
from molt_society.warehouse.reader import open_session

log = get_logger(__name__)


@dataclass
class QueryResult:
    columns: list[str]
    rows: list[list[Any]]
    ms: float


class QueryFailed(Exception):
    pass


class ClickHouseSource:
    """Runs SQL against the society's ClickHouse (see module docstring)."""

    def __init__(self, settings: Settings, society: str, http_timeout: float = 10.0) -> None:
        self.settings = settings
        self.society = society
        self.http_timeout = http_timeout
        self._session: aiohttp.ClientSession | None = None
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="dashboard-clickhouse")
        self._client: ReadOnlySession | None = None
        self._schema_ready = False
        self._sink_url: str | None = None
        self._sink_checked = 0.0
        self.mode = "unknown"

    async def session(self) -> aiohttp.ClientSession:
        if self._session is None or self._session.closed:
            self._session = aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=self.http_timeout))
        return self._session

    async def sink_url(self) -> str | None:
        """URL of the sink owning the chDB directory (this society's first, then any), or None; the answer
        is kept for 5 s (a failed query, through the sink or directly, forgets it at once)."""
        if self.settings.chdb_path is None:
            return None
        now = time.monotonic()
        if now - self._sink_checked < 5.0:
            return self._sink_url
        self._sink_checked = now
        own = self.settings.state_dir / self.society / "sink.json"
        candidates = [own, *sorted(p for p in self.settings.state_dir.glob("*/sink.json") if p != own)]
        session = await self.session()
        for path in candidates:
            try:
                url = str(json.loads(path.read_text())["url"])
                async with session.get(f"{url}/health", timeout=aiohttp.ClientTimeout(total=2)) as resp:
                    if resp.status == 200:
                        self._sink_url = url
                        return url
            except (TimeoutError, OSError, ValueError, KeyError, aiohttp.ClientError):
                continue
        self._sink_url = None
        return None

    async def query(self, sql: str) -> QueryResult:
        url = await self.sink_url()
        began = time.perf_counter()
        if url is not None:
            self.mode = "sink"
            session = await self.session()
            try:
                async with session.post(f"{url}/query", json={"sql": sql}) as resp:
                    doc = await resp.json(content_type=None)
            except (TimeoutError, aiohttp.ClientError, ValueError) as exc:
                self._sink_url, self._sink_checked = None, 0.0
                raise QueryFailed(f"sink query endpoint {url}: {exc or type(exc).__name__}") from None
            if resp.status != 200:
                raise QueryFailed(str(doc.get("error", doc)) if isinstance(doc, dict) else str(doc))
            return QueryResult(list(doc["columns"]), [list(r) for r in doc["rows"]], _ms(began))
        self.mode = "direct"
        loop = asyncio.get_running_loop()
        try:
            columns, rows = await loop.run_in_executor(self._executor, self._direct, sql)
        except QueryFailed:
            self._sink_checked = 0.0  # perhaps a sink took the directory: look again on the next query
            raise
        return QueryResult(columns, rows, _ms(began))

    def _direct(self, sql: str) -> tuple[list[str], list[list[Any]]]:
        from molt_society.warehouse.client import connect
        from molt_society.warehouse.schema import ensure_schema

        s = self.settings
        try:
            if self._client is None:
                if not self._schema_ready:  # once per process, not at every reopen (every refresh)
                    schema = connect(s.clickhouse_url)
                    try:
                        ensure_schema(schema)
                    finally:
                        if s.chdb_path is not None:
                            schema.close()
                    self._schema_ready = True
                self._client = open_session(
                    s.clickhouse_url,
                    s.clickhouse_reader_url,
                    ReadLimits(max_execution_time=s.query_timeout_seconds),
                )
            res = self._client.query(sql)
        except QueryError as exc:
            raise QueryFailed(str(exc)) from None
        except Exception as exc:  # clickhouse-connect and chDB raise several driver-specific types
            text = str(exc).strip()
            raise QueryFailed(text.splitlines()[0] if text else repr(exc)) from None
        # Rows stay Python values; the snapshot is encoded like the sink's /query answers (dumps_json).
        return res.columns, res.rows

    def _release(self) -> None:
        if self._client is not None:
            with contextlib.suppress(Exception):
                self._client.close()
            self._client = None

    async def release(self) -> None:
        """Give the embedded chDB directory back (a sink may want it); it is reopened on the next query."""
        if self._client is not None and self.settings.chdb_path is not None:
            await asyncio.get_running_loop().run_in_executor(self._executor, self._release)

    async def close(self) -> None:
        await asyncio.get_running_loop().run_in_executor(self._executor, self._release)
        self._executor.shutdown(wait=False)
        if self._session is not None:
            await self._session.close()


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
        self._fetcher: AIOKafkaConsumer | None = None
        self._groups: dict[str, AIOKafkaConsumer] = {}
        self._hw: dict[TopicPartition, int] = {}

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

    def _consumer(self, group: str | None) -> AIOKafkaConsumer:
        return AIOKafkaConsumer(
            bootstrap_servers=self.bootstrap,
            group_id=group,
            enable_auto_commit=False,
            fetch_max_wait_ms=50,
            max_partition_fetch_bytes=64 * 1024,
            request_timeout_ms=int(self.timeout * 1000),
            retry_backoff_ms=200,
            client_id=f"society-dashboard-{self.society}",
        )

    async def _poll(self) -> None:
        if self._fetcher is None:
            c = self._consumer(None)
            await c.start()
            self._fetcher = c
        c = self._fetcher
        topics = [topic_name(self.society, r) for r in Role]
        await c.topics()  # refreshes metadata; raises when the broker does not answer
        tps = [TopicPartition(t, p) for t in topics for p in sorted(c.partitions_for_topic(t) or ())]
        if set(tps) != c.assignment():
            c.assign(tps)
        # Fetch from the last known high watermark: the answer is (nearly) empty and carries the current
        # one. Only answers that arrived after this round began count (last_poll_timestamp).
        round_ms = time.time() * 1000 - 1
        for tp in tps:
            c.seek(tp, self._hw.get(tp, 0))
        seen: dict[TopicPartition, int] = {}
        deadline = time.monotonic() + self.timeout
        while len(seen) < len(tps) and time.monotonic() < deadline:
            await c.getmany(timeout_ms=100, max_records=1)
            for tp in tps:
                hw, polled = c.highwater(tp), c.last_poll_timestamp(tp)
                if hw is not None and polled is not None and polled >= round_ms and tp not in seen:
                    seen[tp] = hw
        if len(seen) < len(tps):
            raise TimeoutError("no fetch answer for every partition")
        self._hw = seen
        records = {r.value: 0 for r in Role}
        for tp, hw in seen.items():
            records[tp.topic.rsplit(".", 1)[-1]] += hw
        lag: dict[str, int] = {}
        for group, role in GROUPS.items():
            gc = self._groups.get(group)
            if gc is None:
                gc = self._consumer(f"society.{self.society}.{group}")
                await gc.start()
                self._groups[group] = gc
            topic = topic_name(self.society, role)
            total = 0
            for tp, hw in seen.items():
                if tp.topic == topic:
                    total += hw - ((await gc.committed(tp)) or 0)
            lag[group] = total
        self.state.records = records
        self.state.lag = lag

    async def close(self) -> None:
        for c in [self._fetcher, *self._groups.values()]:
            if c is not None:
                with contextlib.suppress(Exception):
                    await asyncio.wait_for(c.stop(), 5)
        self._fetcher = None
        self._groups = {}


async def sink_health(source: ClickHouseSource) -> dict[str, Any] | None:
    """The sink's ``GET /health`` (None when no sink of this chDB directory runs)."""
    url = await source.sink_url()
    if url is None:
        return None
    session = await source.session()
    try:
        async with session.get(f"{url}/health", timeout=aiohttp.ClientTimeout(total=2)) as resp:
            doc = await resp.json(content_type=None)
    except (TimeoutError, aiohttp.ClientError, ValueError):
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
