"""Deleting one society's rows from every table that holds them (``society run --replace``, an interrupted
experiment pair).

The tables are those ClickHouse itself lists (``system.tables`` with a ``society`` column), each name
checked as an identifier before it is placed in SQL; the society travels as a query parameter. The
``experiments`` table is kept: a pair's rows there are replaced by newer versions instead.
"""

from __future__ import annotations

import re
from typing import Any

from molt_society.runtime.logs import get_logger

log = get_logger(__name__)

KEPT = frozenset({"experiments"})
"""Tables a purge leaves alone."""
_IDENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def purge_statements(tables: list[str], society: str) -> list[tuple[str, dict[str, Any]]]:
    """The deletes of ``society``'s rows: one ``ALTER TABLE ... DELETE`` per table, the name a parameter."""
    out = []
    for table in tables:
        if table in KEPT:
            continue
        if not _IDENT.fullmatch(table):
            raise ValueError(f"not a table name: {table!r}")
        sql = f"ALTER TABLE `{table}` DELETE WHERE society = {{s:String}} SETTINGS mutations_sync = 2"
        out.append((sql, {"s": society}))
    return out


def tables_with_society(client: Any) -> list[str]:
    """The MergeTree tables of the database that have a ``society`` column."""
    result = client.query(
        "SELECT t.name FROM system.tables AS t "
        "WHERE t.database = currentDatabase() AND t.engine LIKE '%MergeTree%' AND t.name IN "
        "(SELECT table FROM system.columns WHERE database = currentDatabase() AND name = 'society') "
        "ORDER BY t.name"
    )
    return [str(r[0]) for r in result.result_rows]


def purge_society(client: Any, society: str) -> list[str]:
    """Delete ``society``'s rows from every table that has them (but ``KEPT``); the tables."""
    statements = purge_statements(tables_with_society(client), society)
    for sql, params in statements:
        client.command(sql, parameters=params)
    log.info("society.purged", society=society, tables=len(statements))
    return [sql.split("`")[1] for sql, _ in statements]
