"""Readers of raw MoltBook API responses: a post with its comment tree, and a post listing.

``GET /api/v1/posts/<id>`` gives ``{success, post{...}, comments[...], context}``; comments nest through
``replies[]`` and also carry ``parent_id``. The tree is walked without recursion (threads can be deep);
each comment is read with its enclosing post's id and, when nested, its enclosing comment as parent.
Depth is not taken from the source: the builder computes it from the parent chain (1 = top-level).

``GET /api/v1/posts`` gives ``{success, posts[...], count, has_more, next_offset}``: posts only.
"""

from __future__ import annotations

from importers.json_items import read_comment, read_post
from importers.records import FileRecords


def read_post_detail(doc: dict[str, object], out: FileRecords) -> None:
    """The post and every comment of an API post-detail response."""
    post = read_post(doc.get("post"), out, "post")
    raw_post = doc.get("post")
    post_id: str | None = post.id if post is not None else None
    if post_id is None and isinstance(raw_post, dict) and isinstance(raw_post.get("id"), str):
        post_id = str(raw_post["id"])  # unreadable post: its comments are reported as "post skipped"
    comments = doc.get("comments")
    if not isinstance(comments, list):
        return
    # stack of (object, position, enclosing comment id); reversed so comments are read in file order
    stack: list[tuple[object, str, str | None]] = [
        (c, f"comments[{i}]", None) for i, c in reversed(list(enumerate(comments)))
    ]
    while stack:
        obj, position, parent = stack.pop()
        if post_id is None:
            out.report.records_read += 1
            out.report.skip("post has no readable id", position)
            continue
        rec = read_comment(obj, out, position, post_id=post_id, nesting_parent=parent, use_source_depth=False)
        replies = obj.get("replies") if isinstance(obj, dict) else None
        if not isinstance(replies, list) or not replies:
            continue
        own_id = rec.id if rec is not None else _raw_id(obj)
        for j in reversed(range(len(replies))):
            stack.append((replies[j], f"{position}.replies[{j}]", own_id))


def _raw_id(obj: object) -> str | None:
    if isinstance(obj, dict) and isinstance(obj.get("id"), str) and obj["id"]:
        return str(obj["id"])
    return None


def read_post_listing(doc: dict[str, object], out: FileRecords) -> None:
    """Every post of an API listing response (listings carry no comments)."""
    posts = doc.get("posts")
    if isinstance(posts, list):
        for i, obj in enumerate(posts):
            read_post(obj, out, f"posts[{i}]")
