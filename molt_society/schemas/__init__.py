"""The event contract of an agent society: event models, wire format, topics and control records."""

from molt_society.schemas.events import (
    EVENT_ADAPTER,
    EVENT_TYPES,
    SCHEMA_VERSION,
    AgentFollowed,
    AgentRegistered,
    AgentsJoined,
    AgentSubscribed,
    CommentCreated,
    Event,
    ModelCalled,
    PostCreated,
    SubmoltCreated,
    VoteCast,
    VoteTallied,
    partition_key,
)
from molt_society.schemas.wire import InvalidEvent, decode_event, encode_event

__all__ = [
    "EVENT_ADAPTER",
    "EVENT_TYPES",
    "SCHEMA_VERSION",
    "AgentFollowed",
    "AgentRegistered",
    "AgentSubscribed",
    "AgentsJoined",
    "CommentCreated",
    "Event",
    "InvalidEvent",
    "ModelCalled",
    "PostCreated",
    "SubmoltCreated",
    "VoteCast",
    "VoteTallied",
    "decode_event",
    "encode_event",
    "partition_key",
]
