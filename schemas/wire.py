"""Encoding on the wire: orjson, one event per Kafka record, readable decode errors.

``decode_event`` is the single gate every incoming action passes. It never raises anything but
``InvalidEvent``, whose ``reason`` is a sentence a person can read (it goes into the dead-letter headers).
"""

from __future__ import annotations

from typing import Any

import orjson
from pydantic import ValidationError

from schemas.events import EVENT_ADAPTER, EVENT_TYPES, Event, format_time


class InvalidEvent(Exception):
    """An incoming record that is not a valid event; ``reason`` says why, for a person."""

    def __init__(self, reason: str, code: str) -> None:
        super().__init__(reason)
        self.reason = reason
        self.code = code


def encode_event(event: Event) -> bytes:
    """The wire bytes of an event (compact JSON, UTC timestamps with a Z)."""
    return orjson.dumps(event_to_dict(event))


def event_to_dict(event: Event) -> dict[str, Any]:
    """A JSON-ready dict of an event, in wire form."""
    d = event.model_dump(mode="python")
    d["event_id"] = str(event.event_id)
    d["occurred_at"] = format_time(event.occurred_at)
    return d


def _describe(err: ValidationError) -> str:
    parts = []
    for e in err.errors(include_url=False)[:5]:
        loc = ".".join(str(p) for p in e["loc"] if not (isinstance(p, str) and p in EVENT_TYPES))
        msg = e["msg"]
        if e["type"] == "missing":
            parts.append(f"missing field '{loc}'")
        elif e["type"] == "extra_forbidden":
            parts.append(f"unknown field '{loc}'")
        else:
            parts.append(f"field '{loc}': {msg}")
    more = err.error_count() - len(parts)
    return "; ".join(parts) + (f" (and {more} more)" if more > 0 else "")


def decode_event(raw: bytes | None, *, max_bytes: int) -> Event:
    """Parse and validate one record value. Raises ``InvalidEvent`` with a readable reason."""
    if raw is None:
        raise InvalidEvent("record has no value", "empty")
    if len(raw) > max_bytes:
        raise InvalidEvent(f"event is {len(raw)} bytes, over the {max_bytes}-byte limit", "too_large")
    try:
        # strict: a timestamp must be an ISO 8601 string, a depth an integer; the bytes are published as
        # they are, so whatever passes here must also pass the JSON Schema and every consumer.
        return EVENT_ADAPTER.validate_json(raw, strict=True)
    except ValidationError as exc:
        first_error = exc
    # Invalid: parse again only to say why, in words a person can read.
    try:
        doc = orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        raise InvalidEvent(f"malformed JSON: {exc}", "malformed_json") from None
    if not isinstance(doc, dict):
        raise InvalidEvent(f"expected a JSON object, got {type(doc).__name__}", "not_an_object")
    etype = doc.get("type")
    if etype not in EVENT_TYPES:
        known = ", ".join(EVENT_TYPES)
        raise InvalidEvent(f"unknown event type {etype!r}; known types: {known}", "unknown_type")
    raise InvalidEvent(f"invalid {etype}: {_describe(first_error)}", "invalid_fields")
