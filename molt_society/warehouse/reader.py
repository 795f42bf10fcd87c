"""Where a reader's queries go: the one way into a society's ClickHouse from outside a process.

``open_reader(settings)`` gives a ``Reader`` for ``society sql``, the dashboard, the report, the probes and
notebooks alike (``running_sink`` says which of the two it is):

- the embedded chDB while a sink owns it (chDB allows one engine per directory): the sink's ``/query``,
  which runs the statement on its own read-only session, never on the insert path;
- while a sink is starting on the embedded chDB (it claims the directory first, ``warehouse.claim``): that
  sink's ``/query`` once it serves;
- a ClickHouse server (``CLICKHOUSE_URL=http://...``; ``CLICKHOUSE_READER_URL`` for a read-only
  account), or chDB with nothing running: a read-only session of this process (``warehouse.guard``).

Every path refuses what is not a read with ``Refused``, whose message names what was refused.

In a notebook::

    from molt_society.warehouse import open_reader
    reader = open_reader()                       # settings from the environment
    df = reader.df("SELECT type, count() FROM events WHERE society = 'demo' GROUP BY type")
"""

from __future__ import annotations

import time
from typing import Any, Protocol

from molt_society.warehouse.claim import claimed_by
from molt_society.warehouse.guard import ReadLimits, ReadOnlySession
from molt_society.warehouse.result import QueryError, Result
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


def apply_schema(url: str) -> None:
    """The tables and views a reader queries, created if missing (idempotent) through a client of their
    own that is closed again: on chDB another handle keeps the engine, and this one must not stay
    writable."""
    from molt_society.warehouse.client import connect
    from molt_society.warehouse.schema import ensure_schema

    client = connect(url)
    try:
        ensure_schema(client)
    finally:
        client.close()


class SessionReader:
    """A read-only session of this process (a server, or chDB that no other process holds).

    ``schema=False`` skips applying the schema first (a caller that reopens its reader often, and applied
    it once already)."""

    def __init__(
        self,
        url: str,
        reader_url: str | None = None,
        limits: ReadLimits | None = None,
        *,
        schema: bool = True,
    ) -> None:
        if schema:
            apply_schema(url)  # the views a reader queries exist before it does
        self.session = open_session(url, reader_url, limits)

    def query(self, sql: str) -> Result:
        return self.session.query(sql)

    def df(self, sql: str) -> Any:
        return self.session.query_df(sql)

    def close(self) -> None:
        self.session.close()


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


def running_sink(settings: Any, society: str | None = None) -> str | None:
    """URL of the live sink that owns the embedded chDB of ``settings`` (``society``'s first, then any;
    only a sink of that directory): its ``/query`` is then the only way to the data. None on a ClickHouse
    server, or when no sink of that directory answers (the directory is free for a session of this
    process)."""
    if settings.chdb_path is None:
        return None
    return running_sink_url(settings.state_dir, society, settings.chdb_path)


def _wait_for_claiming_sink(settings: Any, society: str | None, patience: float = 60.0) -> str | None:
    """While a sink claims the chDB directory (``warehouse.claim``) but does not serve yet, wait for its
    ``/query`` (up to ``patience`` s) rather than take the directory from it; None once nothing claims it."""
    deadline = time.monotonic() + patience
    while (pid := claimed_by(settings.chdb_path)) is not None:
        if (url := running_sink(settings, society)) is not None:
            return url
        if time.monotonic() > deadline:
            raise QueryError(
                f"the sink (pid {pid}) claiming the chDB directory {settings.chdb_path} has not served "
                f"for {patience:.0f} s; see its log (society status)"
            )
        time.sleep(0.2)
    return running_sink(settings, society)


def user_limits(settings: Any) -> ReadLimits:
    """The limits of a user's query (``society sql``, the dashboard, a notebook, the sink's ``/query``):
    ``query_timeout_seconds``, ``query_max_memory_bytes`` and ``query_max_result_bytes`` of ``settings``,
    the rest ``ReadLimits``' defaults."""
    return ReadLimits(
        max_execution_time=settings.query_timeout_seconds,
        max_memory_usage=settings.query_max_memory_bytes,
        max_result_bytes=settings.query_max_result_bytes,
    )


def open_reader(settings: Any = None, society: str | None = None) -> Reader:
    """The reader of the society's ClickHouse (see module docstring); ``settings`` default to the
    environment's (``runtime.settings.get_settings``)."""
    if settings is None:
        from molt_society.runtime.settings import get_settings

        settings = get_settings()
    url = running_sink(settings, society)
    if url is None and settings.chdb_path is not None:
        url = _wait_for_claiming_sink(settings, society)
    if url is not None:
        return SinkReader(url)
    require_store(settings)
    return SessionReader(settings.clickhouse_url, settings.clickhouse_reader_url, user_limits(settings))


class NoStore(QueryError):
    """The embedded store a reader names does not exist (a reader never creates one)."""


def require_store(settings: Any) -> None:
    """``NoStore`` when ``settings`` name a chDB folder that does not exist: opening it would create an
    empty store (in the working directory, for the default) and answer every question with nothing."""
    path = settings.chdb_path
    if path is not None and not path.is_dir():
        raise NoStore(
            f"no store at {path}: nothing has been stored there (run a society first: `make demo` or "
            "`society run`), or CLICKHOUSE_URL names another folder"
        )


def run_query(settings: Any, sql: str) -> Result:
    """One read through ``open_reader(settings)``, closed afterwards."""
    reader = open_reader(settings)
    try:
        return reader.query(sql)
    finally:
        reader.close()
