"""The event contract: one envelope for every agent action, a typed body per event type.

Events are immutable facts. They are never updated or deleted; a correction is a new event. On the wire
an event is one JSON object (orjson) in the value of one Kafka record; see ``schemas.wire``.

Envelope fields (all events):

- ``event_id``: UUIDv7, unique; the idempotency key everywhere downstream.
- ``type``: the event type, which selects the body model.
- ``schema_version``: version of this contract (``SCHEMA_VERSION``).
- ``society``: name of the society the event belongs to.
- ``actor``: id of the agent that acted.
- ``occurred_at``: event time, UTC, microsecond precision. A timestamp without a zone is rejected.
- ``causation_id``: what the agent was reacting to (a feed item's post id, the event id of the comment it
  replied to), or null.
- ``body``: the type-specific fields below.

Bounds (stated in the JSON Schema too, so that no accepted record can break a consumer):

- counts (votes, reported comments, tokens) are integers from 0 to ``MAX_COUNT`` = 2**53 - 1, the largest
  integer a JSON number keeps exactly in every language (IEEE double: JavaScript, the JSON Schema
  validators, ClickHouse's JSON functions); 1,024 of them still sum within a signed 64-bit integer;
- numbers are finite: NaN, Infinity and overflowing literals such as ``1e999`` are rejected;
- text is valid Unicode without NUL (U+0000), which C-string tools truncate at; lone surrogates are not
  text (orjson, ClickHouse and browsers refuse or mangle them);
- ``occurred_at`` lies between the Unix epoch (event times are microseconds since it everywhere
  downstream) and ``LATEST_EVENT_TIME`` (inside ClickHouse's ``DateTime64`` range);
- a record is at most ``SOCIETY_MAX_EVENT_BYTES`` bytes (``schemas.wire``).

``vote_tallied`` carries votes known only as counts (imported dumps), so that importers never invent
individual votes; ``comment_created.parent_unknown`` marks an imported reply whose source gives its depth
but not its parent. ``agents_joined`` registers a cohort of agents with their subscriptions in one record
(a simulated society's genesis). ``model_called`` records one model call of an LLM agent (model, tokens,
latency, outcome, and the decision it led to): cost and latency are data, queried like any other event; it
is not a society action and counts in no activity metric.

Interventions of a controlled experiment (``society experiment``, ``schemas.experiment``) are events too, so
replays and forks reproduce them and SQL finds them: ``intervention_applied`` records one intervention of an
arm (its kind, parameters as JSON text and scope) when it takes effect; ``content_removed`` removes a post or
a comment from the feeds (the content stays in the log: events are never deleted); ``agent_banned`` stops an
agent from acting. Their actor is ``experiment`` or ``moderator``, not an agent.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime
from typing import Annotated, Literal
from uuid import UUID

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    TypeAdapter,
    model_validator,
)

SCHEMA_VERSION = 1

Id = Annotated[str, Field(min_length=1, max_length=128, pattern=r"^[A-Za-z0-9_.:@\-]+$")]
"""Ids of agents, posts, comments and submolts: printable, no spaces, at most 128 characters."""

MAX_COUNT = 2**53 - 1
"""Upper bound of every count: exact as a JSON number everywhere (see the module docstring)."""
Count = Annotated[int, Field(ge=0, le=MAX_COUNT)]

EARLIEST_EVENT_TIME = datetime(1970, 1, 1, tzinfo=UTC)
LATEST_EVENT_TIME = datetime(2200, 1, 1, tzinfo=UTC)


def _no_nul(value: str) -> str:
    if "\x00" in value:
        raise ValueError("text contains a NUL character (U+0000), which no text may contain")
    return value


Text = Annotated[str, AfterValidator(_no_nul), Field(json_schema_extra={"pattern": "^[^\\x00]*$"})]
"""Free text (names, titles, contents): any Unicode except NUL (pydantic refuses lone surrogates)."""


def require_event_time(value: datetime) -> datetime:
    """``value`` in UTC when it is zoned and within ``EARLIEST_EVENT_TIME``..``LATEST_EVENT_TIME`` (what
    ClickHouse's DateTime64 holds); ``ValueError`` with the reason otherwise."""
    if value.tzinfo is None or value.utcoffset() is None:
        raise ValueError("timestamp has no time zone; event time must be UTC (e.g. 2026-01-28T00:00:00Z)")
    try:
        in_range = EARLIEST_EVENT_TIME <= value < LATEST_EVENT_TIME
        value = value.astimezone(UTC)
    except OverflowError:  # e.g. 0001-01-01T00:00:00+01:00 is before year 1 in UTC
        in_range = False
    if not in_range:
        raise ValueError(
            f"event time {value.isoformat()} is outside the supported range "
            f"{EARLIEST_EVENT_TIME:%Y-%m-%d} to {LATEST_EVENT_TIME:%Y-%m-%d}"
        )
    return value


def _iso_only(value: object) -> object:
    if isinstance(value, datetime):
        return value
    if isinstance(value, str) and _ISO_DATE.match(value):
        try:
            return datetime.fromisoformat(value)
        except ValueError:
            pass
    raise ValueError("event time must be an ISO 8601 string such as 2026-01-28T00:00:00.000000Z")


_ISO_DATE = re.compile(r"^\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}")
EventTime = Annotated[
    datetime,
    BeforeValidator(_iso_only),
    AfterValidator(require_event_time),
    Field(description="UTC, from 1970-01-01 (inclusive) to 2200-01-01 (exclusive)"),
]


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, str_max_length=40_000, allow_inf_nan=False)


class AgentRegisteredBody(_Model):
    name: Annotated[Text, Field(min_length=1, max_length=200)]
    brain: Annotated[Text, Field(max_length=100)] = "stochastic"
    model: Annotated[Text, Field(max_length=200)] | None = None
    persona: Annotated[Text, Field(max_length=4000)] | None = None


MAX_JOINED = 1000
"""Most agents one ``agents_joined`` event registers (the record size bound applies as well)."""


class JoinedAgent(_Model):
    """One agent of an ``agents_joined`` cohort: what ``agent_registered`` and its ``agent_subscribed``
    events would say of it."""

    agent_id: Id
    name: Annotated[Text, Field(min_length=1, max_length=200)]
    brain: Annotated[Text, Field(max_length=100)] = "stochastic"
    model: Annotated[Text, Field(max_length=200)] | None = None
    persona: Annotated[Text, Field(max_length=4000)] | None = None
    subscriptions: Annotated[tuple[Id, ...], Field(max_length=256)] = ()


class AgentsJoinedBody(_Model):
    """A cohort of agents registering at once, each with its subscriptions (a society's genesis).

    The same facts as one ``agent_registered`` per agent plus one ``agent_subscribed`` per subscription,
    in one record: a million agents are about four thousand events instead of 3.5 million."""

    agents: Annotated[tuple[JoinedAgent, ...], Field(min_length=1, max_length=MAX_JOINED)]

    @model_validator(mode="after")
    def _distinct(self) -> AgentsJoinedBody:
        if len({a.agent_id for a in self.agents}) != len(self.agents):
            raise ValueError("an agent appears twice in one agents_joined cohort")
        return self


class SubmoltCreatedBody(_Model):
    submolt: Id
    title: Annotated[Text, Field(max_length=300)] = ""
    description: Annotated[Text, Field(max_length=4000)] = ""


class AgentSubscribedBody(_Model):
    submolt: Id


class AgentFollowedBody(_Model):
    target_agent: Id


class PostCreatedBody(_Model):
    post_id: Id
    submolt: Id
    title: Annotated[Text, Field(max_length=300)]
    content: Text = ""


class CommentCreatedBody(_Model):
    comment_id: Id
    post_id: Id
    parent_id: Id | None = Field(default=None, description="parent comment id; null for a top-level comment")
    depth: Annotated[int, Field(ge=1, le=10_000)] = Field(description="1 for a top-level comment")
    content: Text = ""
    parent_unknown: bool = Field(
        default=False,
        description="an imported reply whose source gives its depth but not its parent (parent_id is null)",
    )

    @model_validator(mode="after")
    def _parent_matches_depth(self) -> CommentCreatedBody:
        if self.parent_unknown and self.parent_id is not None:
            raise ValueError("parent_unknown is only for comments without a parent_id")
        if self.parent_id is None and self.depth != 1 and not self.parent_unknown:
            raise ValueError(f"a comment without parent_id is top-level (depth 1), not depth {self.depth}")
        return self


def _not_bool(value: object) -> object:
    if isinstance(value, bool):
        raise ValueError("a vote is the integer 1 or -1, not a boolean")
    return value


class VoteCastBody(_Model):
    target_type: Literal["post", "comment"]
    target_id: Id
    post_id: Id = Field(description="the thread the target belongs to (the post itself for a post vote)")
    value: Annotated[Literal[1, -1], BeforeValidator(_not_bool)]


class VoteTalliedBody(_Model):
    """Votes known only as counts (imported dumps): never individual votes, never who voted."""

    target_type: Literal["post", "comment"]
    target_id: Id
    post_id: Id
    upvotes: Count
    downvotes: Count
    reported_comments: Count | None = Field(
        default=None,
        description="the platform's comment count of a post, which may exceed the comments present",
    )


class ModelCalledBody(_Model):
    """One call of an LLM agent to its model, whatever came of it."""

    model: Annotated[Text, Field(min_length=1, max_length=200)]
    outcome: Literal["ok", "http_error", "unavailable", "timeout", "bad_response"]
    prompt_tokens: Count = 0
    completion_tokens: Count = 0
    latency_ms: Annotated[float, Field(ge=0, le=MAX_COUNT, allow_inf_nan=False)] = 0.0
    attempts: Annotated[int, Field(ge=0, le=1000)] = 1
    decision: Literal["post", "comment", "reply", "vote", "nothing", "failed"] = Field(
        description="the action the reply was parsed into, or failed (no call answer, or no valid action)"
    )
    reason: Annotated[Text, Field(max_length=2000)] | None = Field(
        default=None, description="why the call or the decision failed"
    )
    action_event_id: Id | None = Field(
        default=None, description="event_id of the action the decision produced"
    )


InterventionKind = Literal["feed_policy", "moderation", "inject", "behaviour"]


class InterventionAppliedBody(_Model):
    """One intervention of an experiment's arm, taking effect at the event's time."""

    experiment: Id
    arm: Id
    kind: InterventionKind
    params: Annotated[Text, Field(max_length=20_000)] = Field(
        description="the intervention's parameters as in the spec, a JSON object (text)"
    )
    scope: Annotated[Text, Field(max_length=2000)] = Field(
        default="all", description="who it applies to: all, submolts:<a,b>, share:<f>, agents:<n>"
    )


class ContentRemovedBody(_Model):
    """A moderator removed a post or a comment from the feeds (the content itself stays in the log)."""

    target_type: Literal["post", "comment"]
    target_id: Id
    post_id: Id = Field(description="the thread the target belongs to (the post itself for a post)")
    rule: Annotated[Text, Field(min_length=1, max_length=100)]
    reason: Annotated[Text, Field(max_length=2000)] = ""


class AgentBannedBody(_Model):
    """A moderator banned an agent: it takes no further action in the society."""

    agent_id: Id
    rule: Annotated[Text, Field(min_length=1, max_length=100)]
    reason: Annotated[Text, Field(max_length=2000)] = ""


class _Envelope(_Model):
    event_id: UUID
    schema_version: Annotated[int, Field(ge=1, le=SCHEMA_VERSION)] = SCHEMA_VERSION
    society: Id
    actor: Id
    occurred_at: EventTime
    causation_id: Id | None = None


class AgentRegistered(_Envelope):
    type: Literal["agent_registered"] = "agent_registered"
    body: AgentRegisteredBody


class AgentsJoined(_Envelope):
    """``actor`` is the cohort's first agent (its key: ``agent:<actor>``)."""

    type: Literal["agents_joined"] = "agents_joined"
    body: AgentsJoinedBody

    @model_validator(mode="after")
    def _actor_first(self) -> AgentsJoined:
        if self.body.agents[0].agent_id != self.actor:
            raise ValueError("the actor of agents_joined is the cohort's first agent")
        return self


class SubmoltCreated(_Envelope):
    type: Literal["submolt_created"] = "submolt_created"
    body: SubmoltCreatedBody


class AgentSubscribed(_Envelope):
    type: Literal["agent_subscribed"] = "agent_subscribed"
    body: AgentSubscribedBody


class AgentFollowed(_Envelope):
    type: Literal["agent_followed"] = "agent_followed"
    body: AgentFollowedBody


class PostCreated(_Envelope):
    type: Literal["post_created"] = "post_created"
    body: PostCreatedBody


class CommentCreated(_Envelope):
    type: Literal["comment_created"] = "comment_created"
    body: CommentCreatedBody


class VoteCast(_Envelope):
    type: Literal["vote_cast"] = "vote_cast"
    body: VoteCastBody


class VoteTallied(_Envelope):
    type: Literal["vote_tallied"] = "vote_tallied"
    body: VoteTalliedBody


class ModelCalled(_Envelope):
    type: Literal["model_called"] = "model_called"
    body: ModelCalledBody


class InterventionApplied(_Envelope):
    type: Literal["intervention_applied"] = "intervention_applied"
    body: InterventionAppliedBody


class ContentRemoved(_Envelope):
    type: Literal["content_removed"] = "content_removed"
    body: ContentRemovedBody


class AgentBanned(_Envelope):
    type: Literal["agent_banned"] = "agent_banned"
    body: AgentBannedBody


Event = Annotated[
    AgentRegistered
    | AgentsJoined
    | SubmoltCreated
    | AgentSubscribed
    | AgentFollowed
    | PostCreated
    | CommentCreated
    | VoteCast
    | VoteTallied
    | ModelCalled
    | InterventionApplied
    | ContentRemoved
    | AgentBanned,
    Field(discriminator="type"),
]
EVENT_TYPES: tuple[str, ...] = (
    "agent_registered",
    "agents_joined",
    "submolt_created",
    "agent_subscribed",
    "agent_followed",
    "post_created",
    "comment_created",
    "vote_cast",
    "vote_tallied",
    "model_called",
    "intervention_applied",
    "content_removed",
    "agent_banned",
)
EVENT_ADAPTER: TypeAdapter[Event] = TypeAdapter(Event)

THREAD_TYPES = frozenset({"post_created", "comment_created", "vote_cast", "vote_tallied", "content_removed"})
_THREAD_BODIES = (PostCreatedBody, CommentCreatedBody, VoteCastBody, VoteTalliedBody, ContentRemovedBody)


def partition_key(event: Event) -> str:
    """The Kafka key of an event: its thread (post id) for thread events, else the agent or submolt.

    Keying a thread's post, comments and votes alike puts a whole thread in one partition, in order, so
    the stream processor can check that a comment's parent exists with state local to the partition.
    """
    body = event.body
    if isinstance(body, _THREAD_BODIES):  # a tuple: cheaper than a union built at each call
        return body.post_id
    if isinstance(body, SubmoltCreatedBody):
        return f"submolt:{body.submolt}"
    return f"agent:{event.actor}"


def partition_key_of(doc: dict[str, object]) -> str:
    """``partition_key`` of an event in wire form (a dict), without building the model. Total: a record
    that is no valid event still gets a key (its thread's, else its actor's), so that it reaches the stream
    worker, which dead-letters it with the reason."""
    body = doc.get("body")
    etype = doc.get("type")
    if isinstance(body, dict):
        if etype in THREAD_TYPES and "post_id" in body:
            return str(body["post_id"])
        if etype == "submolt_created" and "submolt" in body:
            return f"submolt:{body['submolt']}"
    return f"agent:{doc.get('actor')}"


def format_time(value: datetime) -> str:
    """ISO 8601 UTC with microseconds and a ``Z``: the wire format of every timestamp."""
    if value.tzinfo is not UTC:
        value = value.astimezone(UTC)
    # isoformat, not strftime: half the time, and it is called for every event written (years 1970-2199)
    return value.isoformat(timespec="microseconds")[:-6] + "Z"
