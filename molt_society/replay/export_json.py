"""``society export NAME --format moltbook-json``: a society as ``posts_full.json``.

The layout of takschdube/moltbook-dataset's ``raw/posts_full.json`` and of MoltBook's post detail: one
JSON array of posts, each with ``author`` (``id``, ``name``), ``submolt`` (``name``, ``display_name``),
``upvotes``, ``downvotes``, ``comment_count``, ``created_at`` and its ``comments`` tree nested through
``replies``. Written as a stream (one post at a time; ``.gz`` compresses), nested replies written without
recursion so a reply chain of any depth fits. The layout has no agents listing and no follows: on
``society replay`` an agent is registered at its first post or comment, agents that never wrote are not
in it, follows are counted as not exported (the observatory SQLite layout keeps them).
"""

from __future__ import annotations

import gzip
from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

import orjson

from molt_society.replay.export_layout import (
    UNKNOWN,
    Export,
    ExportSummary,
    Progress,
    RowSource,
    iso,
    writing,
)
from molt_society.replay.export_rows import ExportRow
from molt_society.replay.export_threads import Thread


def write_posts_full(path: Path, source: RowSource, on_rows: Progress = lambda n: None) -> ExportSummary:
    """Write the society of ``source`` to ``path`` (``.json`` or ``.json.gz``; replaced if it exists)."""
    summary = ExportSummary("moltbook-json", path)
    export = Export(source, summary, on_rows, exported=set())
    export.load_actors()
    authors: set[str] = set()
    opener: Any = gzip.open if path.name.endswith(".gz") else open
    with writing(path) as tmp, opener(tmp, "wb") as f:
        f.write(b"[\n")
        for i, t in enumerate(export.threads(tmp.parent)):
            f.write(b",\n" if i else b"")
            _write_post(f, export, t, authors)
        f.write(b"\n]\n")
    silent = sum(1 for a in export.agents if a not in authors)
    if silent:
        summary.not_exported["agents without a post or comment (the layout has no agents listing)"] += silent
    summary.written["agents"] = len(authors)
    summary.written["submolts"] = len({t for t in export.submolts if t != UNKNOWN})
    summary.notes.append("agents are registered at their first post or comment when this file is replayed")
    return summary


def _author(export: Export, actor: str, authors: set[str]) -> dict[str, str] | None:
    if actor == UNKNOWN:
        return None
    authors.add(actor)
    return {"id": actor, "name": export.name_of(actor)}


def _write_post(f: IO[bytes], export: Export, t: Thread, authors: set[str]) -> None:
    p = t.post
    sub = export.submolts.get(p.submolt)
    doc = {
        "id": p.post_id,
        "title": p.title,
        "content": p.content,
        "author": _author(export, p.actor, authors),
        "submolt": None
        if p.submolt == UNKNOWN
        else {"name": p.submolt, "display_name": sub.title if sub else ""},
        "upvotes": t.up[p.post_id],
        "downvotes": t.down[p.post_id],
        "comment_count": t.comment_count(),
        "created_at": iso(p.us),
    }
    f.write(orjson.dumps(doc)[:-1] + b',"comments":[')
    for chunk in _tree(export, t, authors):
        f.write(chunk)
    f.write(b"}")
    export.summary.written["posts"] += 1
    export.summary.written["comments"] += len(t.comments)


def _tree(export: Export, t: Thread, authors: set[str]) -> Iterator[bytes]:
    """The thread's comments as the text of nested ``replies`` arrays, closing with the ``comments``
    array's ``]``: a depth-first walk with an explicit stack (no recursion, any depth)."""
    ids = {c.comment_id for c in t.comments}
    children: dict[str, list[ExportRow]] = defaultdict(list)
    top: list[ExportRow] = []
    for c in t.comments:
        if c.parent_id and c.parent_id in ids:
            children[c.parent_id].append(c)
        else:
            if not c.parent_id and c.depth > 1:
                export.summary.not_exported[
                    "reply depths of replies with an unknown parent (written top-level)"
                ] += 1
            top.append(c)
    _unreachable_to_top(top, children, len(t.comments))
    stack: list[tuple[list[ExportRow], int]] = [(top, 0)]
    while stack:
        siblings, i = stack.pop()
        if i == len(siblings):
            yield b"]" if not stack else b"]}"
            continue
        stack.append((siblings, i + 1))
        c = siblings[i]
        doc = {
            "id": c.comment_id,
            "post_id": c.post_id,
            "parent_id": c.parent_id or None,
            "content": c.content,
            "author": _author(export, c.actor, authors),
            "upvotes": t.up[c.comment_id],
            "downvotes": t.down[c.comment_id],
            "created_at": iso(c.us),
        }
        yield (b"," if i else b"") + orjson.dumps(doc)[:-1] + b',"replies":['
        stack.append((children.get(c.comment_id, []), 0))


def _unreachable_to_top(top: list[ExportRow], children: dict[str, list[ExportRow]], total: int) -> None:
    """Comments no top-level comment leads to (a parent cycle, which the stream workers never accept)
    are written top-level (taken from their parent's replies) rather than lost or walked forever."""
    seen: set[str] = set()

    def walk(start: ExportRow) -> None:
        todo = [start]
        while todo:
            c = todo.pop()
            seen.add(c.comment_id)
            todo.extend(k for k in children.get(c.comment_id, []) if k.comment_id not in seen)

    for c in top:
        walk(c)
    if len(seen) == total:
        return
    for parent, kids in list(children.items()):
        for c in list(kids):
            if c.comment_id not in seen:
                kids.remove(c)
                top.append(c)
                walk(c)
        if not kids:
            children.pop(parent)
