"""Reading a JSON dump, streamed, by what identifies its records rather than by an exact key set.

The document comes from ``importers.jsonstream`` one part at a time. What each part is, is decided by
the part itself (MoltBook's API changed its field sets over time, so an exact key set is no test):

- a top-level ``post`` that is an object with an ``id``: a post-detail response (``GET /posts/<id>``);
  its ``comments`` (optional: later layouts leave them out) are threads under that post;
- items of a top-level ``posts`` array: posts (``GET /posts`` listings, daily exports);
- items of a top-level ``comments`` array without an enclosing post: comments naming their ``post_id``
  (daily exports; 0-based ``depth`` kept, no parents);
- items of a top-level array: a post detail (``{post, comments}``), a comment (has ``post_id``) or a post
  (has an ``id`` and a ``created_at``, ``title`` or ``content``); any other item is left with a reason.

Field names may be snake_case or camelCase; fields the importer does not read are counted in the
report (``ignored_fields``), never a reason to drop a record. A file none of whose parts is a post or a
comment is left aside as "valid JSON of an unexpected shape", with a description of what it holds. A
document that stops being valid JSON keeps the records read before the failing byte, with an error at
its exact line, column and byte offset.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

import orjson

from molt_society.importers import api
from molt_society.importers.fields import has
from molt_society.importers.file_report import ReasonTally
from molt_society.importers.json_items import read_comment, read_post
from molt_society.importers.jsonstream import JsonError, parts
from molt_society.importers.positions import position
from molt_society.importers.records import FileRecords

MAX_KEYS_SHOWN = 8


def identifies_post(obj: object) -> bool:
    """An object with an ``id`` and what a post has (``created_at``, ``title`` or ``content``) and no
    ``post_id`` (which makes it a comment)."""
    return (
        isinstance(obj, dict)
        and "id" in obj
        and not has(obj, "post_id")
        and (has(obj, "created_at") or "title" in obj or "content" in obj)
    )


def identifies_comment(obj: object) -> bool:
    """An object with an ``id`` and the ``post_id`` of the post it belongs to."""
    return isinstance(obj, dict) and "id" in obj and has(obj, "post_id")


def identifies_post_detail(obj: object) -> bool:
    """An API post-detail response: a ``post`` object with an ``id`` (``comments`` optional)."""
    return isinstance(obj, dict) and isinstance(obj.get("post"), dict) and "id" in obj["post"]


@dataclass
class _Doc:
    """What the reader has seen of a document so far."""

    top: str = ""  # "object", "array" or the scalar's type name
    keys: list[str] = field(default_factory=list)
    items: Counter[str] = field(default_factory=Counter)  # array documents: item kinds
    other_keys: Counter[str] = field(default_factory=Counter)  # keys of items that are not records
    others: ReasonTally = field(default_factory=ReasonTally)
    post_seen: bool = False
    post_id: str | None = None
    pending: list[tuple[int, object]] = field(default_factory=list)  # comments before their post

    def describe(self) -> str:
        if self.top == "object":
            shown = ", ".join(sorted(self.keys)[:MAX_KEYS_SHOWN])
            more = f" (+{len(self.keys) - MAX_KEYS_SHOWN} more)" if len(self.keys) > MAX_KEYS_SHOWN else ""
            return f"a JSON object with keys [{shown}{more}]"
        if self.top == "array":
            n = sum(self.items.values())
            kinds = ", ".join(sorted(self.items)) or "empty"
            keys = ""
            if self.other_keys:
                keys = "; item keys [" + ", ".join(sorted(self.other_keys)[:MAX_KEYS_SHOWN]) + "]"
            return f"a JSON array of {n} item(s) ({kinds}{keys})"
        return f"a JSON {self.top or 'document'}"


def _type(value: object) -> str:
    if isinstance(value, dict):
        return "object"
    if isinstance(value, list):
        return "array"
    if value is None:
        return "null"
    return {bool: "boolean", str: "string", int: "number", float: "number"}.get(type(value), "value")


def _detail(doc: _Doc, post: object, out: FileRecords, where: str) -> None:
    """The ``post`` of a post-detail response; remembers its id for the comments."""
    rec = read_post(post, out, where)
    doc.post_seen = True
    if rec is not None:
        doc.post_id = rec.id
    elif isinstance(post, dict) and isinstance(post.get("id"), str) and post["id"]:
        doc.post_id = str(post["id"])  # unreadable post: its comments are reported as "post skipped"


def post_with_threads(value: object, out: FileRecords, where: str) -> None:
    """A post record and the comment threads nested in it (``comments``, replies under ``replies``), as
    the posts_full layouts hold them in an array of posts or in JSON Lines; comments of an unreadable post
    that has an id are reported as "post skipped"."""
    rec = read_post(value, out, where)
    comments = value.get("comments") if isinstance(value, dict) else None
    if not isinstance(comments, list) or not comments:
        return
    assert isinstance(value, dict)
    raw = value.get("id")
    post_id = rec.id if rec is not None else (str(raw) if isinstance(raw, str | int) and raw else None)
    for j, c in enumerate(comments):
        api.read_thread(c, f"{where}.comments[{j}]", post_id, out)


def _array_item(doc: _Doc, i: int, value: object, out: FileRecords, where: str = "") -> None:
    where = where or f"[{i}]"
    if identifies_post_detail(value):
        assert isinstance(value, dict)
        doc.items["post detail"] += 1
        inner = _Doc()
        _detail(inner, value["post"], out, f"{where}.post")
        comments = value.get("comments")
        if isinstance(comments, list):
            for j, c in enumerate(comments):
                api.read_thread(c, f"{where}.comments[{j}]", inner.post_id, out)
    elif identifies_comment(value):
        doc.items["comment"] += 1
        read_comment(value, out, where, post_id=None, nesting_parent=None, use_source_depth=True)
    elif identifies_post(value):
        doc.items["post"] += 1
        post_with_threads(value, out, where)
    else:
        kind = _type(value)
        doc.items[kind] += 1
        if isinstance(value, dict):
            doc.other_keys.update(str(k) for k in value)
        out.report.read["other items"] += 1
        doc.others.add(f"{where}: {kind}")


def _object_part(doc: _Doc, key: str, index: int | None, value: object, out: FileRecords) -> None:
    if key not in doc.keys:
        doc.keys.append(key)
    if index is None:
        if key == "post" and isinstance(value, dict) and "id" in value:
            _detail(doc, value, out, "post")
            for j, c in doc.pending:
                api.read_thread(c, f"comments[{j}]", doc.post_id, out)
            doc.pending.clear()
        return
    if key == "posts":
        post_with_threads(value, out, f"posts[{index}]")
    elif key == "comments":
        if doc.post_seen:
            api.read_thread(value, f"comments[{index}]", doc.post_id, out)
        elif isinstance(value, dict) and has(value, "post_id") and "replies" not in value:
            read_comment(
                value, out, f"comments[{index}]", post_id=None, nesting_parent=None, use_source_depth=True
            )
        else:
            doc.pending.append((index, value))  # a thread whose post may come later in the document


def _finish(doc: _Doc, out: FileRecords) -> None:
    for j, c in doc.pending:  # no post came: read as comments naming their own post
        read_comment(c, out, f"comments[{j}]", post_id=None, nesting_parent=None, use_source_depth=True)
    doc.pending.clear()
    report = out.report
    read_records = report.read["posts"] + report.read["comments"]
    if doc.others.count and read_records:
        report.skipped["array item is neither a post nor a comment"] = doc.others
    if doc.top == "object":
        if doc.post_seen:
            report.shape = "api_post_detail"
        elif "posts" in doc.keys and report.read["posts"]:
            report.shape = "daily_posts" if "date" in doc.keys else "api_post_listing"
        elif "comments" in doc.keys and report.read["comments"]:
            report.shape = "daily_comments" if "date" in doc.keys else "comment_listing"
    elif doc.top == "array" and read_records:
        kinds = [k for k in ("post detail", "post", "comment") if doc.items[k]]
        report.shape = (
            {"post detail": "api_post_details", "post": "flat_posts", "comment": "flat_comments"}[kinds[0]]
            if len(kinds) == 1
            else "flat_mixed"
        )


def read_json(path: Path, start: int, first: bytes, out: FileRecords, *, not_json: str = "") -> None:
    """Every post and comment of the JSON document in ``path`` from byte ``start`` (after a BOM);
    ``first`` is the document's first non-blank byte.

    ``not_json``: when set, a document that fails before any part of it is read is reported with this
    message (the file was taken for JSON by its name only).
    """
    doc = _Doc(top={b"{": "object", b"[": "array"}.get(first, ""))
    report = out.report
    try:
        for part in parts(path, start):
            if not doc.top:
                doc.top = (
                    "array"
                    if part.key is None and part.index is not None
                    else ("object" if part.key is not None else _type(part.value))
                )
            if part.key is not None:
                _object_part(doc, part.key, part.index, part.value, out)
            elif part.index is not None:
                _array_item(doc, part.index, part.value, out)
    except JsonError as exc:
        _finish(doc, out)
        where = position(path, exc.offset)
        if not doc.top and not_json:
            report.error(where, f"{not_json}: {exc.message}")
        else:
            if report.shape == "unknown":
                report.shape = "json"
            report.error(where, f"JSON cannot be parsed: {exc.message}")
        return
    _finish(doc, out)
    if report.shape == "unknown":
        report.shape = "json"
        report.skip_reason = (
            f"unknown shape: {report.file} is valid JSON of an unexpected shape: {doc.describe()}"
        )


MAX_LINE_BYTES = 64 << 20
"""The longest line of a JSON Lines dump: one post with its whole comment tree."""


def is_json_lines(path: Path, start: int) -> bool:
    """Whether the file holds JSON Lines: its first line is a whole JSON object and the next non-blank
    line starts another."""
    with path.open("rb") as fh:
        fh.seek(start)
        first = fh.readline(MAX_LINE_BYTES)
        try:
            if not isinstance(orjson.loads(first), dict):
                return False
        except orjson.JSONDecodeError:
            return False
        for line in fh:
            if line.strip():
                return line.lstrip().startswith(b"{")
    return False


def read_records(items: Iterable[tuple[str, object]], out: FileRecords) -> None:
    """Records one at a time, each ``(position, value)``, read as the items of an array of records (a post
    with its threads, a post detail, a comment): the rows of a Parquet file."""
    doc = _Doc(top="array")
    for i, (where, value) in enumerate(items):
        _array_item(doc, i, value, out, where=where)
    _finish(doc, out)


def read_json_lines(path: Path, start: int, out: FileRecords) -> None:
    """Every line of a JSON Lines dump read as an item of an array of records (a post with its threads, a
    post detail, a comment), at position ``line N``; a line that is not JSON is an error at that line and
    the lines before and after it are read."""
    doc = _Doc(top="array")
    with path.open("rb") as fh:
        fh.seek(start)
        n = 0
        while line := fh.readline(MAX_LINE_BYTES + 1):
            n += 1
            if not line.strip():
                continue
            if len(line) > MAX_LINE_BYTES:
                out.report.error(f"line {n}", f"longer than {MAX_LINE_BYTES >> 20} MiB (not read)")
                while line and not line.endswith(b"\n"):
                    line = fh.readline(MAX_LINE_BYTES)
                continue
            try:
                value = orjson.loads(line)
            except orjson.JSONDecodeError as exc:
                out.report.error(f"line {n}", f"not JSON: {exc}")
                continue
            _array_item(doc, n - 1, value, out, where=f"line {n}")
    _finish(doc, out)
    if out.report.shape in ("flat_posts", "flat_comments", "flat_mixed", "api_post_details"):
        out.report.shape = "jsonl_" + out.report.shape.removeprefix("flat_")
