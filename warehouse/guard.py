"""The read-only gate: what a query from outside a process may do, enforced by ClickHouse itself.

A ``ReadOnlySession`` wraps a clickhouse-connect client that is used for nothing else. Three walls, all
ClickHouse's own:

1. **The session is read-only.** On the embedded chDB the handle's session gets the limits and then
   ``readonly = 1`` (chDB keeps ``SET`` per handle, and a session in read-only mode refuses every later
   ``SET`` and ``SETTINGS`` clause, so nothing can lift it). On a server the same settings travel with
   every query, ``readonly`` last; a dedicated read-only account (``CLICKHOUSE_READER_URL``, a profile
   with ``readonly = 1``: docker/clickhouse/users.d/reader.xml) is the production setup. In read-only mode
   ClickHouse refuses DDL, inserts, mutations, ``SYSTEM``, settings, temporary tables and every table
   function that reaches files, the network or other processes (``file``, ``url``, ``remote``, ``s3``,
   ``executable``, ...).
2. **One statement, as ClickHouse parsed it.** The text goes to ClickHouse as a query *parameter* of
   ``formatQuerySingleLine``: ClickHouse's parser refuses multi-statements and unterminated comments, and
   what runs afterwards is its own rendering of the single statement, never the text as sent (chDB, like
   ``clickhouse-local``, would otherwise run every statement of ``SELECT 1; DROP TABLE t``).
3. **A read, by its syntax tree.** ``EXPLAIN AST`` of that statement must have a root that reads
   (``SELECT``, ``WITH``, ``EXPLAIN``, ``SHOW``, ``DESCRIBE``, ``EXISTS``) and no ``INTO OUTFILE``.
   ``clickhouse-local`` (hence chDB) writes ``INTO OUTFILE`` files even in read-only mode and lets a
   read-only session ``KILL`` queries of its own user, which is the sink's too; a server refuses the
   first over HTTP and a separate account cannot do the second.

Limits (``max_execution_time``, ``max_memory_usage``, ``max_result_rows``, ``max_threads``) bound what a
query may cost. Nothing here looks at the SQL text with Python.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from molt_society.warehouse.result import QueryError, Refused, Result, first_line

READ_ROOTS = {
    "SelectWithUnionQuery": "SELECT",
    "SelectIntersectExceptQuery": "SELECT",
    "Explain": "EXPLAIN",
    "ShowTables": "SHOW",
    "ShowColumns": "SHOW",
    "ShowCreateTableQuery": "SHOW CREATE",
    "ShowCreateViewQuery": "SHOW CREATE",
    "DescribeQuery": "DESCRIBE",
    "ExistsTableQuery": "EXISTS",
    "ExistsViewQuery": "EXISTS",
}
"""Roots of ``EXPLAIN AST`` that only read, and how to call them."""

_KIND_NAMES = {
    "DropQuery": "DROP or DETACH",
    "TruncateQuery": "TRUNCATE",
    "Set": "SET",
    "InsertQuery": "INSERT",
    "AlterQuery": "ALTER",
    "CreateQuery": "CREATE",
    "SetQuery": "SET",
    "KillQueryQuery": "KILL",
    "SystemQuery": "SYSTEM",
    "UseQuery": "USE",
    "OptimizeQuery": "OPTIMIZE",
    "RenameQuery": "RENAME",
    "DeleteQuery": "DELETE",
    "UpdateQuery": "UPDATE",
    "BackupQuery": "BACKUP or RESTORE",
    "CheckQuery": "CHECK",
    "WatchQuery": "WATCH",
    "UndropQuery": "UNDROP",
}
_AST_LINE = re.compile(r"^( *)(\S+)(.*)$")
_TABLE_FUNCTION = re.compile(r"^\s*Function (\w+)")


@dataclass(frozen=True)
class ReadLimits:
    """What one outside query may cost (ClickHouse settings of the read-only session)."""

    max_execution_time: float = 60.0
    max_memory_usage: int = 2 << 30
    max_result_rows: int = 1_000_000
    max_threads: int = 1

    def settings(self) -> dict[str, Any]:
        return {
            "max_execution_time": self.max_execution_time,
            "max_memory_usage": self.max_memory_usage,
            "max_result_rows": self.max_result_rows,
            "result_overflow_mode": "throw",
            "max_threads": self.max_threads,
        }


class ReadOnlySession:
    """A client that can only read (see module docstring). Use it from one thread at a time."""

    def __init__(self, client: Any, *, embedded: bool, limits: ReadLimits | None = None) -> None:
        self.client = client
        self.embedded = embedded
        self.limits = limits or ReadLimits()
        # statement as sent -> (ClickHouse's single statement, the table functions it calls)
        self._verdicts: dict[str, tuple[str, tuple[str, ...]]] = {}
        if embedded:
            # chDB keeps SET per handle: limits first, then read-only, after which nothing can change.
            for name, value in {**self.limits.settings(), "allow_python_table_function": 0}.items():
                client.command(f"SET {name} = {_literal(value)}")
            client.command("SET readonly = 1")
            self._per_query: dict[str, Any] = {}
        elif int(client.query("SELECT getSetting('readonly')").result_rows[0][0]) >= 1:
            self._per_query = {}  # a read-only account: its profile holds the limits and refuses any SET
        else:
            self._per_query = {**self.limits.settings(), "readonly": 1}

    def statement(self, sql: str) -> tuple[str, tuple[str, ...]]:
        """ClickHouse's rendering of ``sql`` as one read statement and the table functions it calls;
        raises ``Refused`` when it is not a read."""
        known = self._verdicts.get(sql)
        if known is not None:
            return known
        if not sql.strip():
            raise Refused("the query is empty")
        try:
            rows = self.client.query(
                "SELECT formatQuerySingleLine({q:String})", parameters={"q": sql}, settings=self._per_query
            ).result_rows
        except Exception as exc:  # clickhouse-connect raises several driver-specific types
            raise QueryError(first_line(exc)) from None
        single = str(rows[0][0])
        try:
            res = self.client.query(f"EXPLAIN AST {single}", settings=self._per_query)
        except Exception as exc:
            raise refusal_or_error(exc) from None
        tree = [str(r[0]) for r in res.result_rows]
        _check_read(tree)
        verdict = (single, tuple(table_functions(tree)))
        if len(self._verdicts) > 512:
            self._verdicts.clear()
        self._verdicts[sql] = verdict
        return verdict

    def run(self, sql: str) -> Any:
        """clickhouse-connect's result of ``sql`` as one read (``statement``); ``Refused`` otherwise."""
        return self._read(sql, self.client.query)

    def query(self, sql: str) -> Result:
        return Result.of(self.run(sql))

    def query_df(self, sql: str) -> Any:
        """The result as a pandas DataFrame (clickhouse-connect's own conversion)."""
        return self._read(sql, self.client.query_df)

    def _read(self, sql: str, call: Callable[..., Any]) -> Any:
        """``call`` (a query method of the client) on ClickHouse's single statement of ``sql``, with the
        session's settings; its failure as ``Refused`` or ``QueryError``."""
        single, functions = self.statement(sql)
        try:
            return call(single, settings=self._per_query)
        except Exception as exc:
            raise refusal_or_error(exc, functions) from None

    def close(self) -> None:
        self.client.close()


def _check_read(tree: list[str]) -> None:
    """Refuse a syntax tree (``EXPLAIN AST`` lines) that does not only read."""
    if not tree:
        raise Refused("ClickHouse returned no syntax tree for the query")
    m = _AST_LINE.match(tree[0])
    root = m.group(2) if m else tree[0]
    if root not in READ_ROOTS:
        what = _KIND_NAMES.get(root, root)
        raise Refused(f"{what} is not a read: only SELECT, WITH, EXPLAIN, SHOW, DESCRIBE and EXISTS run here")
    for line in tree[1:]:
        m = _AST_LINE.match(line)
        if m and len(m.group(1)) == 1 and m.group(2) == "Literal":
            raise Refused("INTO OUTFILE writes a file: queries here only return their result")


def table_functions(tree: list[str]) -> list[str]:
    """Names of the functions a syntax tree calls in table position (for messages)."""
    names = []
    for i, line in enumerate(tree):
        if line.strip() == "TableExpression (children 1)" and i + 1 < len(tree):
            m = _TABLE_FUNCTION.match(tree[i + 1])
            if m:
                names.append(m.group(1))
    return names


def refusal_or_error(exc: BaseException, functions: tuple[str, ...] = ()) -> QueryError:
    """ClickHouse's error as ``Refused`` when its protections refused the query (naming the table
    functions the query calls, the usual reason), else ``QueryError``."""
    text = first_line(exc)
    if "READONLY" in text or "readonly mode" in text or "ACCESS_DENIED" in text:
        named = ", ".join(f"{f}()" for f in functions)
        if "Cannot modify" in text:
            what = "a query here cannot change settings"
        elif named:
            what = f"table function {named} reaches outside the society's tables"
        else:
            what = "not a read"
        return Refused(f"ClickHouse's read-only mode ({what}): {text}")
    return QueryError(text)


def _literal(value: Any) -> str:
    if isinstance(value, str):
        return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"
    return str(value)
