"""A society's stored events as flat rows, one event type at a time: what the layout exporters read.

The ``events`` table is ordered by ``(society, type, event_id)``, so reading one type in ``event_id`` order
from the last id seen (a keyset, not ``OFFSET``) reads each part of the table once: the cost of a page does
not grow with the pages before it. The columns are the table's flattened ones (the sink fills them from
each event's body, ``sinks.clickhouse.event_row``); ``body`` (JSON text) only for the types whose
exported fields live there (tallies' counts, agents' names, submolts' titles, follows' targets).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, NamedTuple
from uuid import UUID

from molt_society.warehouse.reader import run_query

PAGE = 50_000
BODY_TYPES = (
    "comment_created",
    "vote_tallied",
    "agent_registered",
    "agents_joined",
    "submolt_created",
    "agent_followed",
)
"""Types whose exported fields are in ``body`` (for a comment: ``parent_unknown``)."""


def quote(value: str) -> str:
    """A ClickHouse string literal (society names are ids: no quotes, but never trust that)."""
    return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"


class ExportRow(NamedTuple):
    """One stored event, flattened as in the ``events`` table (empty strings and zeros where unused)."""

    type: str
    event_id: str
    actor: str
    us: int
    post_id: str = ""
    comment_id: str = ""
    parent_id: str = ""
    submolt: str = ""
    depth: int = 0
    target_type: str = ""
    target_id: str = ""
    vote: int = 0
    title: str = ""
    content: str = ""
    body: str = ""


_COLUMNS = (
    "type, toString(event_id), actor, toUnixTimestamp64Micro(occurred_at), post_id, comment_id, parent_id, "
    "submolt, depth, target_type, target_id, vote, title, content, "
    f"if(type IN ({', '.join(quote(t) for t in BODY_TYPES)}), body, '')"
)


def _row(values: Any) -> ExportRow:
    t, eid, actor, us, post, comment, parent, sub, depth, ttype, target, vote, title, content, body = values
    return ExportRow(
        str(t), str(eid), str(actor), int(us), str(post), str(comment), str(parent), str(sub), int(depth),
        str(ttype), str(target), int(vote), str(title), str(content), str(body),
    )  # fmt: skip


def count_types(settings: Any, society: str) -> dict[str, int]:
    """How many events of each type ``society`` has stored."""
    sql = f"SELECT type, count() FROM events FINAL WHERE society = {quote(society)} GROUP BY type"
    return {str(t): int(n) for t, n in run_query(settings, sql).rows}


def iter_rows(settings: Any, society: str, event_type: str, page: int | None = None) -> Iterator[ExportRow]:
    """Every stored event of ``event_type`` of ``society``, in ``event_id`` order, ``page`` (``PAGE``) at a
    time."""
    for values in iter_keyset(settings, society, event_type, _COLUMNS, page=page):
        yield _row(values)


def iter_keyset(
    settings: Any, society: str, event_type: str, columns: str, where: str = "", page: int | None = None
) -> Iterator[Any]:
    """The rows (``columns``, whose second is ``toString(event_id)``) of the stored events of
    ``event_type`` of ``society`` that meet ``where`` (an SQL condition of the caller's own making, or
    empty), in ``event_id`` order, ``page`` (``PAGE``) at a time."""
    page = page or PAGE
    after: UUID | None = None
    while True:
        cond = "" if after is None else f" AND event_id > toUUID({quote(str(after))})"
        sql = (
            f"SELECT {columns} FROM events FINAL WHERE society = {quote(society)} "
            f"AND type = {quote(event_type)}{cond}{where} ORDER BY event_id LIMIT {int(page)}"
        )
        rows = run_query(settings, sql).rows
        yield from rows
        if len(rows) < page:
            return
        after = UUID(str(rows[-1][1]))  # parsed: only a UUID's own text goes back into the SQL
