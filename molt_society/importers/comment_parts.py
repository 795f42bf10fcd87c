"""The comments table of a large SQLite archive read in two parts at once: one in a worker process, one here.

Reading an archive's rows into records (``importers.sqlite_db``: a dict per row, the record readers'
checks, a blob per record into the import's store) costs about the same per post and per comment (34
microseconds here), and it ran on one core while the other waited: 27 of the 82 seconds of a 300,000-post
import (issue 30). So when the ``comments`` table is large, a worker process reads its first rows while
this process reads the ``posts`` table and then the rest of the comments, the two shares of about equal
size (by rowid). Each part goes to a store of its own (``importers.scratch``: a folder inside the import's,
removed with it), and is then appended to the import's store in table order, first part first, with one
``INSERT ... SELECT`` (``Scratch.adopt_comments``), and its report counted after what was counted before
it (``FileReport.absorb``). So the store, the report and every event are those of reading the file row by
row (tested): the same records in the same order, the same sequence numbers, examples and skips.

A source error (``sqlite3.Error``) in a part ends the file's reading where it would have ended row by row:
the rows before it are kept, what comes after it (the second part, when the first failed) is dropped, and
the error is the file's. A worker that dies, or reads nothing for ``SILENCE_S``, ends the import with
``MakerError`` (nothing is replayed, no record is lost silently); it dies with the importing process.
"""

from __future__ import annotations

import multiprocessing
import os
import shutil
import sqlite3
import threading
import time
from collections.abc import Callable
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

from molt_society.importers.file_report import FileReport
from molt_society.importers.makers import MakerError, cores
from molt_society.importers.records import FileRecords
from molt_society.importers.scratch import Log, Scratch
from molt_society.runtime.broker import die_with_parent
from molt_society.runtime.gc_tuning import tune_gc

MIN_ROWS = 50_000
"""Comments (by rowid span) from which the table is read in two parts."""
SILENCE_S = 300.0
"""A worker whose part has not grown for this long is stalled: the import fails."""
BEAT_S = 2.0
"""How often a worker says how many comments it has read."""

Span = tuple[int, int]
Part = tuple[FileReport, set[str], str | None]
"""A part read: its report, the ids of its unreadable comments, and the source error that ended it."""
Reader = Callable[[sqlite3.Connection, FileRecords, Span], None]
"""What reads the comments of a span of rowids into records (``importers.sqlite_db.read_comments``)."""


def _span(db: sqlite3.Connection, table: str) -> Span | None:
    """The first and last rowid of ``table`` (two index lookups, whatever its size); None when empty."""
    lo, hi = db.execute(f'SELECT min(rowid), max(rowid) FROM "{table}"').fetchone()
    return None if lo is None else (int(lo), int(hi))


def _read_part(read: Reader, path: Path, name: str, span: Span, store: Scratch) -> Part:
    """The comments of rowids ``span`` of the SQLite file ``path`` into ``store``, as file ``name``."""
    out = store.file_records(name)
    error = None
    try:
        db = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro&immutable=1", uri=True)
        try:
            read(db, out, span)
        finally:
            db.close()
    except sqlite3.Error as exc:
        error = str(exc)
    return out.report, out.unreadable_comments, error


def _work(read: Reader, path: str, name: str, span: Span, folder: str, parent: int, conn: Connection) -> None:
    """A worker: reads its part into a store inside ``folder``, saying how far it is every ``BEAT_S``; then
    ``("done", part, count, database)``."""
    die_with_parent(parent)
    tune_gc()
    store = Scratch(Path(folder))
    done = threading.Event()

    def beat() -> None:
        while not done.wait(BEAT_S):
            conn.send(("read", store.count("comment")))

    beater = threading.Thread(target=beat, name="comment-part-beat", daemon=True)
    beater.start()
    part = _read_part(read, Path(path), name, span, store)
    database = store.hand_over()
    done.set()
    beater.join()
    conn.send(("done", part, store.count("comment"), str(database)))
    conn.close()


class CommentParts:
    """The comments of one SQLite file read in two parts: the first by a worker (started here), the second
    by ``read_own`` in this process; ``adopt`` puts both in the import's store."""

    @classmethod
    def start(
        cls,
        read: Reader,
        path: Path,
        db: sqlite3.Connection,
        out: FileRecords,
        store: Scratch,
        *,
        posts: bool,
    ) -> CommentParts | None:
        """Parts for the ``comments`` table of ``db`` (the file ``path``, read into ``out`` by ``read``;
        with a ``posts`` table when ``posts``): when it spans ``MIN_ROWS`` rowids or more on a machine with
        two cores or more; None (read it row by row) else."""
        if not isinstance(out.comments, Log) or cores() < 2:
            return None
        try:
            comments = _span(db, "comments")
            post_span = _span(db, "posts") if posts else None
        except sqlite3.Error:  # no rowid (a WITHOUT ROWID table): read row by row, which says so in its place
            return None
        if comments is None or comments[1] - comments[0] + 1 < MIN_ROWS:
            return None
        n_posts = 0 if post_span is None else post_span[1] - post_span[0] + 1
        n_comments = comments[1] - comments[0] + 1
        first = min(n_comments, (n_posts + n_comments) // 2)  # this process reads the posts, then the rest
        return cls(read, path, out, store, (comments[0], comments[0] + first - 1), comments[1])

    def __init__(
        self, read: Reader, path: Path, out: FileRecords, store: Scratch, first: Span, last: int
    ) -> None:
        self.read = read
        self.path = path
        self.out = out
        self.store = store
        self.rest: Span | None = (first[1] + 1, last) if first[1] < last else None
        self.own: Part | None = None
        # this process's store is made first: making a store sweeps its folder of those of ended processes,
        # which the worker's is once it has handed it over
        self.own_store = None if self.rest is None else Scratch(store.dir)
        self.parts: list[Path] = [] if self.own_store is None else [self.own_store.dir]
        ctx = multiprocessing.get_context("spawn")  # not a copy of the importer's memory
        self.conn, child = ctx.Pipe(duplex=False)
        self.proc = ctx.Process(
            target=_work,
            args=(read, str(path), out.report.file, first, str(store.dir), os.getpid(), child),
            name="import-comment-part",
            daemon=True,
        )
        self.proc.start()
        child.close()

    def read_own(self) -> None:
        """Read the second part here (nothing when the worker has every comment)."""
        if self.rest is None or self.own_store is None:
            return
        self.own = _read_part(self.read, self.path, self.out.report.file, self.rest, self.own_store)
        self.own_store.hand_over()

    def adopt(self) -> None:
        """Wait for the worker, then append both parts to the store and the file's records and report, in
        order; a source error of a part is raised (as ``sqlite3.Error``) after the rows before it."""
        _, part, count, database = self._done()
        self.parts.append(Path(database).parent)
        parts: list[tuple[Part, Path, int]] = [(part, Path(database), count)]
        if self.own is not None and self.own_store is not None:
            own = self.own_store
            parts.append((self.own, own.dir / "records.sqlite", own.count("comment")))
        assert isinstance(self.out.comments, Log)
        for (report, unreadable, error), database_path, read in parts:
            adopted = self.store.adopt_comments(database_path, self.out.comments)
            if adopted != read:
                raise MakerError(f"{read} comments of {self.out.report.file} were read, {adopted} adopted")
            self.out.report.absorb(report)
            self.out.unreadable_comments |= unreadable
            if error is not None:  # what follows it in the table is not read
                raise sqlite3.OperationalError(error)

    def _done(self) -> Any:
        """The worker's final message; ``MakerError`` when it died or read nothing for ``SILENCE_S``."""
        last, since = -1, time.monotonic()
        while True:
            if self.conn.poll(1.0):
                try:
                    message = self.conn.recv()
                except EOFError:  # the worker's end is closed: it ended without its part
                    self.proc.join(10)
                else:
                    if message[0] == "done":
                        return message
                    if message[1] != last:
                        last, since = message[1], time.monotonic()
                    continue
            if not self.proc.is_alive():
                raise MakerError(
                    f"the process reading {self.out.report.file}'s comments ended (exit code "
                    f"{self.proc.exitcode}) before it had read them; nothing was replayed: run the command "
                    "again"
                )
            if time.monotonic() - since >= SILENCE_S:
                raise MakerError(
                    f"the process reading {self.out.report.file}'s comments read nothing for "
                    f"{SILENCE_S:.0f} s; nothing was replayed: run the command again"
                )

    def close(self) -> None:
        """Stop the worker if it still runs; remove the parts' stores."""
        if self.proc.is_alive():
            self.proc.terminate()
        self.proc.join(10)
        self.conn.close()
        if self.own is None and self.own_store is not None:  # not read (an error before it): still open
            self.own_store.close()
        for folder in self.parts:
            shutil.rmtree(folder, ignore_errors=True)
