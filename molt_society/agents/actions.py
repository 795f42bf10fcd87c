"""The events of an agent's actions (a post, a comment, a vote), shared by the brains.

Every brain (``agents.stochastic``, the LLM brain's ``agents.llm_decision``) decides what an agent does in
its own way, then builds the event here: the envelope is the same for all of them, and a thread event's
id is its post or comment id. The caller draws the event id (``schemas.ids.uuid7`` with its seeded
generator), so the order of its random draws is its own.
"""

from __future__ import annotations

from datetime import datetime
from typing import Literal
from uuid import UUID

from molt_society.schemas.events import (
    CommentCreated,
    CommentCreatedBody,
    PostCreated,
    PostCreatedBody,
    VoteCast,
    VoteCastBody,
)


def post_created(
    eid: UUID, society: str, actor: str, at: datetime, *, submolt: str, title: str, content: str
) -> PostCreated:
    """A post of ``actor`` in ``submolt``; its post id is the event id."""
    body = PostCreatedBody(post_id=str(eid), submolt=submolt, title=title, content=content)
    return PostCreated(event_id=eid, society=society, actor=actor, occurred_at=at, body=body)


def comment_created(
    eid: UUID,
    society: str,
    actor: str,
    at: datetime,
    *,
    post_id: str,
    parent_id: str | None,
    depth: int,
    content: str,
    cause: str,
) -> CommentCreated:
    """A comment of ``actor`` in post ``post_id`` (a reply to ``parent_id`` when given); its comment id is
    the event id, ``cause`` what it answers (the parent comment, else the post)."""
    body = CommentCreatedBody(
        comment_id=str(eid), post_id=post_id, parent_id=parent_id, depth=depth, content=content
    )
    return CommentCreated(
        event_id=eid, society=society, actor=actor, occurred_at=at, causation_id=cause, body=body
    )


def vote_cast(
    eid: UUID,
    society: str,
    actor: str,
    at: datetime,
    *,
    post_id: str,
    target_type: Literal["post", "comment"],
    target_id: str,
    value: Literal[1, -1],
) -> VoteCast:
    """A vote of ``actor`` on a post or one of its comments; caused by its target."""
    body = VoteCastBody(target_type=target_type, target_id=target_id, post_id=post_id, value=value)
    return VoteCast(
        event_id=eid, society=society, actor=actor, occurred_at=at, causation_id=target_id, body=body
    )
