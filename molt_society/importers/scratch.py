"""Every record of one import, on disk: an import's memory does not grow with the dump.

The builder (``importers.builder``) needs all records of an import at once: ids are de-duplicated across
files, a comment's depth comes from its parent chain, an agent registers at its first act. Held as
objects, the records of a 17M-event archive take tens of gigabytes. ``Scratch`` keeps them in a SQLite
database in a temporary folder (removed on ``close``): readers append through ``Log``s (rows go in in
batches); the builder finds duplicates, thread levels and first acts with SQL over narrow tables (ids,
times, positions) under a bounded page cache, and reads each record's fields back (``rec`` tables) only
when it makes the record's event. SQLite sorts and joins out of core, which is what this needs; the
database is a private temporary file of this process, never an input (records read back are the
project's own encoding of what the readers parsed).

Order: ``seq`` is the order records were appended (files in sorted path order, records in file order);
``snap`` the snapshot time of the record's file (``importers.snapshot_folders``; ``NO_SNAPSHOT`` without one),
so ``ORDER BY snap, seq`` is the read order of a snapshot series.
"""

from __future__ import annotations

import shutil
import sqlite3
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, Generic, TypeVar

import orjson

from molt_society.importers.file_report import FileReport
from molt_society.importers.records import (
    Author,
    CommentRecord,
    Counts,
    FileRecords,
    FollowRecord,
    Origin,
    PostRecord,
    SubmoltRef,
    author_of,
    sanitise_id,
)
from molt_society.importers.snapshot_folders import snapshot_time
from molt_society.runtime.tempdirs import private_dir
from molt_society.schemas.control import from_us, to_us

BATCH = 5_000
"""Rows appended before they are inserted (one ``executemany``)."""
CACHE_KIB = 64 * 1024
"""SQLite's page cache: what the store holds in memory whatever the dump's size."""
NO_SNAPSHOT = -(1 << 62)
"""``snap`` of a file outside any snapshot folder: before every snapshot, as the builder orders them."""

_PRAGMAS = (
    "journal_mode = OFF",
    "synchronous = OFF",
    "locking_mode = EXCLUSIVE",
    "temp_store = FILE",
    f"cache_size = -{CACHE_KIB}",
)

_SCHEMA = """
CREATE TABLE post (seq INTEGER PRIMARY KEY, id TEXT NOT NULL, snap INTEGER NOT NULL, file INTEGER NOT NULL,
    created INTEGER NOT NULL, dup INTEGER NOT NULL DEFAULT 0);
CREATE TABLE post_rec (seq INTEGER PRIMARY KEY, rec BLOB NOT NULL);
CREATE TABLE comment (seq INTEGER PRIMARY KEY, id TEXT NOT NULL, post_id TEXT NOT NULL, parent_id TEXT,
    src_depth INTEGER,
    snap INTEGER NOT NULL, file INTEGER NOT NULL, created INTEGER NOT NULL, dup INTEGER NOT NULL DEFAULT 0,
    depth INTEGER, replied_at INTEGER, reason TEXT);
CREATE TABLE comment_rec (seq INTEGER PRIMARY KEY, rec BLOB NOT NULL);
CREATE TABLE follow (seq INTEGER PRIMARY KEY, follower TEXT NOT NULL, followee TEXT NOT NULL,
    at INTEGER NOT NULL, snap INTEGER NOT NULL, file INTEGER NOT NULL, position TEXT NOT NULL);
"""

POST_COLUMNS = "t.id, t.created, t.file, r.rec"
"""What ``Scratch.post`` reads, from ``post t JOIN post_rec r``."""
COMMENT_COLUMNS = "t.id, t.post_id, t.parent_id, t.src_depth, t.created, t.file, r.rec"
"""What ``Scratch.comment`` reads, from ``comment t JOIN comment_rec r``."""

T = TypeVar("T")
Row = tuple[Any, ...]


def rows_of(db: sqlite3.Connection, sql: str, params: tuple[Any, ...] = ()) -> Iterator[Row]:
    """The rows of a query on ``db``, fetched in batches (the cursor is kept to the caller's iteration)."""
    cur = db.execute(sql, params)
    while batch := cur.fetchmany(BATCH):
        yield from batch


def author_fields(a: Author | None) -> list[str | None] | None:
    """An author as the store keeps it (and the import's workers send it back): id, name, description."""
    return None if a is None else [a.id, a.name, a.description]


def _counts(c: Counts) -> list[int | None]:
    return [c.upvotes, c.downvotes, c.score, c.comment_count]


class Log(Generic[T]):
    """What a reader appends one file's records of one kind to (``FileRecords.posts`` and the like)."""

    def __init__(self, add: Callable[[int, int, T], None], file: int, snap: int) -> None:
        self._add = add
        self._file = file
        self._snap = snap

    def append(self, rec: T, /) -> None:
        self._add(self._file, self._snap, rec)

    @property
    def file(self) -> int:
        """The number the store gave the file (``Scratch.files``)."""
        return self._file

    @property
    def snap(self) -> int:
        """The file's snapshot time as rows keep it (``NO_SNAPSHOT`` outside a snapshot folder)."""
        return self._snap


class Scratch:
    """The records of one import in a temporary SQLite database; ``close`` removes it."""

    def __init__(self, folder: Path | None = None) -> None:
        self.dir = private_dir("society-records", folder)
        self._sides: list[sqlite3.Connection] = []
        self.db = self._open("records", _SCHEMA)
        self.files: list[str] = []
        """Report names of the files, by the number rows keep (``file``)."""
        tables = ("post", "post_rec", "comment", "comment_rec", "follow")
        self._pending: dict[str, list[Row]] = {table: [] for table in tables}
        self._seq = {"post": 0, "comment": 0, "follow": 0}
        self.series = False
        """Whether the records are read in snapshot-time order (set by the builder: a snapshot series)."""

    def _open(self, name: str, schema: str) -> sqlite3.Connection:
        db = sqlite3.connect(self.dir / f"{name}.sqlite", isolation_level=None)
        for pragma in _PRAGMAS:
            db.execute(f"PRAGMA {pragma}")
        db.executescript(schema)
        db.execute("BEGIN")
        return db

    def side(self, name: str, schema: str) -> sqlite3.Connection:
        """Another database in this store's folder (removed with it), for a table appended to while the
        records are read: its own file and page cache, so that its appends do not evict the pages the
        reads need (the builder's ``act`` table: 6.7 s of a 300,000-post import in the records' database,
        see ``Builder._flush_acts``)."""
        db = self._open(name, schema)
        self._sides.append(db)
        return db

    def hand_over(self) -> Path:
        """Insert what is pending, close the database and keep it: the file of a part of one file's records
        read apart (``importers.comment_parts``), for another store to ``adopt_comments``; removing its
        folder (``dir``) is the adopter's."""
        self.flush()
        self.db.execute("COMMIT")
        for db in self._sides:
            db.close()
        self.db.close()
        return self.dir / "records.sqlite"

    def adopt_comments(self, part: Path, log: Log[CommentRecord]) -> int:
        """Append the comments of ``part`` (a handed-over store's database) as if ``log`` had appended
        them now, in their order there; how many. One ``INSERT ... SELECT`` per table, without a row
        through Python (470,000 comments: 0.9 s)."""
        self.flush()
        base = self._seq["comment"]
        db = self.db
        db.execute("COMMIT")  # SQLite attaches outside a transaction
        db.execute("ATTACH DATABASE ? AS part", (str(part),))
        try:
            db.execute("BEGIN")
            n = db.execute(
                "INSERT INTO comment SELECT seq + ?, id, post_id, parent_id, src_depth, ?, ?, created, 0, "
                "NULL, NULL, NULL FROM part.comment ORDER BY seq",
                (base, log.snap, log.file),
            ).rowcount
            db.execute(
                "INSERT INTO comment_rec SELECT seq + ?, rec FROM part.comment_rec ORDER BY seq", (base,)
            )
            db.execute("COMMIT")
        finally:
            db.execute("DETACH DATABASE part")
            db.execute("BEGIN")
        self._seq["comment"] += n
        return n

    def close(self) -> None:
        for db in self._sides:
            db.close()
        self.db.close()
        shutil.rmtree(self.dir, ignore_errors=True)

    # --- appending ---------------------------------------------------------------------------------

    def file_records(self, name: str) -> FileRecords:
        """The ``FileRecords`` a reader fills for the file reported as ``name``: its posts, comments and
        follows go to this store, its listings (agents, submolts: one row per agent) stay in memory."""
        file = len(self.files)
        self.files.append(name)
        at = snapshot_time(name)
        snap = NO_SNAPSHOT if at is None else to_us(at)
        return FileRecords(
            FileReport(name),
            posts=Log(self._add_post, file, snap),
            comments=Log(self._add_comment, file, snap),
            follows=Log(self._add_follow, file, snap),
            snapshot_at=at,
        )

    def count(self, kind: str) -> int:
        """Records of ``kind`` (post, comment, follow) appended, duplicates included."""
        return self._seq[kind]

    def _next(self, kind: str) -> int:
        self._seq[kind] += 1
        return self._seq[kind]

    def _queue(self, table: str, row: Row) -> None:
        rows = self._pending[table]
        rows.append(row)
        if len(rows) >= BATCH:
            self.flush()

    def _add_post(self, file: int, snap: int, rec: PostRecord) -> None:
        seq = self._next("post")
        self._pending["post_rec"].append((seq, self.post_blob(rec)))
        self._queue("post", (seq, rec.id, snap, file, to_us(rec.created_at)))

    def _add_comment(self, file: int, snap: int, rec: CommentRecord) -> None:
        seq = self._next("comment")
        self._pending["comment_rec"].append((seq, self.comment_blob(rec)))
        row = (seq, rec.id, rec.post_id, rec.parent_id, rec.source_depth, snap, file, to_us(rec.created_at))
        self._queue("comment", row)

    def _add_follow(self, file: int, snap: int, rec: FollowRecord) -> None:
        pair = (sanitise_id(rec.follower), sanitise_id(rec.followee))
        row = (self._next("follow"), *pair, to_us(rec.at), snap, file, rec.origin.position)
        self._queue("follow", row)

    def flush(self) -> None:
        """Insert the rows appended since the last flush."""
        p = self._pending
        if p["post"]:
            self.db.executemany("INSERT INTO post VALUES (?, ?, ?, ?, ?, 0)", p["post"])
            self.db.executemany("INSERT INTO post_rec VALUES (?, ?)", p["post_rec"])
        if p["comment"]:
            self.db.executemany(
                "INSERT INTO comment VALUES (?, ?, ?, ?, ?, ?, ?, ?, 0, NULL, NULL, NULL)", p["comment"]
            )
            self.db.executemany("INSERT INTO comment_rec VALUES (?, ?)", p["comment_rec"])
        if p["follow"]:
            self.db.executemany("INSERT INTO follow VALUES (?, ?, ?, ?, ?, ?, ?)", p["follow"])
        for rows in p.values():
            rows.clear()

    # --- reading back ------------------------------------------------------------------------------

    def order(self, alias: str = "") -> str:
        """The SQL order of the records as the builder reads them (columns of table ``alias``)."""
        a = f"{alias}." if alias else ""
        return f"{a}snap, {a}seq" if self.series else f"{a}seq"

    def rows(self, sql: str, params: tuple[Any, ...] = ()) -> Iterator[Row]:
        """The rows of a query, fetched in batches (the cursor is kept to the caller's iteration)."""
        return rows_of(self.db, sql, params)

    def origin(self, file: int, position: str) -> Origin:
        return Origin(self.files[file], position)

    def post(self, row: Row) -> PostRecord:
        """The post of a row ``(id, created, file, rec)``."""
        return post_of(self.files, row)

    def comment(self, row: Row) -> CommentRecord:
        """The comment of a row ``(id, post_id, parent_id, src_depth, created, file, rec)``."""
        return comment_of(self.files, row)

    @staticmethod
    def post_blob(rec: PostRecord) -> bytes:
        """The stored fields of ``rec`` (a copy completed by a duplicate is written back)."""
        sub = None if rec.submolt is None else [rec.submolt.name, rec.submolt.display_name]
        return orjson.dumps(
            [rec.title, rec.content, author_fields(rec.author), sub, _counts(rec.counts), rec.origin.position]
        )

    @staticmethod
    def comment_blob(rec: CommentRecord) -> bytes:
        """The stored fields of ``rec`` that the ``comment`` table's columns do not hold."""
        return orjson.dumps(
            [rec.content, author_fields(rec.author), _counts(rec.counts), rec.origin.position]
        )


def post_of(files: list[str], row: Row) -> PostRecord:
    """The post of a row ``(id, created, file, rec)`` of a store whose files are ``files`` (``Scratch.files``;
    also read by the import's worker processes, ``importers.makers``)."""
    post_id, created, file, blob = row
    title, content, author, sub, counts, position = orjson.loads(blob)
    return PostRecord(
        post_id,
        title,
        content,
        None if author is None else author_of(*author),
        None if sub is None else SubmoltRef(*sub),
        from_us(created),
        Counts(*counts),
        Origin(files[file], position),
    )


def comment_of(files: list[str], row: Row) -> CommentRecord:
    """The comment of a row ``(id, post_id, parent_id, src_depth, created, file, rec)`` (``post_of``)."""
    cid, post_id, parent_id, source_depth, created, file, blob = row
    content, author, counts, position = orjson.loads(blob)
    return CommentRecord(
        cid,
        post_id,
        parent_id,
        source_depth,
        content,
        None if author is None else author_of(*author),
        from_us(created),
        Counts(*counts),
        Origin(files[file], position),
    )
