"""The sink's HTTP endpoints, and the state file that advertises them.

With chDB no other process can open the data directory, so the sink serves it: ``POST /query``, ``GET
/health`` and the authenticated ``POST /internal/embeddings`` (the report's vectors; bearer secret in
``<state_dir>/<society>/sink.token``, mode 0600) on 127.0.0.1, behind the Host/Origin/Content-Type checks
of ``runtime.web_guard``; its URL and pid go to ``<state_dir>/<society>/sink.json`` (the CLI and the
dashboard read it, ``warehouse.sink_http``).

Outside queries run on a thread of their own, on a client whose session ClickHouse keeps read-only
(``warehouse.guard``): a slow, failing or setting-changing query cannot delay, fail or change an insert.
At most ``query_queue`` of them wait at once; more are answered 503.
"""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import math
import os
import secrets
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import orjson
from aiohttp import web

from molt_society.runtime import process_status
from molt_society.runtime.settings import Settings
from molt_society.runtime.web_guard import check_bind, guard
from molt_society.sinks.sink_stats import SinkStats
from molt_society.sinks.store import Store
from molt_society.warehouse.guard import ReadOnlySession
from molt_society.warehouse.reader import open_session, user_limits
from molt_society.warehouse.result import QueryError, Refused
from molt_society.warehouse.sink_http import STATE_FILE, TOKEN_FILE, dumps_json

MAX_QUERY_BYTES = 1 << 20
"""Largest ``/query`` request body."""
MAX_INTERNAL_BYTES = 64 << 20
"""Largest ``/internal/embeddings`` request body."""
EMBEDDING_DIM_MAX = 4096


class SinkServer:
    """The endpoints of one sink: ``start`` serves and advertises them, ``close`` takes both back."""

    def __init__(
        self, settings: Settings, society: str, group_id: str, stats: SinkStats, store: Store
    ) -> None:
        self.settings = settings
        self.society = society
        self.group_id = group_id
        self.stats = stats
        self.url: str | None = None
        self._store = store
        # queries from outside: their own thread, client and read-only session (never the insert path)
        self._reader_executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="clickhouse-reader")
        self._reader: ReadOnlySession | None = None
        self._queries_waiting = 0
        self._token = secrets.token_urlsafe(32)
        self._port: int | None = None
        self._runner: web.AppRunner | None = None

    @property
    def state_file(self) -> Path:
        """Where the running sink advertises its pid and HTTP URL."""
        return self.settings.state_dir / self.society / STATE_FILE

    async def open_reader(self) -> None:
        """Open the read-only session of outside queries."""
        await asyncio.get_running_loop().run_in_executor(self._reader_executor, self._open_reader)

    async def start(self) -> None:
        """Serve the endpoints on 127.0.0.1 and write the state file."""
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
        self._runner = runner
        self._write_state()
        process_status.mark_ready(url=self.url)

    async def close(self) -> None:
        """Stop serving, remove the state file, close the read-only session."""
        if self._runner is not None:
            await self._runner.cleanup()
        self._remove_state()
        await asyncio.get_running_loop().run_in_executor(self._reader_executor, self._close_reader)
        self._reader_executor.shutdown(wait=False)

    # --- the read-only session (reader thread: chDB handles stay on one) --------------------------------

    def _open_reader(self) -> None:
        s = self.settings
        self._reader = open_session(s.clickhouse_url, s.clickhouse_reader_url, user_limits(s))

    def _close_reader(self) -> None:
        if self._reader is not None:
            with contextlib.suppress(Exception):
                self._reader.close()
            self._reader = None

    def _query(self, sql: str) -> bytes:
        """One outside query on the read-only session."""
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

    # --- the endpoints ---------------------------------------------------------------------------------

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
            stored = await self._store.run(insert_embeddings, model, rows)
        except Exception as exc:
            return _error(repr(exc))
        return web.Response(body=dumps_json({"rows": stored}), content_type="application/json")

    # --- the state file --------------------------------------------------------------------------------

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
        # the store it serves: a reader of another store must not take this sink's answers for its own
        store = str(self.settings.chdb_path.resolve()) if self.settings.chdb_path else None
        tmp.write_bytes(orjson.dumps({"pid": os.getpid(), "url": self.url, "store": store}))
        tmp.replace(path)

    def _remove_state(self) -> None:
        with contextlib.suppress(FileNotFoundError, orjson.JSONDecodeError):
            if orjson.loads(self.state_file.read_bytes()).get("pid") == os.getpid():
                self.state_file.unlink()
                (self.state_file.parent / TOKEN_FILE).unlink(missing_ok=True)


def insert_embeddings(client: Any, model: str, rows: list[tuple[int, list[float]]]) -> int:
    """The report's vectors (insert thread; parameters only, never SQL text)."""
    if rows:
        client.insert(
            "embeddings", [[model, h, v] for h, v in rows], column_names=["model", "text_hash", "vector"]
        )
    return len(rows)


def _error(message: str, status: int = 400, refused: bool = False) -> web.Response:
    doc: dict[str, Any] = {"error": message}
    if refused:
        doc["refused"] = True
    return web.Response(status=status, body=orjson.dumps(doc), content_type="application/json")
