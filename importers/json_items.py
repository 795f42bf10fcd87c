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


def _counts(obj: dict[str, object]) -> Counts:
    return Counts(
        upvotes=parse_count(get(obj, "upvotes")),
        downvotes=parse_count(get(obj, "downvotes")),
        score=parse_count(get(obj, "score")),
        comment_count=parse_count(get(obj, "comment_count")),
    )


def _author(obj: dict[str, object]) -> Author | None:
    return parse_author(get(obj, "author"), get(obj, "author_id"), get(obj, "author_name"))


def read_post(obj: object, out: FileRecords, position: str) -> PostRecord | None:
    """The post in ``obj``, appended to ``out.posts``; ``None`` (and a skip) when unreadable."""
    out.report.read["posts"] += 1
    if not isinstance(obj, dict):
        out.report.skip("post is not a JSON object", position, type(obj).__name__)
        return None
    out.report.ignored_fields.update(ignored(obj, "post"))
    raw_id = obj.get("id")
    try:
        post_id = parse_id(raw_id, "post id")
        created = parse_time(get(obj, "created_at"))
    except RecordError as exc:
        if isinstance(raw_id, str) and raw_id:
            out.unreadable_posts.add(raw_id)
        out.report.skip(exc.reason, position, f"id {raw_id!r} {exc.detail}".strip())
        return None
    rec = PostRecord(
        id=post_id,
        title=optional_text(obj.get("title")),
        content=optional_text(obj.get("content")),
        author=_author(obj),
        submolt=parse_submolt(obj.get("submolt"), get(obj, "submolt_name")),
        created_at=created,
        counts=_counts(obj),
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
    out.report.read["comments"] += 1
    if not isinstance(obj, dict):
        out.report.skip("comment is not a JSON object", position, type(obj).__name__)
        return None
    out.report.ignored_fields.update(ignored(obj, "comment"))
    raw_id = obj.get("id")
    try:
        comment_id = parse_id(raw_id, "comment id")
        pid = post_id if post_id is not None else parse_id(get(obj, "post_id"), "post id of comment")
        parent = optional_id(get(obj, "parent_id"), "parent id")
        depth_value = obj.get("depth")
        source_depth: int | None = None
        if depth_value is not None:
            if isinstance(depth_value, bool) or not isinstance(depth_value, int) or depth_value < 0:
                raise RecordError("depth is not a non-negative integer", repr(depth_value)[:40])
            source_depth = depth_value
        created = parse_time(get(obj, "created_at"))
    except RecordError as exc:
        if isinstance(raw_id, str) and raw_id:
            out.unreadable_comments.add(raw_id)
        out.report.skip(exc.reason, position, f"id {raw_id!r} {exc.detail}".strip())
        return None
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
        content=optional_text(obj.get("content")),
        author=_author(obj),
        created_at=created,
        counts=_counts(obj),
        origin=out.origin(position),
    )
    out.comments.append(rec)
    return rec
