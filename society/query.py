"""Kept for the callers that have not moved yet: the access layer is ``warehouse``."""

from __future__ import annotations

from society.settings import Settings
from warehouse import QueryError, Refused, Result, open_reader
from warehouse.sink_http import query_http, running_sink_url

__all__ = ["QueryError", "Refused", "Result", "query_http", "run_query", "running_sink_url"]


def run_query(settings: Settings, sql: str) -> Result:
    """``sql`` through the society's reader (``warehouse.open_reader``)."""
    reader = open_reader(settings)
    try:
        return reader.query(sql)
    finally:
        reader.close()
