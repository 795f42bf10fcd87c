"""Reading a SQLite archive in the observatory schema (kelkalot/moltbook-observatory,
``observatory/database/migrations.py``): ``posts``, ``comments`` (``parent_id`` for replies), ``agents``
(with ``created_at``), ``submolts`` and ``follows``.

The file is opened read-only and immutable (``mode=ro&immutable=1``): an untrusted archive is read,
never written, and no journal beside it is looked at. Rows are streamed table by table in ``rowid``
order (a comments table of ``comment_parts.MIN_ROWS`` rows or more in two parts at once, one of them in a
worker process, with the store and report of one read: ``importers.comment_parts``); each row goes
through the same record readers as a JSON object, with the observatory's column names mapped to the API's
(``agent_id`` -> ``author_id``, ``agent_name`` -> ``author_name``), so the same rules apply (a net
``score``, ids, zoned timestamps) and the same report counts what was read, skipped and left out
(``url``, ``is_pinned``, ``fetched_at`` ... as "fields not imported").

A file with none of the tables is an unknown shape. Times the SQLite itself wrote
(``CURRENT_TIMESTAMP``, ``YYYY-MM-DD HH:MM:SS`` without a zone) are UTC by SQLite's definition; they are
read as such for follows (``first_seen_at``) and agents' ``created_at``, and the report notes it.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from molt_society.importers.comment_parts import CommentParts
from molt_society.importers.json_items import read_comment, read_post
from molt_society.importers.records import (
    AgentRecord,
    FileRecords,
    FollowRecord,
    RecordError,
    SubmoltRecord,
    optional_text,
    parse_id,
    parse_time,
)
from molt_society.importers.scratch import Scratch

MAGIC = b"SQLite format 3\x00"
TABLES = ("posts", "comments", "agents", "submolts", "follows")
_RENAMED = {"agent_id": "author_id", "agent_name": "author_name"}
_SQLITE_NAIVE = "SQLite timestamp without a zone, read as UTC (SQLite's CURRENT_TIMESTAMP is UTC)"


def is_sqlite(head: bytes) -> bool:
    return head.startswith(MAGIC)


def _rows(
    db: sqlite3.Connection, table: str, *, api: bool = False, span: tuple[int, int] | None = None
) -> Iterator[tuple[int, dict[str, Any]]]:
    """The rows of ``table`` in ``rowid`` order as ``(rowid, {column: value})``; with ``api`` the
    observatory's column names are the API's (``_RENAMED``); ``span`` the first and last rowid read."""
    where = "" if span is None else " WHERE rowid BETWEEN ? AND ?"
    cur = db.execute(f'SELECT rowid AS "__rowid", * FROM "{table}"{where} ORDER BY rowid', span or ())
    names = [d[0] for d in cur.description][1:]
    if api:  # renamed once here, not in every row (the later of two same names wins, as in a dict)
        names = [_RENAMED.get(k, k) for k in names]
    while batch := cur.fetchmany(5_000):
        for rowid, *row in batch:
            yield int(rowid), dict(zip(names, row, strict=True))


def _time(value: object, out: FileRecords, where: str) -> datetime:
    """A zoned ISO time, or SQLite's own zone-less UTC ``YYYY-MM-DD HH:MM:SS`` (noted)."""
    if isinstance(value, str) and len(value) >= 19 and value[10] == " " and "+" not in value[10:]:
        try:
            parsed = datetime.fromisoformat(value)
        except ValueError:
            pass
        else:
            if parsed.tzinfo is None:
                out.report.note(_SQLITE_NAIVE, where)
                return parsed.replace(tzinfo=UTC)
    return parse_time(value)


def read_sqlite(path: Path, out: FileRecords, store: Scratch | None = None) -> None:
    """Every record of the observatory tables the file has; an unknown shape when it has none. With the
    ``store`` that ``out`` appends to, a large ``comments`` table is read in two parts at once
    (``importers.comment_parts``)."""
    try:
        db = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro&immutable=1", uri=True)
    except sqlite3.Error as exc:
        out.report.error("file", f"SQLite file cannot be opened: {exc}")
        return
    try:
        names = {r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        present = [t for t in TABLES if t in names]
        if not present:
            shown = ", ".join(sorted(names)[:8]) or "none"
            out.report.skip_reason = (
                f"unknown shape: {out.report.file} is a SQLite database without the observatory's tables "
                f"({', '.join(TABLES)}); its tables: {shown}"
            )
            return
        out.report.shape = "observatory_sqlite"
        parts = None
        if store is not None and "comments" in present:
            parts = CommentParts.start(read_comments, path, db, out, store, posts="posts" in present)
        try:
            for table in present:
                if table == "comments" and parts is not None:
                    parts.read_own()
                    parts.adopt()
                else:
                    _READERS[table](db, out)
        finally:
            if parts is not None:
                parts.close()
    except sqlite3.Error as exc:
        out.report.error("file", f"SQLite file cannot be read: {exc} (records read before it are kept)")
    finally:
        db.close()


def _posts(db: sqlite3.Connection, out: FileRecords) -> None:
    for rowid, doc in _rows(db, "posts", api=True):
        read_post(doc, out, f"posts row {rowid}")


def read_comments(db: sqlite3.Connection, out: FileRecords, span: tuple[int, int] | None = None) -> None:
    """The ``comments`` table's rows (those of rowids ``span`` only, when given) into ``out``."""
    for rowid, doc in _rows(db, "comments", api=True, span=span):
        read_comment(
            doc, out, f"comments row {rowid}", post_id=None, nesting_parent=None, use_source_depth=False
        )


def _comments(db: sqlite3.Connection, out: FileRecords) -> None:
    read_comments(db, out)


def _agents(db: sqlite3.Connection, out: FileRecords) -> None:
    for rowid, doc in _rows(db, "agents"):
        where = f"agents row {rowid}"
        out.report.read["agents"] += 1
        try:
            name = optional_text(doc.get("name"))
            if not name or not name.strip():
                raise RecordError("agent name missing")
            created = doc.get("created_at")
            out.agents.append(
                AgentRecord(
                    name=name.strip(),
                    description=optional_text(doc.get("description")) or None,
                    registered_at=_time(created, out, where) if created else None,
                    origin=out.origin(where),
                    id=parse_id(doc.get("id"), "agent id") if doc.get("id") not in (None, "") else None,
                )
            )
        except RecordError as exc:
            out.report.skip(exc.reason, where, exc.detail)


def _submolts(db: sqlite3.Connection, out: FileRecords) -> None:
    for rowid, doc in _rows(db, "submolts"):
        where = f"submolts row {rowid}"
        out.report.read["submolts"] += 1
        name = optional_text(doc.get("name"))
        if not name or not name.strip():
            out.report.skip("submolt name missing", where)
            continue
        out.submolts.append(
            SubmoltRecord(
                name=name.strip(),
                display_name=optional_text(doc.get("display_name")) or None,
                description=optional_text(doc.get("description")) or None,
                origin=out.origin(where),
            )
        )


def _follows(db: sqlite3.Connection, out: FileRecords) -> None:
    for rowid, doc in _rows(db, "follows"):
        where = f"follows row {rowid}"
        out.report.read["follows"] += 1
        try:
            out.follows.append(
                FollowRecord(
                    follower=parse_id(doc.get("follower_id"), "follower id"),
                    followee=parse_id(doc.get("following_id"), "followed agent id"),
                    at=_time(doc.get("first_seen_at"), out, where),
                    origin=out.origin(where),
                )
            )
        except RecordError as exc:
            out.report.skip(exc.reason, where, exc.detail)


_READERS = {
    "posts": _posts,
    "comments": _comments,
    "agents": _agents,
    "submolts": _submolts,
    "follows": _follows,
}
