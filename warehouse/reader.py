"""Where a reader's queries go: the one way into a society's ClickHouse from outside a process.

``open_reader(settings)`` gives a ``Reader`` for ``society sql``, the dashboard, the report, the probes and
notebooks alike:

- the embedded chDB while a sink owns it (chDB allows one engine per directory): the sink's ``/query``,
  which runs the statement on its own read-only session, never on the insert path;
- a ClickHouse server (``CLICKHOUSE_URL=http://...``; ``CLICKHOUSE_READER_URL`` for a read-only
  account), or chDB with nothing running: a read-only session of this process (``warehouse.guard``).

Every path refuses what is not a read with ``Refused``, whose message names what was refused.

In a notebook::

    from molt_society.warehouse import open_reader
    reader = open_reader()                       # settings from the environment
    df = reader.df("SELECT type, count() FROM events WHERE society = 'demo' GROUP BY type")
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Protocol

from molt_society.warehouse.guard import ReadLimits, ReadOnlySession
from molt_society.warehouse.result import Result
from molt_society.warehouse.sink_http import query_http, running_sink_url


class Reader(Protocol):
    def query(self, sql: str) -> Result: ...

    def df(self, sql: str) -> Any: ...

    def close(self) -> None: ...


def open_session(
    url: str, reader_url: str | None = None, limits: ReadLimits | None = None
) -> ReadOnlySession:
    """A read-only session on a client of its own: of ``reader_url`` (a read-only account) if given, else of
    ``url`` (``chdb:///dir`` or a server)."""
    from molt_society.warehouse.client import connect

    target = reader_url or url
    return ReadOnlySession(connect(target), embedded=target.startswith("chdb:"), limits=limits)


class SessionReader:
    """A read-only session of this process (a server, or chDB that no other process holds)."""

    def __init__(self, url: str, reader_url: str | None = None, limits: ReadLimits | None = None) -> None:
        from molt_society.warehouse.client import connect
        from molt_society.warehouse.schema import ensure_schema

        embedded = url.startswith("chdb:")
        if embedded:
            Path(url.removeprefix("chdb://")).mkdir(parents=True, exist_ok=True)
        schema = connect(url)  # the views a reader queries exist before it does
        try:
            ensure_schema(schema)
        finally:
            if embedded:  # another handle keeps the engine; this one must not stay writable
                schema.close()
        self._schema = None if embedded else schema
        self.session = open_session(url, reader_url, limits)

    def query(self, sql: str) -> Result:
        return self.session.query(sql)

    def df(self, sql: str) -> Any:
        return self.session.query_df(sql)

    def close(self) -> None:
        self.session.close()
        if self._schema is not None:
            self._schema.close()


class SinkReader:
    """The running sink's ``/query`` endpoint."""

    def __init__(self, url: str, timeout: float = 3600.0) -> None:
        self.url = url
        self.timeout = timeout

    def query(self, sql: str) -> Result:
        return query_http(self.url, sql, self.timeout)

    def df(self, sql: str) -> Any:
        return self.query(sql).df()

    def close(self) -> None:
        return None


def open_reader(settings: Any = None, society: str | None = None) -> Reader:
    """The reader of the society's ClickHouse (see module docstring); ``settings`` default to the
    environment's (``runtime.settings.get_settings``)."""
    if settings is None:
        from molt_society.runtime.settings import get_settings

        settings = get_settings()
    limits = ReadLimits(max_execution_time=settings.query_timeout_seconds)
    if settings.chdb_path is not None:
        url = running_sink_url(settings.state_dir, society)
        if url is not None:
            return SinkReader(url)
    return SessionReader(settings.clickhouse_url, settings.clickhouse_reader_url, limits)


def run_query(settings: Any, sql: str) -> Result:
    """One read through ``open_reader(settings)``, closed afterwards."""
    reader = open_reader(settings)
    try:
        return reader.query(sql)
    finally:
        reader.close()
