"""One thread (a post, its comments and votes) as a partition's state holds it, and its feed item."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from molt_society.algorithms.feeds import hot_score
from molt_society.schemas.control import FeedItem


@dataclass(slots=True)
class Thread:
    post_id: str
    submolt: str
    author: str
    title: str
    created_us: int
    score: int = 0
    comments: dict[str, tuple[str, int]] = field(default_factory=dict)  # comment id -> (author, depth)
    participants: set[str] = field(default_factory=set)
    max_depth: int = 0
    recent: list[list[Any]] = field(default_factory=list)  # [comment id, author, depth, occurred_us, text]
    excerpt: str = ""  # the start of the post's content
    last_us: int = 0  # event time of the thread's newest event
    removed: bool = False  # a moderator removed the post: it is in no feed any more
    removed_comments: frozenset[str] = frozenset()  # comments a moderator removed (out of ``recent``)
    cached_item: FeedItem | None = None  # the feed item, rebuilt only after the thread changed

    def row(self) -> list[Any]:
        """The thread as a snapshot (and ``streams.cold_threads``) stores it (``Thread.of_row``)."""
        return [
            self.post_id,
            self.submolt,
            self.author,
            self.title,
            self.created_us,
            self.score,
            [[cid, a, d] for cid, (a, d) in self.comments.items()],
            sorted(self.participants),
            self.max_depth,
            self.recent,
            self.excerpt,
            self.last_us,
            self.removed,
            sorted(self.removed_comments),
        ]

    @classmethod
    def of_row(cls, row: list[Any]) -> Thread:
        """The thread ``row`` stored (rows of snapshots taken before removals existed lack their fields)."""
        pid, submolt, author, title, created, score, comments, parts, depth, recent, excerpt, last, *rm = row
        removed, removed_comments = (rm[0], frozenset(rm[1])) if rm else (False, frozenset[str]())
        return cls(
            pid,
            submolt,
            author,
            title,
            created,
            score,
            {cid: (a, d) for cid, a, d in comments},
            set(parts),
            depth,
            recent,
            excerpt,
            last,
            removed,
            removed_comments,
        )

    def item(self) -> FeedItem:
        if self.cached_item is None:
            self.cached_item = self._build_item()
        return self.cached_item

    def _build_item(self) -> FeedItem:
        return {
            "post_id": self.post_id,
            "author": self.author,
            "submolt": self.submolt,
            "title": self.title,
            "created_us": self.created_us,
            "score": self.score,
            "comments": len(self.comments),
            "hot": hot_score(self.score, self.created_us),
            "recent": list(self.recent),
            "excerpt": self.excerpt,
        }
