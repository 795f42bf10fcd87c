"""Where a report reads its data: the society's ClickHouse, through the same paths as ``society sql``.

- A ClickHouse server, or the embedded chDB with nothing else running: a clickhouse-connect client held
  for the whole report.
- The embedded chDB while a sink owns it: the sink's ``/query`` endpoint (writes go there too, with
  ``readonly`` off: the embeddings the report computes are stored through it).

The only values ever placed in SQL are the society name (checked by ``check_society_name``), numbers and
hashes the report computed itself; agent-written text only travels as data.
"""

from __future__ import annotations

import urllib.error
from pathlib import Path
from typing import Any, Protocol

from dashboard.panels import check_society_name
from society.query import QueryError, Result, query_http, running_sink_url
from society.settings import Settings


class Warehouse(Protocol):
    def query(self, sql: str) -> Result: ...

    def command(self, sql: str) -> None: ...

    def close(self) -> None: ...


class ClientWarehouse:
    """A clickhouse-connect client (server or chDB) with the schema applied."""

    def __init__(self, client: Any) -> None:
        from sinks.clickhouse import ensure_schema

        self.client = client
        ensure_schema(client)

    @classmethod
    def open(cls, url: str) -> ClientWarehouse:
        from sinks.clickhouse import connect

        return cls(connect(url))

    def query(self, sql: str) -> Result:
        try:
            res = self.client.query(sql)
        except Exception as exc:  # clickhouse-connect raises several driver-specific types
            raise QueryError(_first_line(exc)) from None
        return Result(list(res.column_names), [list(r) for r in res.result_rows])

    def command(self, sql: str) -> None:
        try:
            self.client.command(sql)
        except Exception as exc:
            raise QueryError(_first_line(exc)) from None

    def close(self) -> None:
        self.client.close()


class SinkWarehouse:
    """The running sink's ``/query`` endpoint (it owns the embedded chDB)."""

    def __init__(self, url: str) -> None:
        self.url = url

    def query(self, sql: str, *, readonly: bool = True) -> Result:
        try:
            return query_http(self.url, sql, timeout=3600.0, readonly=readonly)
        except urllib.error.URLError as exc:  # HTTP errors are QueryErrors already
            raise QueryError(f"the sink at {self.url} did not answer ({exc.reason})") from None

    def command(self, sql: str) -> None:
        self.query(sql, readonly=False)

    def close(self) -> None:
        return None


def open_warehouse(settings: Settings) -> Warehouse:
    """The society's ClickHouse as ``society sql`` reaches it (see module docstring)."""
    if settings.chdb_path is not None:
        url = running_sink_url(settings)
        if url is not None:
            return SinkWarehouse(url)
        Path(settings.chdb_path).mkdir(parents=True, exist_ok=True)
    return ClientWarehouse.open(settings.clickhouse_url)


def quoted(society: str) -> str:
    """The society name as an SQL string literal, after validation (the only name ever put in SQL)."""
    return "'" + check_society_name(society) + "'"


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else repr(exc)
