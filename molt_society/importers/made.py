"""What an import's worker process made of one record, as it comes back to the builder (``importers.makers``).

Plain tuples: a frozen dataclass comes through pickle about ten times slower (``dataclasses.fields`` per
object), which made the importing process, not the workers, the slowest part.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Protocol

from molt_society.importers.records import (
    Author,
    CommentRecord,
    Counts,
    Origin,
    PostRecord,
    SubmoltRef,
    author_of,
)
from molt_society.schemas.control import from_us

Said = tuple[bool, str, str, str, str]
"""A skip (True) or a note of one record: file, position, reason, detail."""
AuthorFields = list[str | None] | None
"""An author's id, name and description (``importers.scratch.author_fields``)."""
LightPost = tuple[str, int, AuthorFields, tuple[str, str | None] | None, int | None, str, str]
"""What the builder needs of a post made: id, time (µs), author, submolt, comment count, file, position."""
LightComment = tuple[str, str, str | None, int, AuthorFields, str, str]
"""Id, post id, parent id, time (µs), author, file, position."""


def _back(a: AuthorFields) -> Author | None:
    return None if a is None else author_of(*a)


def light_post(t: LightPost) -> PostRecord:
    """The post a worker made, as much of it as the builder reads afterwards (no title, no content)."""
    post_id, created, author, sub, comment_count, file, position = t
    submolt = None if sub is None else SubmoltRef(*sub)
    counts = Counts(comment_count=comment_count)
    return PostRecord(
        post_id, None, None, _back(author), submolt, from_us(created), counts, Origin(file, position)
    )


def light_comment(t: LightComment) -> CommentRecord:
    """The comment a worker made, as much of it as the builder reads afterwards (no content)."""
    cid, post_id, parent_id, created, author, file, position = t
    at = from_us(created)
    return CommentRecord(
        cid, post_id, parent_id, None, None, _back(author), at, Counts(), Origin(file, position)
    )


class MakersLike(Protocol):
    """What the builder asks of the workers that make its posts' and comments' events (``importers.makers``;
    a protocol here, so that the builder does not import the module that imports it)."""

    counts: Counter[tuple[str, str]]

    def posts(
        self, rows: Iterator[tuple[Any, ...]]
    ) -> Iterator[tuple[list[Said], str | None, LightPost]]: ...

    def comments(
        self, rows: Iterator[tuple[Any, ...]]
    ) -> Iterator[tuple[list[Said], str | None, LightComment]]: ...

    def seal(self) -> list[tuple[list[Path], int]]: ...

    def close(self) -> None: ...
