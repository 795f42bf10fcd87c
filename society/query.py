"""Run SQL against the society's ClickHouse, wherever it is.

- A ClickHouse server (``CLICKHOUSE_URL=http://...``): directly, with clickhouse-connect.
- The embedded chDB while a sink runs: through the sink's ``/query`` endpoint, because chDB allows one
  engine per data directory and the sink owns it.
- The embedded chDB with nothing running: opened in this process.

The SQL is the user's own; agent-written text only ever travels as data in the result.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from society.settings import Settings


class QueryError(Exception):
    """ClickHouse rejected the query; the message is ClickHouse's."""


@dataclass(frozen=True)
class Result:
    columns: list[str]
    rows: list[list[Any]]


def running_sink_url(settings: Settings) -> str | None:
    """URL of a live sink of any society under ``state_dir``, if one answers."""
    for path in sorted(settings.state_dir.glob("*/sink.json")):
        try:
            url = str(json.loads(path.read_text())["url"])
            with urllib.request.urlopen(f"{url}/health", timeout=2):
                return url
        except (OSError, ValueError, KeyError):
            continue
    return None


def query_http(url: str, sql: str, timeout: float = 60.0, *, readonly: bool = True) -> Result:
    """``sql`` through a sink's ``/query``; ``readonly=False`` for a write (the sink runs queries read-only
    unless told otherwise)."""
    doc_in: dict[str, object] = {"sql": sql} if readonly else {"sql": sql, "readonly": False}
    req = urllib.request.Request(
        f"{url}/query", data=json.dumps(doc_in).encode(), headers={"Content-Type": "application/json"}
    )
    try:
        with urllib.request.urlopen(req, timeout=timeout) as resp:
            doc = json.loads(resp.read())
    except urllib.error.HTTPError as exc:
        body = exc.read().decode(errors="replace")
        try:
            msg = json.loads(body).get("error", body)
        except ValueError:
            msg = body
        raise QueryError(str(msg)) from None
    return Result(list(doc["columns"]), [list(r) for r in doc["rows"]])


def query_direct(clickhouse_url: str, sql: str) -> Result:
    from sinks.clickhouse import connect, ensure_schema

    client = connect(clickhouse_url)
    try:
        ensure_schema(client)
        res = client.query(sql)
    except Exception as exc:  # clickhouse-connect raises several driver-specific types
        raise QueryError(str(exc).strip().splitlines()[0] if str(exc).strip() else repr(exc)) from None
    return Result(list(res.column_names), [list(r) for r in res.result_rows])


def run_query(settings: Settings, sql: str) -> Result:
    """Run ``sql`` where the data is (see module docstring)."""
    if settings.chdb_path is not None:
        url = running_sink_url(settings)
        if url is not None:
            return query_http(url, sql)
        Path(settings.chdb_path).mkdir(parents=True, exist_ok=True)
    return query_direct(settings.clickhouse_url, sql)
