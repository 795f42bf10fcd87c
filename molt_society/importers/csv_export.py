"""Readers of CSV exports (posts, comments, agents, submolts), recognised by their header columns.

Column names are matched case-insensitively; alternatives used by the known exports are accepted:
author in ``agent_name`` or ``author``; comment count in ``comment_count`` or ``comments``; votes as
``upvotes``/``downvotes`` or as a net ``score``. An empty cell means "not given".

Positions are physical line numbers (1 = header), the line where a record starts, so a record with a
multi-line field is still found. A malformed CSV stops the file at that line with an error; the rows
read before it are kept.
"""

from __future__ import annotations

import csv
from collections.abc import Iterable, Iterator

from molt_society.importers.records import (
    AgentRecord,
    CommentRecord,
    Counts,
    FileRecords,
    PostRecord,
    RecordError,
    SubmoltRecord,
    optional_id,
    parse_author,
    parse_count,
    parse_id,
    parse_submolt,
    parse_time,
)

Row = dict[str, str]


KIND = {"csv_posts": "posts", "csv_comments": "comments", "csv_agents": "agents", "csv_submolts": "submolts"}


def iter_rows(lines: Iterable[str], out: FileRecords, kind: str) -> Iterator[tuple[int, Row]]:
    """(start line, row as {normalised column: cell}) for every data row of ``lines`` (decoded lines,
    endings kept, read one at a time); errors go to the report, rows are counted as read ``kind``."""
    reader = csv.reader(lines)
    try:
        header = [h.strip().lstrip("\ufeff").lower() for h in next(reader)]
    except (StopIteration, csv.Error):
        return
    last = reader.line_num
    while True:
        try:
            cells = next(reader)
        except StopIteration:
            return
        except csv.Error as exc:
            out.report.error(f"line {reader.line_num}", f"malformed CSV: {exc}")
            return
        start, last = last + 1, reader.line_num
        if not cells:
            continue  # blank line
        out.report.read[kind] += 1
        if len(cells) != len(header):
            out.report.skip(
                "row has a different number of fields than the header",
                f"line {start}",
                f"{len(cells)} fields, header has {len(header)}",
            )
            continue
        yield start, dict(zip(header, cells, strict=True))


def _first(row: Row, *names: str) -> str:
    for name in names:
        value = row.get(name)
        if value:
            return value
    return ""


def _counts(row: Row) -> Counts:
    return Counts(
        upvotes=parse_count(row.get("upvotes")),
        downvotes=parse_count(row.get("downvotes")),
        score=parse_count(row.get("score")),
        comment_count=parse_count(_first(row, "comment_count", "comments")),
    )


def read_csv(shape: str, lines: Iterable[str], out: FileRecords) -> None:
    """Every record of a CSV whose shape (``csv_posts``...) was detected from its header, streamed."""
    for line, row in iter_rows(lines, out, KIND[shape]):
        position = f"line {line}"
        try:
            if shape == "csv_posts":
                _post(row, out, position)
            elif shape == "csv_comments":
                _comment(row, out, position)
            elif shape == "csv_agents":
                _agent(row, out, position)
            elif shape == "csv_submolts":
                _submolt(row, out, position)
        except RecordError as exc:
            rid = row.get("id") or row.get("name") or ""
            if shape == "csv_posts" and rid:
                out.unreadable_posts.add(rid)
            if shape == "csv_comments" and rid:
                out.unreadable_comments.add(rid)
            out.report.skip(exc.reason, position, f"id {rid!r} {exc.detail}".strip())


def _post(row: Row, out: FileRecords, position: str) -> None:
    out.posts.append(
        PostRecord(
            id=parse_id(row.get("id"), "post id"),
            title=row.get("title"),
            content=row.get("content"),
            author=parse_author(_first(row, "agent_name", "author") or None),
            submolt=parse_submolt(row.get("submolt")),
            created_at=parse_time(row.get("created_at")),
            counts=_counts(row),
            origin=out.origin(position),
        )
    )


def _comment(row: Row, out: FileRecords, position: str) -> None:
    out.comments.append(
        CommentRecord(
            id=parse_id(row.get("id"), "comment id"),
            post_id=parse_id(row.get("post_id"), "post id of comment"),
            parent_id=optional_id(row.get("parent_id"), "parent id"),
            source_depth=None,
            content=row.get("content"),
            author=parse_author(_first(row, "agent_name", "author") or None),
            created_at=parse_time(row.get("created_at")),
            counts=_counts(row),
            origin=out.origin(position),
        )
    )


def _agent(row: Row, out: FileRecords, position: str) -> None:
    name = (row.get("name") or "").strip()
    if not name:
        raise RecordError("agent name missing")
    created = row.get("created_at") or ""
    out.agents.append(
        AgentRecord(
            name=name,
            description=row.get("description") or None,
            registered_at=parse_time(created) if created else None,
            origin=out.origin(position),
        )
    )


def _submolt(row: Row, out: FileRecords, position: str) -> None:
    name = (row.get("name") or "").strip()
    if not name:
        raise RecordError("submolt name missing")
    out.submolts.append(
        SubmoltRecord(
            name=name,
            display_name=row.get("display_name") or None,
            description=row.get("description") or None,
            origin=out.origin(position),
        )
    )
