"""Which typed columns of the ``events`` table each event type fills, and from which body field: declared
once, here, for every type of ``schemas.events.EVENT_TYPES``.

The ``events`` table (``warehouse/tables.sql``) has the envelope's columns, the whole body as JSON
(``body``), and ten typed columns for what queries filter and join on: ``TYPED_COLUMNS``. The sink builds
them from this table (``sinks.clickhouse.event_row``); a type not declared here is an error there, never a
row with silently empty columns. ``tests/unit/test_event_types.py`` walks every event type through the
stream processor and the sink and checks each declared column against the event it came from.
"""

from __future__ import annotations

from dataclasses import dataclass

TYPED_COLUMNS: tuple[str, ...] = (
    "post_id",
    "comment_id",
    "parent_id",
    "submolt",
    "depth",
    "target_type",
    "target_id",
    "vote",
    "title",
    "content",
)
INT_COLUMNS = frozenset({"depth", "vote"})
EMPTY: tuple[str | int, ...] = tuple(0 if c in INT_COLUMNS else "" for c in TYPED_COLUMNS)
"""A typed column's value when the type does not fill it (ClickHouse's defaults)."""


@dataclass(frozen=True)
class Field:
    """The column is the body's ``name`` (``optional``: a missing or null value leaves it empty)."""

    name: str
    optional: bool = False


@dataclass(frozen=True)
class Const:
    """The column is ``value`` for every event of the type."""

    value: str | int


Source = Field | Const

COLUMNS: dict[str, dict[str, Source]] = {
    "agent_registered": {},
    "agents_joined": {},
    "submolt_created": {"submolt": Field("submolt")},
    "agent_subscribed": {"submolt": Field("submolt")},
    "agent_followed": {},  # follower and followee stay in body
    "post_created": {
        "post_id": Field("post_id"),
        "submolt": Field("submolt"),
        "title": Field("title", optional=True),
        "content": Field("content", optional=True),
    },
    "comment_created": {
        "post_id": Field("post_id"),
        "comment_id": Field("comment_id"),
        "parent_id": Field("parent_id", optional=True),
        "depth": Field("depth"),
        "content": Field("content", optional=True),
    },
    "vote_cast": {
        "post_id": Field("post_id"),
        "target_type": Field("target_type"),
        "target_id": Field("target_id"),
        "vote": Field("value"),
    },
    "vote_tallied": {  # the counts (upvotes, downvotes, reported_comments) stay in body
        "post_id": Field("post_id"),
        "target_type": Field("target_type"),
        "target_id": Field("target_id"),
    },
    "model_called": {},
    "intervention_applied": {},  # its experiment, arm, kind, params and scope stay in body
    "content_removed": {  # rule and reason stay in body
        "post_id": Field("post_id"),
        "target_type": Field("target_type"),
        "target_id": Field("target_id"),
    },
    "agent_banned": {"target_type": Const("agent"), "target_id": Field("agent_id")},
}
