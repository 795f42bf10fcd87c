"""Reading one post object or one comment object of any JSON layout into a record.

Both functions accept the variations the known dumps use: ``author`` as an API object, a bare name,
``null`` or absent, with or without a separate ``author_id`` / ``author_name``; ``submolt`` as an API
object, a bare name, a ``submolt_name`` field or absent; counts as integers or absent; keys in
snake_case or camelCase (MoltBook's later API layout, see ``importers.fields``). A record is read from
the fields that identify it (id, creation time) and the ones the project uses; every other field is left
out of the events and counted in the file's report (``ignored_fields``), never a reason to skip it.
A record that cannot be read is skipped in the file's report (reason + position) and ``None`` is
returned; its id, when it has one, is remembered so that replies to it are reported as such.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import TypeVar

from molt_society.importers.fields import get, ignored
from molt_society.importers.records import (
    Author,
    CommentRecord,
    Counts,
    FileRecords,
    PostRecord,
    RecordError,
    optional_id,
    optional_text,
    parse_author,
    parse_count,
    parse_id,
    parse_submolt,
    parse_time,
)

T = TypeVar("T")


def _counts(obj: dict[str, object]) -> Counts:
    return Counts(
        upvotes=parse_count(get(obj, "upvotes")),
        downvotes=parse_count(get(obj, "downvotes")),
        score=parse_count(get(obj, "score")),
        comment_count=parse_count(get(obj, "comment_count")),
    )


def _author(obj: dict[str, object]) -> Author | None:
    return parse_author(get(obj, "author"), get(obj, "author_id"), get(obj, "author_name"))


def _read(
    obj: object,
    out: FileRecords,
    position: str,
    kind: str,
    unreadable: set[str],
    parse: Callable[[dict[str, object]], T],
) -> tuple[dict[str, object], T] | None:
    """Count a ``kind`` record read and ``parse`` the fields that identify it: the object (its fields the
    project leaves out counted) and what ``parse`` gave, or ``None`` and a skip when it is not a JSON
    object or ``parse`` raised ``RecordError`` (its id, when it has one, is remembered in ``unreadable``)."""
    out.report.read[kind + "s"] += 1
    if not isinstance(obj, dict):
        out.report.skip(f"{kind} is not a JSON object", position, type(obj).__name__)
        return None
    out.report.ignored_fields.update(ignored(obj, kind))
    try:
        return obj, parse(obj)
    except RecordError as exc:
        raw_id = obj.get("id")
        if isinstance(raw_id, str) and raw_id:
            unreadable.add(raw_id)
        out.report.skip(exc.reason, position, f"id {raw_id!r} {exc.detail}".strip())
        return None


def _source_depth(value: object) -> int | None:
    """A comment's own (0-based) ``depth`` field, when it gives one."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise RecordError("depth is not a non-negative integer", repr(value)[:40])
    return value


def _post_identity(doc: dict[str, object]) -> tuple[str, datetime]:
    return parse_id(doc.get("id"), "post id"), parse_time(get(doc, "created_at"))


def read_post(obj: object, out: FileRecords, position: str) -> PostRecord | None:
    """The post in ``obj``, appended to ``out.posts``; ``None`` (and a skip) when unreadable."""
    read = _read(obj, out, position, "post", out.unreadable_posts, _post_identity)
    if read is None:
        return None
    doc, (post_id, created) = read
    rec = PostRecord(
        id=post_id,
        title=optional_text(doc.get("title")),
        content=optional_text(doc.get("content")),
        author=_author(doc),
        submolt=parse_submolt(doc.get("submolt"), get(doc, "submolt_name")),
        created_at=created,
        counts=_counts(doc),
        origin=out.origin(position),
    )
    out.posts.append(rec)
    return rec


def read_comment(
    obj: object,
    out: FileRecords,
    position: str,
    *,
    post_id: str | None,
    nesting_parent: str | None,
    use_source_depth: bool,
) -> CommentRecord | None:
    """The comment in ``obj``, appended to ``out.comments``; ``None`` (and a skip) when unreadable.

    ``post_id`` is the enclosing post's id when the comment sits inside one (API detail), else the
    comment's own ``post_id`` field is used. ``nesting_parent`` is the id of the comment whose
    ``replies`` hold this one; an explicit ``parent_id`` field wins over it (a disagreement is noted).
    ``use_source_depth``: keep the comment's own ``depth`` field (0-based) for sources that give no
    parents (flat exports); an API thread's depth always comes from its nesting and parent chain.
    """

    def identity(doc: dict[str, object]) -> tuple[str, str, str | None, int | None, datetime]:
        comment_id = parse_id(doc.get("id"), "comment id")
        pid = post_id if post_id is not None else parse_id(get(doc, "post_id"), "post id of comment")
        parent = optional_id(get(doc, "parent_id"), "parent id")
        source_depth = _source_depth(doc.get("depth"))
        return comment_id, pid, parent, source_depth, parse_time(get(doc, "created_at"))

    read = _read(obj, out, position, "comment", out.unreadable_comments, identity)
    if read is None:
        return None
    doc, (comment_id, pid, parent, source_depth, created) = read
    if nesting_parent is not None and parent is not None and parent != nesting_parent:
        out.report.note(
            "parent_id differs from the nesting (parent_id used)",
            position,
            f"parent_id {parent}, nested under {nesting_parent}",
        )
    if parent is None:
        parent = nesting_parent
    if not use_source_depth or parent is not None:
        source_depth = None  # a known parent gives the depth: computed from the parent chain
    rec = CommentRecord(
        id=comment_id,
        post_id=pid,
        parent_id=parent,
        source_depth=source_depth,
        content=optional_text(doc.get("content")),
        author=_author(doc),
        created_at=created,
        counts=_counts(doc),
        origin=out.origin(position),
    )
    out.comments.append(rec)
    return rec
