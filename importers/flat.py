"""Readers of flat exports: JSON arrays of posts or comments, and daily ``{date, total, posts|comments}``.

Flat posts name their author by name only (``author`` is a string, or null/absent) and may lack a
submolt. Flat comments carry ``post_id`` and a 0-based ``depth`` but no parent id: the builder makes a
comment of source depth ``d`` a comment of depth ``d + 1`` with no parent, marked ``parent_unknown``
when it is not top-level.
"""

from __future__ import annotations

from importers.json_items import read_comment, read_post
from importers.records import FileRecords


def read_posts(items: list[object], out: FileRecords, prefix: str = "") -> None:
    """Every post of a flat array (``prefix`` is the array's path in the document, e.g. ``posts``)."""
    for i, obj in enumerate(items):
        read_post(obj, out, f"{prefix}[{i}]")


def read_comments(items: list[object], out: FileRecords, prefix: str = "") -> None:
    """Every comment of a flat array; each names its post by ``post_id``."""
    for i, obj in enumerate(items):
        read_comment(obj, out, f"{prefix}[{i}]", post_id=None, nesting_parent=None, use_source_depth=True)


def read_daily(doc: dict[str, object], out: FileRecords) -> None:
    """A daily export object: its ``posts`` or its ``comments`` array."""
    posts = doc.get("posts")
    if isinstance(posts, list):
        read_posts(posts, out, "posts")
    comments = doc.get("comments")
    if isinstance(comments, list):
        read_comments(comments, out, "comments")
