"""A large SQLite ``comments`` table read in two parts at once (``importers.comment_parts``) gives the import
of reading it row by row: the same encoded events in the same order and the same report (counts, skips,
notes and their examples, errors), also when a part ends on a source error; a worker that dies ends the
import, saying so.

The archive: a generated observatory SQLite file (``bench.archive_gen``) whose comments table is changed
with ``sqlite3`` so that both parts hold rows the readers skip or note (no id, a time without a zone, an
unknown column's value), and a reply whose parent is in the other part.
"""

from __future__ import annotations

import functools
import os
import signal
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from molt_society.bench.archive_gen import generate
from molt_society.importers import comment_parts, import_stream, sqlite_db
from molt_society.importers.comment_parts import CommentParts, Span
from molt_society.importers.file_report import MAX_EXAMPLES, FileReport
from molt_society.importers.makers import MakerError
from molt_society.importers.records import FileRecords
from molt_society.importers.scratch import Scratch

CORES = len(os.sched_getaffinity(0))
pytestmark = pytest.mark.skipif(CORES < 2, reason="parts are read on two cores or more")


@pytest.fixture(scope="module")
def archive(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("parts")
    generate(folder, 300, 11, ["observatory-sqlite"])
    path = folder / "observatory.sqlite"
    db = sqlite3.connect(path)
    with db:
        (last,) = db.execute("SELECT max(rowid) FROM comments").fetchone()
        db.execute("ALTER TABLE comments ADD COLUMN mood TEXT")
        for rowid in (3, 9, last - 8, last - 2):  # in the first part and in the second
            db.execute("UPDATE comments SET id = NULL WHERE rowid = ?", (rowid,))
        for rowid in (4, 5, 6, 7, last - 5, last - 4, last - 3):  # more than MAX_EXAMPLES on each side
            db.execute("UPDATE comments SET created_at = '2026-01-30 10:00:00' WHERE rowid = ?", (rowid,))
        db.execute("UPDATE comments SET mood = 'calm' WHERE rowid IN (2, ?)", (last - 1,))
        (first_id,) = db.execute("SELECT id FROM comments WHERE rowid = 1").fetchone()
        db.execute("UPDATE comments SET parent_id = ? WHERE rowid = ?", (first_id, last))  # across the parts
    db.close()
    return path


def _imported(path: Path, parts_from: int, monkeypatch: pytest.MonkeyPatch) -> tuple[list[bytes], Any, int]:
    """The import's encoded events, its report, and how many files were read in parts."""
    with monkeypatch.context() as m:
        m.setattr(comment_parts, "MIN_ROWS", parts_from)
        used: list[bool] = []
        start = CommentParts.start

        def counted(*args: Any, **kwargs: Any) -> CommentParts | None:
            made = start(*args, **kwargs)
            used.append(made is not None)
            return made

        m.setattr(CommentParts, "start", counted)
        stream = import_stream(path, "p")
    try:
        return list(stream.spill), stream.report.to_dict(), sum(used)
    finally:
        stream.close()


def test_two_parts_give_the_import_of_one_read(archive: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    alone, alone_report, alone_parts = _imported(archive, 10**12, monkeypatch)
    parted, parted_report, parted_parts = _imported(archive, 0, monkeypatch)
    assert (alone_parts, parted_parts) == (0, 1)
    assert len(alone) > 1_000
    assert parted == alone  # the same encoded events in the same order
    assert parted_report == alone_report
    entry = alone_report["files"][0]
    db = sqlite3.connect(archive)
    (comments,) = db.execute("SELECT count(*) FROM comments").fetchone()
    assert entry["read"]["comments"] == comments
    assert entry["skipped"]["comment id missing"]["count"] == 4
    zoneless = entry["skipped"]["timestamp has no time zone"]
    assert zoneless["count"] == 7
    assert len(zoneless["examples"]) == MAX_EXAMPLES
    assert [e.split(":")[0] for e in zoneless["examples"]] == [f"comments row {r}" for r in (4, 5, 6)]
    assert entry["ignored_fields"]["comment.mood"] == comments


def test_a_table_without_rowids_is_read_row_by_row(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "observatory.sqlite"
    db = sqlite3.connect(path)
    with db:
        db.execute("CREATE TABLE posts (id TEXT PRIMARY KEY, title TEXT, content TEXT, created_at TEXT)")
        db.execute("CREATE TABLE comments (id TEXT PRIMARY KEY, post_id TEXT, created_at TEXT) WITHOUT ROWID")
        db.execute("INSERT INTO posts VALUES ('p1', 't', 'c', '2026-01-30T17:00:00+00:00')")
        db.execute("INSERT INTO comments VALUES ('k1', 'p1', '2026-01-30T17:01:00+00:00')")
    db.close()
    alone, alone_report, _ = _imported(path, 10**12, monkeypatch)
    parted, parted_report, used = _imported(path, 0, monkeypatch)
    assert used == 0
    assert (parted, parted_report) == (alone, alone_report)
    entry = alone_report["files"][0]
    assert entry["read"] == {"posts": 1}  # the posts before the table that cannot be read are kept
    assert entry["errors"][0]["message"].startswith("SQLite file cannot be read: no such column: rowid")


def _failing(fail_at: int, db: sqlite3.Connection, out: FileRecords, span: Span | None = None) -> None:
    """``read_comments`` on a file whose row ``fail_at`` cannot be read: the rows before it, then an error."""
    lo, hi = span or db.execute("SELECT min(rowid), max(rowid) FROM comments").fetchone()
    sqlite_db_read(db, out, (lo, min(hi, fail_at - 1)))
    if lo <= fail_at <= hi:
        raise sqlite3.DatabaseError("database disk image is malformed")


sqlite_db_read = sqlite_db.read_comments


@pytest.mark.parametrize("where", ["first part", "second part"])
def test_a_source_error_ends_the_file_where_one_read_ends_it(
    archive: Path, where: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    (last,) = sqlite3.connect(archive).execute("SELECT max(rowid) FROM comments").fetchone()
    fail_at = 40 if where == "first part" else last - 30
    monkeypatch.setattr(sqlite_db, "read_comments", functools.partial(_failing, fail_at))
    alone, alone_report, _ = _imported(archive, 10**12, monkeypatch)
    parted, parted_report, used = _imported(archive, 0, monkeypatch)
    assert used == 1
    assert parted == alone
    assert parted_report == alone_report
    entry = alone_report["files"][0]
    assert entry["status"] == "partial"
    assert entry["errors"][0]["message"].startswith("SQLite file cannot be read: database disk image")
    assert entry["read"]["comments"] == fail_at - 1
    assert "agents" not in entry["read"]  # the tables after the comments are not read


def _dies(db: sqlite3.Connection, out: FileRecords, span: Span) -> None:
    """The worker's reader (only the worker reads here: the test does not read the second part)."""
    os.kill(os.getpid(), signal.SIGKILL)


def test_a_worker_that_dies_ends_the_import_saying_so(archive: Path, tmp_path: Path) -> None:
    store = Scratch(tmp_path)
    out = store.file_records("observatory.sqlite")
    db = sqlite3.connect(archive)
    try:
        with pytest.MonkeyPatch.context() as m:
            m.setattr(comment_parts, "MIN_ROWS", 0)
            parts = CommentParts.start(_dies, archive, db, out, store, posts=True)
        assert parts is not None
        try:
            with pytest.raises(MakerError, match=r"comments ended \(exit code -9\) before it had read them"):
                parts.adopt()
        finally:
            parts.close()
        assert not parts.proc.is_alive()
    finally:
        db.close()
        store.close()
    assert list(tmp_path.iterdir()) == []  # the parts' stores are inside the import's, removed with it


def _tallies(report: FileReport) -> Iterator[tuple[str, int, list[str]]]:
    for reason, tally in sorted({**report.skipped, **report.notes}.items()):
        yield reason, tally.count, tally.examples


def test_a_part_report_counts_as_if_counted_after_the_first() -> None:
    whole, first, second = FileReport("f"), FileReport("f"), FileReport("f")
    said = [("skip", "a", f"row {i}") for i in range(5)] + [("note", "b", "row 5"), ("skip", "c", "row 6")]
    later = [("skip", "a", f"row {i}") for i in (7, 8)] + [("note", "b", "row 9"), ("note", "d", "row 10")]
    for report, items in ((whole, said + later), (first, said), (second, later)):
        for how, reason, where in items:
            getattr(report, how)(reason, where)
            report.read["comments"] += 1
    whole.ignored_fields["comment.mood"] = 3
    second.ignored_fields["comment.mood"] = 3
    whole.error("file", "broken")
    second.error("file", "broken")
    first.absorb(second)
    assert first.to_dict() == whole.to_dict()
    assert list(_tallies(first)) == list(_tallies(whole))
