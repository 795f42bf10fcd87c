"""The one access layer to a society's ClickHouse.

- ``open_reader`` / ``Reader``: every query that comes from outside a process (``society sql``, the
  dashboard, the report, the probes, a notebook) goes through a read-only session that ClickHouse itself
  enforces (``warehouse.guard``); ``Reader.df`` returns a pandas DataFrame. ``running_sink`` says where
  the data is served (the running sink's ``/query`` while it owns the embedded chDB, else a session of
  this process), ``SessionReader`` is such a session.
- ``Result``, ``QueryError``, ``Refused``: what a query returns and how it fails; ``driver_errors`` turns
  the driver's own exceptions into ``QueryError``.
- ``quoted``: the society name as an SQL literal (the only value ever put into SQL text).
- ``warehouse.client.connect``: the only place a clickhouse-connect client is made;
  ``warehouse.schema``: the tables and views.
- ``warehouse.sink_http``: the running sink's endpoints (reads, and the authenticated internal write of
  the report's embeddings).
"""

from molt_society.warehouse.guard import ReadLimits, ReadOnlySession
from molt_society.warehouse.reader import (
    Reader,
    SessionReader,
    SinkReader,
    open_reader,
    run_query,
    running_sink,
    user_limits,
)
from molt_society.warehouse.result import QueryError, Refused, Result, driver_errors, first_line
from molt_society.warehouse.sql import quoted

__all__ = [
    "QueryError",
    "ReadLimits",
    "ReadOnlySession",
    "Reader",
    "Refused",
    "Result",
    "SessionReader",
    "SinkReader",
    "driver_errors",
    "first_line",
    "open_reader",
    "quoted",
    "run_query",
    "running_sink",
    "user_limits",
]
