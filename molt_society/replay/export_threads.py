"""A society's threads, one post at a time, from its events in any order: an external sort by post.

The community's layouts store a post with its comments and vote counts (a post record with its nested
``comments`` tree, or a ``posts`` row whose ``score`` and ``comment_count`` are its thread's). A thread's
events are spread over the whole history, so ``ThreadSorter`` writes each post, comment, vote and tally
to a ``SortedSpill`` keyed by (post id, post first, then by time) and reads them back grouped: memory is
one spill buffer and one thread, whatever the society's size.

Counts are what the warehouse's ``threads`` view scores: the votes cast plus the tallied counts, per
target. ``reported`` is the platform's comment count a tally of the post gives (imported societies);
``None`` when no tally gives one.
"""

from __future__ import annotations

import struct
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import orjson

from molt_society.importers.spill import SortedSpill
from molt_society.replay.export_rows import ExportRow

RANK = {"post_created": 0, "comment_created": 1, "vote_cast": 2, "vote_tallied": 2}
THREAD_TYPES = tuple(RANK)
_TIME = struct.Struct(">q")


@dataclass
class Thread:
    post: ExportRow
    comments: list[ExportRow] = field(default_factory=list)
    """In time order (ties by event id)."""
    up: Counter[str] = field(default_factory=Counter)
    down: Counter[str] = field(default_factory=Counter)
    """Upvotes and downvotes per target id (the post's own id for the post)."""
    reported: int | None = None

    def comment_count(self) -> int:
        """The comment count a dump would give: the platform's when a tally reported it, else the
        comments present."""
        return self.reported if self.reported is not None else len(self.comments)


class ThreadSorter:
    """``add`` the rows of ``THREAD_TYPES`` in any order, then iterate ``threads``."""

    def __init__(self, folder: Path | None = None) -> None:
        self.spill = SortedSpill(folder=folder)

    def add(self, row: ExportRow) -> None:
        tie = (
            row.post_id.encode()
            + b"\x00"
            + bytes((RANK[row.type],))
            + _TIME.pack(row.us)
            + row.event_id.encode()
        )
        self.spill.add(0, tie, orjson.dumps(tuple(row)))

    def threads(self, skipped: Counter[str]) -> Iterator[Thread]:
        """The threads by post id; rows that belong to no exported post are counted in ``skipped``."""
        thread: Thread | None = None
        current = None
        for payload in self.spill:
            row = ExportRow(*orjson.loads(payload))
            if row.post_id != current:
                if thread is not None:
                    yield _checked(thread, skipped)
                current, thread = row.post_id, None
                if row.type == "post_created":
                    thread = Thread(row)
                    continue
            if thread is None:
                skipped[f"{row.type} of a post not in the society"] += 1
            elif row.type == "comment_created":
                thread.comments.append(row)
            elif row.type == "post_created":
                skipped["post_created repeating a post id"] += 1
            else:
                _count_vote(thread, row)
        if thread is not None:
            yield _checked(thread, skipped)

    def close(self) -> None:
        self.spill.close()


def _count_vote(thread: Thread, row: ExportRow) -> None:
    if row.type == "vote_cast":
        (thread.up if row.vote > 0 else thread.down)[row.target_id] += 1
        return
    body = orjson.loads(row.body)
    thread.up[row.target_id] += int(body.get("upvotes") or 0)
    thread.down[row.target_id] += int(body.get("downvotes") or 0)
    reported = body.get("reported_comments")
    if row.target_type == "post" and reported is not None:
        thread.reported = max(int(reported), thread.reported or 0)


def _checked(thread: Thread, skipped: Counter[str]) -> Thread:
    """``thread`` without votes on targets it does not hold (counted in ``skipped``)."""
    targets = {thread.post.post_id} | {c.comment_id for c in thread.comments}
    for counts in (thread.up, thread.down):
        for target in [t for t in counts if t not in targets]:
            skipped["votes on a comment not in the society"] += counts.pop(target)
    return thread
