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

4. **The society's tables and nothing else, by its syntax tree.** A table named with a database must be
   in the session's database (or one of ``system``'s number generators); no identifier may start with
   another database's name (``x IN system.processes``); table functions are the generators of
   ``TABLE_FUNCTIONS`` (``merge('system', ...)`` reads other databases) or a parameterised view of the
   society's schema by its bare name (``PARAMETERISED_VIEWS``); scalar functions that reach the
   file system, the host, the account or other tables (``OUTSIDE_FUNCTIONS``: ``file`` reads any file in
   ``clickhouse-local``, hence chDB, which skips its ``user_files_path`` check there) are refused; ``SHOW``
   is ``SHOW TABLES`` of the session's database (``DESCRIBE`` gives a table's columns).

Limits (``max_execution_time``, ``max_memory_usage``, ``max_result_rows``, ``max_result_bytes``,
``max_threads``) bound what a query may cost, and the result a reader can make the process hold. Nothing
here looks at the SQL text with Python.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from molt_society.runtime.logs import get_logger
from molt_society.warehouse.result import QueryError, Refused, Result, first_line

log = get_logger(__name__)

READ_ROOTS = {
    "SelectWithUnionQuery": "SELECT",
    "SelectIntersectExceptQuery": "SELECT",
    "Explain": "EXPLAIN",
    "ShowTables": "SHOW",
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
OUTSIDE_FUNCTIONS = frozenset(
    {
        "file", "getserversetting", "getmergetreesetting", "filesystemavailable", "filesystemcapacity",
        "filesystemunreserved", "filesystemfree", "hostname", "fqdn", "fullhostname", "getmacro",
        "serveruuid", "getoskernelversion", "displayname", "currentuser", "user", "current_user",
        "currentroles", "enabledroles", "defaultroles", "currentprofiles", "getclienthttpheader",
        "catboostevaluate", "modelevaluate", "joinget", "joingetornull", "hascolumnintable",
        "showcertificate", "tcpport", "addresstoline", "addresstolinewithinlines", "addresstosymbol",
        "demangle", "trace", "zookeepersessionuptime", "getscalar", "__getscalar", "initialqueryid",
        "queryid", "buildid", "revision",
    }
)  # fmt: skip
"""Scalar functions (lower case) that reach outside the society's tables: files, the host, the account,
the server's settings, other tables by name. Also every function whose name starts with ``dict``
(dictionaries read their own sources)."""

TABLE_FUNCTIONS = frozenset(
    {"numbers", "numbers_mt", "generate_series", "generateseries", "values", "generaterandom", "view", "null",
     "primes"}
)  # fmt: skip
"""Table functions (lower case) a read may call: generators, and ``view`` (whose query is checked too)."""

PARAMETERISED_VIEWS = frozenset({"cascade_adoptions_sample", "clone_pairs_at"})
"""Parameterised views of the society's own schema (``molt_dynamics.sql``, ``patterns.sql``), called like
table functions by their bare name, which resolves to the session's database: they read the society's
tables only."""

SYSTEM_GENERATORS = frozenset({"one", "numbers", "numbers_mt", "zeros", "zeros_mt"})
"""Tables of ``system`` a read may name: they hold no data of anybody's."""

_AST_LINE = re.compile(r"^( *)(\S+)(.*)$")
_SHOW_TABLES = re.compile(r"^SHOW (?:FULL )?TABLES(?: (?:FROM|IN) (\S+))?", re.IGNORECASE)


@dataclass(frozen=True)
class ReadLimits:
    """What one outside query may cost (ClickHouse settings of the read-only session)."""

    max_execution_time: float = 60.0
    max_memory_usage: int = 1 << 30
    max_result_rows: int = 1_000_000
    max_result_bytes: int = 128 << 20
    max_threads: int = 1
    # rows per block: a result over max_result_bytes is caught within one block of the limit
    max_block_size: int = 8192
    # above this many bytes a GROUP BY or ORDER BY goes on in temporary files on disk, and a JOIN's right
    # side in buckets on disk (grace hash) (0: never)
    spill_bytes: int = 0

    def settings(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "max_execution_time": self.max_execution_time,
            "max_memory_usage": self.max_memory_usage,
            "max_result_rows": self.max_result_rows,
            "max_result_bytes": self.max_result_bytes,
            "result_overflow_mode": "throw",
            "max_threads": self.max_threads,
            "max_block_size": self.max_block_size,
        }
        if self.spill_bytes:
            out["max_bytes_before_external_group_by"] = self.spill_bytes
            out["max_bytes_before_external_sort"] = self.spill_bytes
            # a JOIN's right side above this goes to disk in buckets (grace hash)
            out["join_algorithm"] = "grace_hash,hash"  # hash where grace hash cannot (some join kinds)
            out["max_bytes_in_join"] = self.spill_bytes
        return out


class ReadOnlySession:
    """A client that can only read (see module docstring). Use it from one thread at a time."""

    def __init__(self, client: Any, *, embedded: bool, limits: ReadLimits | None = None) -> None:
        self.client = client
        self.embedded = embedded
        self.limits = limits or ReadLimits()
        # statement as sent -> ClickHouse's single statement of it, checked
        self._verdicts: dict[str, str] = {}
        row = client.query(
            "SELECT currentDatabase(), groupArray(name) FROM system.databases WHERE name != currentDatabase()"
        ).result_rows[0]
        self.database = str(row[0])
        self.other_databases = frozenset(str(d) for d in row[1])
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

    def statement(self, sql: str) -> str:
        """ClickHouse's rendering of ``sql`` as one read statement; raises ``Refused`` when it is not a
        read or reaches past the society's tables."""
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
        check_reach(tree, single, self.database, self.other_databases)
        if len(self._verdicts) > 512:
            self._verdicts.clear()
        self._verdicts[sql] = single
        return single

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
        single = self.statement(sql)
        try:
            return call(single, settings=self._per_query)
        except Exception as exc:
            error = refusal_or_error(exc)
        if self.embedded:
            self._flush()
        raise error

    def _flush(self) -> None:
        """After a failed read on chDB: a query that failed while streaming (a result over its limit)
        leaves the rest of its data on the handle, and the next query on it returned that (another
        reader's query would have parsed an attacker's rows as ClickHouse's answer). Read until the
        handle answers a probe with the probe's own result."""
        for _ in range(4):
            try:
                if self.client.query("SELECT 'flushed'").result_rows == [("flushed",)]:
                    return
            except Exception as exc:  # the leftover, surfacing as this probe's failure
                log.info("sql.flushed", leftover=first_line(exc)[:80])
        raise QueryError("the read-only session could not be cleared after a failed read")

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


def check_reach(tree: list[str], single: str, database: str, others: frozenset[str]) -> None:
    """Refuse a read (``EXPLAIN AST`` lines of ClickHouse's single statement ``single``) that reaches past
    the tables of ``database``: see the module docstring, wall 4. ``others``: the other databases."""
    root = tree[0].split()[0]
    if root == "ShowTables":
        m = _SHOW_TABLES.match(single)  # ClickHouse's rendering, not the text as sent
        if m is None:
            raise Refused("only SHOW TABLES is shown here (DESCRIBE gives a table's columns)")
        if m.group(1) and m.group(1).strip('`"') != database:
            raise Refused(f"database {m.group(1)} is not the society's: only its own tables are shown")
    if root in ("ShowCreateTableQuery", "ShowCreateViewQuery", "ExistsTableQuery", "ExistsViewQuery"):
        names = tree[0].split("(", 1)[0].split()[1:]
        if len(names) == 2 and names[0] != database:
            raise Refused(f"{names[0]}.{names[1]} is not one of the society's tables")
    for i, line in enumerate(tree):
        m = _AST_LINE.match(line)
        if not m:
            continue
        kind, rest = m.group(2), m.group(3).split()
        name = rest[0] if rest else ""
        if kind in ("Identifier", "TableIdentifier") and "." in name:
            db, table = name.split(".", 1)
            outside = db in others if kind == "Identifier" else db != database
            if outside and not (db == "system" and table in SYSTEM_GENERATORS):
                raise Refused(f"{name} is not one of the society's tables: reads here reach only those")
        if kind == "Function":
            in_table = i > 0 and tree[i - 1].strip().startswith("TableExpression")
            lower = name.lower()
            if in_table and lower not in TABLE_FUNCTIONS and name not in PARAMETERISED_VIEWS:
                raise Refused(f"table function {name}() reaches outside the society's tables")
            if not in_table and (lower in OUTSIDE_FUNCTIONS or lower.startswith("dict")):
                raise Refused(f"function {name}() reaches outside the society's tables (files, host, user)")


def refusal_or_error(exc: BaseException) -> QueryError:
    """ClickHouse's error as ``Refused`` when its protections refused the query, else ``QueryError``.
    (What reaches past the society's tables, table functions included, ``check_reach`` refused before.)"""
    text = first_line(exc)
    if "READONLY" in text or "readonly mode" in text or "ACCESS_DENIED" in text:
        what = "a query here cannot change settings" if "Cannot modify" in text else "not a read"
        return Refused(f"ClickHouse's read-only mode ({what}): {text}")
    return QueryError(text)


def _literal(value: Any) -> str:
    if isinstance(value, str):
        return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"
    return str(value)
