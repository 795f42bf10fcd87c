"""What a query returns, and how it fails.

Every path into ClickHouse (a read-only session, the sink's ``/query``, a caller's own client) fails with
``QueryError`` (``Refused`` when ClickHouse's protections refused the query), carrying the first line of
the driver's message: clickhouse-connect and chDB raise several driver-specific types, and no caller
above this layer needs to know them.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any


class QueryError(Exception):
    """ClickHouse (or the sink in front of it) did not run the query; the message says why."""


class Refused(QueryError):
    """The query does more than read the society's tables; the message names what was refused."""


@dataclass(frozen=True)
class Result:
    columns: list[str]
    rows: list[list[Any]]

    @classmethod
    def of(cls, res: Any) -> Result:
        """A clickhouse-connect ``QueryResult`` as plain column names and rows of Python values."""
        return cls(list(res.column_names), [list(r) for r in res.result_rows])

    def df(self) -> Any:
        """The rows as a pandas DataFrame."""
        import pandas as pd

        return pd.DataFrame(self.rows, columns=self.columns)


def first_line(exc: BaseException) -> str:
    """The first line of an exception's message (ClickHouse's messages go on with a stack trace)."""
    text = str(exc).strip()
    return text.splitlines()[0] if text else repr(exc)


@contextmanager
def driver_errors() -> Iterator[None]:
    """Turn whatever the driver raises inside the block into ``QueryError`` (its first line); a
    ``QueryError`` raised inside passes unchanged."""
    try:
        yield
    except QueryError:
        raise
    except Exception as exc:  # clickhouse-connect and chDB raise several driver-specific types
        raise QueryError(first_line(exc)) from None
