"""Where a report reads its data: the society's ClickHouse, through the one access layer (``warehouse``).

- A ClickHouse server, or the embedded chDB with nothing else running: ``ClientWarehouse.open`` holds a
  read-only session (``warehouse.guard``) for the reads and a client of its own for the one write a report
  makes, its sentence embeddings.
- The embedded chDB while a sink owns it: reads through the sink's ``/query`` (read-only, off the insert
  path), embeddings through its authenticated internal endpoint (the secret in ``sink.token``).
- ``ClientWarehouse(client)``: a client the caller opened itself (tests and benchmarks in one process).

The only values ever placed in SQL are the society name (``quoted``: checked by
``schemas.society_name.check_society_name``), numbers and hashes the report computed itself; agent-written
text only travels as data. Where the data is (a running sink or a session of this process), the read-only
sessions, the quoting and the errors are the access layer's (``warehouse``); this module adds the report's
one write and its own limits.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

from molt_society.runtime.settings import Settings, get_settings
from molt_society.warehouse import (
    QueryError,
    ReadLimits,
    ReadOnlySession,
    Result,
    SinkReader,
    driver_errors,
    quoted,
    running_sink,
)
from molt_society.warehouse.reader import open_session, require_store
from molt_society.warehouse.sink_http import STATE_FILE, read_token, store_embeddings_http

__all__ = [
    "ClientWarehouse",
    "SinkWarehouse",
    "Warehouse",
    "open_warehouse",
    "quoted",
    "report_limits",
    "sink_warehouse",
]


class Warehouse(Protocol):
    def query(self, sql: str) -> Result: ...

    def store_embeddings(
        self, model: str, hashes: Sequence[int], vectors: Sequence[Sequence[float]]
    ) -> None: ...

    def close(self) -> None: ...


class ClientWarehouse:
    """A clickhouse-connect client (server or chDB) with the schema applied; reads through a read-only
    session when one is given (``open``), else through the client itself (a caller's own client)."""

    def __init__(self, client: Any, reader: ReadOnlySession | None = None) -> None:
        from molt_society.warehouse.schema import ensure_schema

        self.client = client
        self.reader = reader
        ensure_schema(client)

    @classmethod
    def open(
        cls, url: str, reader_url: str | None = None, limits: ReadLimits | None = None
    ) -> ClientWarehouse:
        """``limits``: of the read-only session (default ``report_limits()``: the report's own queries)."""
        from molt_society.warehouse.client import connect

        writer = connect(url)
        wh = cls(writer)
        wh.reader = open_session(url, reader_url, limits or report_limits(get_settings()))
        return wh

    def query(self, sql: str) -> Result:
        if self.reader is not None:
            return self.reader.query(sql)
        with driver_errors():
            return Result.of(self.client.query(sql))

    def store_embeddings(self, model: str, hashes: Sequence[int], vectors: Sequence[Sequence[float]]) -> None:
        with driver_errors():
            self.client.insert(
                "embeddings",
                [[model, int(h), list(v)] for h, v in zip(hashes, vectors, strict=True)],
                column_names=["model", "text_hash", "vector"],
            )

    def close(self) -> None:
        if self.reader is not None:
            self.reader.close()
        self.client.close()


class SinkWarehouse:
    """The running sink: reads through ``/query``, embeddings through its authenticated internal path."""

    def __init__(self, url: str, token: str | None = None) -> None:
        self.url = url
        self.token = token
        self.reader = SinkReader(url, timeout=3600.0)

    def query(self, sql: str) -> Result:
        return self.reader.query(sql)

    def store_embeddings(self, model: str, hashes: Sequence[int], vectors: Sequence[Sequence[float]]) -> None:
        if self.token is None:
            raise QueryError("storing embeddings through the sink needs its secret (sink.token)")
        store_embeddings_http(self.url, self.token, model, hashes, vectors)

    def close(self) -> None:
        return None


def report_limits(settings: Settings) -> ReadLimits:
    """Limits of the report's own read-only session on a stopped society: its fixed queries scan the whole
    history (lexical turnover of a 86,000-text crawl needs more than 2 GiB and 60 s; at 1.35M events the
    cascades' aggregation needed more than 8 GiB until it could spill to disk), and no sink's inserts share
    the engine then. Still read-only, one statement at a time, two threads."""
    return ReadLimits(
        max_execution_time=settings.report_query_timeout_seconds,
        max_memory_usage=settings.report_query_max_memory_bytes,
        max_result_bytes=settings.report_query_max_memory_bytes,
        # rows are bounded by the bytes above: a large society's interaction edges or adoptions exceed the
        # outside queries' million rows
        max_result_rows=1 << 40,
        max_block_size=65_409,
        max_threads=2,
        spill_bytes=settings.report_query_spill_bytes,
    )


def sink_warehouse(settings: Settings, url: str) -> SinkWarehouse:
    """The sink at ``url`` with the secret of whichever society's sink it is (read from its state dir)."""
    for path in settings.state_dir.glob(f"*/{STATE_FILE}"):
        try:
            if url in path.read_text():
                return SinkWarehouse(url, read_token(settings.state_dir, path.parent.name))
        except (OSError, QueryError):
            continue
    return SinkWarehouse(url)


def open_warehouse(settings: Settings) -> Warehouse:
    """The society's ClickHouse as ``society sql`` reaches it (see module docstring)."""
    url = running_sink(settings)
    if url is not None:
        return sink_warehouse(settings, url)
    require_store(settings)
    return ClientWarehouse.open(
        settings.clickhouse_url, settings.clickhouse_reader_url, report_limits(settings)
    )
