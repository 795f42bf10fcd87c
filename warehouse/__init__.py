"""The one access layer to a society's ClickHouse.

- ``open_reader`` / ``Reader``: every query that comes from outside a process (``society sql``, the
  dashboard, the report, the probes, a notebook) goes through a read-only session that ClickHouse itself
  enforces (``warehouse.guard``); ``Reader.df`` returns a pandas DataFrame.
- ``Result``, ``QueryError``, ``Refused``: what a query returns and how it fails.
- ``warehouse.sink_http``: the running sink's endpoints (reads, and the authenticated internal write of
  the report's embeddings).
"""

from molt_society.warehouse.guard import ReadLimits, ReadOnlySession
from molt_society.warehouse.reader import Reader, SessionReader, SinkReader, open_reader, run_query
from molt_society.warehouse.result import QueryError, Refused, Result

__all__ = [
    "QueryError",
    "ReadLimits",
    "ReadOnlySession",
    "Reader",
    "Refused",
    "Result",
    "SessionReader",
    "SinkReader",
    "open_reader",
    "run_query",
]
