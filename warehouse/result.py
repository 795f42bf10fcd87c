"""What a query returns, and how it fails."""

from __future__ import annotations

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

    def df(self) -> Any:
        """The rows as a pandas DataFrame."""
        import pandas as pd

        return pd.DataFrame(self.rows, columns=self.columns)
