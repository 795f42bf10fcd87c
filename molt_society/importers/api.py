"""Comment threads of raw MoltBook API responses.

``GET /api/v1/posts/<id>`` gives ``{success, post{...}, comments[...], context}`` (later layouts may
leave ``comments`` out); comments nest through ``replies[]`` and also carry ``parent_id``. A thread is
walked without recursion (threads can be deep); each comment is read with its enclosing post's id and,
when nested, its enclosing comment as parent. Depth is not taken from the source: the builder computes
it from the parent chain (1 = top-level).
"""

from __future__ import annotations

from molt_society.importers.json_items import read_comment
from molt_society.importers.records import FileRecords


def read_thread(top: object, position: str, post_id: str | None, out: FileRecords) -> None:
    """A top-level comment of a post and every reply nested under it (file order).

    ``post_id`` is the enclosing post's id, ``None`` when the post has no readable id (every comment is
    then skipped as such).
    """
    stack: list[tuple[object, str, str | None]] = [(top, position, None)]
    while stack:
        obj, where, parent = stack.pop()
        if post_id is None:
            out.report.read["comments"] += 1
            out.report.skip("post has no readable id", where)
            replies = obj.get("replies") if isinstance(obj, dict) else None
        else:
            rec = read_comment(
                obj, out, where, post_id=post_id, nesting_parent=parent, use_source_depth=False
            )
            replies = obj.get("replies") if isinstance(obj, dict) else None
            if isinstance(replies, list) and replies:
                own = rec.id if rec is not None else _raw_id(obj)
                for j in reversed(range(len(replies))):
                    stack.append((replies[j], f"{where}.replies[{j}]", own))
            continue
        if isinstance(replies, list):
            for j in reversed(range(len(replies))):
                stack.append((replies[j], f"{where}.replies[{j}]", None))


def _raw_id(obj: object) -> str | None:
    if isinstance(obj, dict) and isinstance(obj.get("id"), str) and obj["id"]:
        return str(obj["id"])
    return None
