"""The events of a large import's posts and comments made in worker processes, on every core.

Making a post's or a comment's events (decode the stored record, check and cut its fields, build and validate
the events with the pydantic models, encode them, sort them on disk) is most of an import's time, and it is
the same work for every record: at 17M events it held one core for minutes while the other waited (issue 30).
``Makers`` sends the builder's rows (``importers.builder``: the posts in read order, then the comments parents
first) to worker processes in chunks, every row of a post to the same worker, a few chunks ahead. A worker
runs the builder's own ``make_post`` / ``make_comment`` on each row and writes the events to sorted runs of
its own (``importers.spill``, in a folder inside the import's spill, so they are removed with it); what comes
back, in the order the rows were read, is what the builder still needs of each record (its notes and skips in
the order they were said, its actor, a few fields: ``importers.made``) and the number of events per file and
type. At the end each worker seals its runs and the import's spill adopts them: the merge reads every run
together, and events are ordered by (time, id), so the sorted history, its repeated ids and the report are
those of the builder alone (tested); what depends on earlier records (a reply to a comment that made no event,
an author's first act, a submolt's first post) stays with the builder.

A worker that dies or stops answering ends the import with ``MakerError`` (nothing is replayed: no record is
lost silently); workers die with the importing process (``die_with_parent``).
"""

from __future__ import annotations

import multiprocessing
import os
import queue
import zlib
from collections import Counter, deque
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from molt_society.importers.builder import Builder
from molt_society.importers.made import LightComment, LightPost, Said
from molt_society.importers.records import Origin
from molt_society.importers.scratch import Row, author_fields, comment_of, post_of
from molt_society.importers.spill import SortedSpill
from molt_society.runtime.broker import die_with_parent
from molt_society.runtime.gc_tuning import tune_gc
from molt_society.schemas.control import from_us, to_us
from molt_society.schemas.events import Event
from molt_society.schemas.wire import encode_event

MIN_RECORDS = 50_000
"""Posts and comments (duplicates included) from which an import makes their events in workers."""
CHUNK = 2_000
"""Rows sent to a worker at a time."""
AHEAD = 3
"""Chunks in flight per worker: enough that a worker never waits for the next, few enough to bound memory."""
SILENCE_S = 300.0
"""A worker that gives back nothing for this long while it has work is stalled: the import fails."""

MadePost = tuple[list[Said], str | None, LightPost]
MadeComment = tuple[list[Said], str | None, LightComment]


class MakerError(RuntimeError):
    """A worker process of the import ended, or stopped answering, before it had made what it was given."""


class _Maker(Builder):
    """The builder's ``make_post`` and ``make_comment`` in a worker: its notes and skips are kept for the
    importing process, its events go to this worker's own sorted runs."""

    def __init__(self, society: str, runs: SortedSpill) -> None:  # what the making methods read
        self.society = society
        self.runs = runs
        self._told = None
        self._has_later = False
        self.unreadable_posts: set[str] = set()
        self.failed_comments: set[str] = set()  # of this worker's posts: every comment of a post comes here
        self.said: list[Said] = []
        self.counts: Counter[tuple[str, str]] = Counter()

    def _skip(self, origin: Origin, reason: str, detail: str = "") -> None:
        self.said.append((True, origin.file, origin.position, reason, detail))

    def _note(self, origin: Origin, reason: str, detail: str = "") -> None:
        self.said.append((False, origin.file, origin.position, reason, detail))

    def _emit(self, origin: Origin, event: Event, wire: bytes | None = None) -> None:
        self.runs.add(to_us(event.occurred_at), event.event_id.bytes, wire or encode_event(event))
        self.counts[(origin.file, event.type)] += 1

    def _said(self) -> list[Said]:
        said, self.said = self.said, []
        return said

    def made_posts(self, files: list[str], rows: list[Row]) -> list[MadePost]:
        out: list[MadePost] = []
        for row in rows:
            rec = post_of(files, row)
            actor = self.make_post(rec)
            sub = None if rec.submolt is None else (rec.submolt.name, rec.submolt.display_name)
            o = rec.origin
            light = (
                rec.id,
                row[1],
                author_fields(rec.author),
                sub,
                rec.counts.comment_count,
                o.file,
                o.position,
            )
            out.append((self._said(), actor, light))
        return out

    def made_comments(self, files: list[str], rows: list[Row]) -> list[MadeComment]:
        out: list[MadeComment] = []
        for row in rows:  # (depth, replied_at, *COMMENT_COLUMNS)
            rec = comment_of(files, row[2:])
            actor = None if self._parent_skipped(rec) else self.make_comment(rec, row[0], from_us(row[1]))
            if actor is None:
                self.failed_comments.add(rec.id)
            o = rec.origin
            light = (
                rec.id,
                rec.post_id,
                rec.parent_id,
                row[6],
                author_fields(rec.author),
                o.file,
                o.position,
            )
            out.append((self._said(), actor, light))
        return out


def _work(
    society: str, files: list[str], folder: Path, parent: int, tasks: Any, results: Any, run_size: int
) -> None:
    """A worker: ``(kind, rows)`` from ``tasks`` until None, each chunk's ``(made, counts)`` to ``results``;
    then its sealed runs: ``("sealed", runs, events)``."""
    die_with_parent(parent)
    tune_gc()
    maker = _Maker(society, SortedSpill(run_size, folder, tally_ties=True))
    while (task := tasks.get()) is not None:
        kind, rows = task
        made = maker.made_posts(files, rows) if kind == "post" else maker.made_comments(files, rows)
        results.put((made, maker.counts))
        maker.counts = Counter()
    results.put(("sealed", maker.runs.seal(), len(maker.runs)))


def start(builder: Builder) -> Makers | None:
    """Workers for ``builder``'s posts and comments: for at least ``MIN_RECORDS`` of them written to a spill,
    one per core on a machine with two or more; None (the builder makes them) otherwise, and for a snapshot
    series (whose tallies read the record store)."""
    store, spill = builder.store, builder.spill
    records = store.count("post") + store.count("comment")
    n = cores()
    if spill is None or builder.series or records < MIN_RECORDS or n < 2:
        return None
    return Makers(builder.society, list(store.files), n, spill.folder(), spill.run_size)


def cores() -> int:
    """The cores this process may run on (its affinity, where the platform says)."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


class Makers:
    """``workers`` processes making the events of one import's posts and comments into sorted runs under
    ``folder`` (``SortedSpill.folder`` of the import's spill)."""

    def __init__(self, society: str, files: list[str], workers: int, folder: Path, run_size: int) -> None:
        ctx = multiprocessing.get_context("spawn")  # not a copy of the importer's memory
        self.tasks = [ctx.Queue() for _ in range(workers)]
        self.results = [ctx.Queue() for _ in range(workers)]
        self.procs = [
            ctx.Process(
                target=_work,
                args=(society, files, folder, os.getpid(), self.tasks[k], self.results[k], run_size),
                name=f"import-maker-{k}",
                daemon=True,
            )
            for k in range(workers)
        ]
        for proc in self.procs:
            proc.start()
        self.counts: Counter[tuple[str, str]] = Counter()
        """Events made, by (file, type): for the files' reports."""
        self.batches: list[list[Row]] = [[] for _ in range(workers)]  # rows read for each worker, unsent
        self.order: deque[int] = deque()  # the worker of each row read and not yet given back
        self.back: list[deque[Any]] = [deque() for _ in range(workers)]  # made, not yet given back
        self.flight = [0] * workers  # chunks sent to each worker and not yet given back

    def posts(self, rows: Iterator[Row]) -> Iterator[MadePost]:
        """What each post row (``Builder._posts``'s query) made, in the rows' order."""
        return self._made("post", rows)

    def comments(self, rows: Iterator[Row]) -> Iterator[MadeComment]:
        """What each comment row (``Builder._comments``'s query) made, in the rows' order."""
        return self._made("comment", rows)

    def _made(self, kind: str, rows: Iterator[Row]) -> Iterator[Any]:
        """What each row made, in the rows' order. Every row of one post goes to one worker (by a hash of
        the post id), in order, so a worker knows which of its comments made no event before it reaches
        their replies (deeper, so later); rows wait in per-worker chunks of ``CHUNK``."""
        n = len(self.procs)
        at = 0 if kind == "post" else 3  # the post id's place in the row
        for row in rows:  # read here: the store's connection belongs to this thread
            k = zlib.crc32(row[at].encode()) % n
            self.batches[k].append(row)
            self.order.append(k)
            if len(self.batches[k]) >= CHUNK:
                self._send(kind, k)
            if len(self.order) > AHEAD * n * CHUNK:
                yield self._next(kind)
        while self.order:
            yield self._next(kind)

    def _send(self, kind: str, k: int) -> None:
        self.tasks[k].put((kind, self.batches[k]))
        self.batches[k] = []
        self.flight[k] += 1

    def _next(self, kind: str) -> Any:
        """What the first row not yet given back made (its chunk is sent first if it waits here)."""
        k = self.order.popleft()
        if not self.back[k]:
            if not self.flight[k]:  # the row is in the batch still here
                self._send(kind, k)
            made, counts = self._get(k)
            self.flight[k] -= 1
            self.counts.update(counts)
            self.back[k].extend(made)
        return self.back[k].popleft()

    def _get(self, k: int) -> Any:
        """The next message of worker ``k``; ``MakerError`` when it died or said nothing for ``SILENCE_S``."""
        waited = 0.0
        while True:
            try:
                return self.results[k].get(timeout=1.0)
            except queue.Empty:
                waited += 1.0
                proc = self.procs[k]
                if not proc.is_alive():
                    raise MakerError(
                        f"a worker process of the import ended (exit code {proc.exitcode}) before it had "
                        "made its records' events; nothing was replayed: run the command again"
                    ) from None
                if waited >= SILENCE_S:
                    raise MakerError(
                        f"a worker process of the import made nothing for {SILENCE_S:.0f} s; nothing was "
                        "replayed: run the command again"
                    ) from None

    def seal(self) -> list[tuple[list[Path], int]]:
        """End the workers: each one's sorted runs and number of events."""
        for q in self.tasks:
            q.put(None)
        sealed = []
        for k, proc in enumerate(self.procs):
            tag, runs, events = self._get(k)
            assert tag == "sealed"
            sealed.append((runs, events))
            proc.join(30)
        return sealed

    def close(self) -> None:
        """Stop every worker still running (after ``seal``: none)."""
        for proc in self.procs:
            if proc.is_alive():
                proc.terminate()
            proc.join(10)
        for q in [*self.tasks, *self.results]:
            q.close()
            q.cancel_join_thread()
