"""Encoding on the wire: orjson, one event per Kafka record, readable decode errors.

``decode_event`` is the single gate every incoming action passes. It never raises anything but
``InvalidEvent``, whose ``reason`` is a sentence a person can read (it goes into the dead-letter headers).
"""

from __future__ import annotations

from typing import Any

import orjson
from pydantic import ValidationError

from molt_society.schemas.events import EVENT_ADAPTER, EVENT_TYPES, Event, format_time


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


MAX_REASON_CHARS = 1_000
"""A reason is a sentence, not a copy of the input: quoted input is cut to a few dozen characters."""
_QUOTE_CHARS = 80


def _short(text: str, limit: int = _QUOTE_CHARS) -> str:
    return text if len(text) <= limit else f"{text[:limit]}... ({len(text):,} characters)"


def quote(value: object, limit: int = _QUOTE_CHARS) -> str:
    """``repr(value)`` for a reason: printable (escapes, no raw bytes), at most ``limit`` characters."""
    if isinstance(value, bytes) and len(value) > limit:
        return f"{value[:limit]!r}... ({len(value):,} bytes)"
    return _short(repr(value), limit)


def _describe(err: ValidationError) -> str:
    parts = []
    for e in err.errors(include_url=False)[:5]:
        loc = _short(".".join(str(p) for p in e["loc"] if not (isinstance(p, str) and p in EVENT_TYPES)))
        msg = e["msg"]
        if e["type"] == "missing":
            parts.append(f"missing field '{loc}'")
        elif e["type"] == "extra_forbidden":
            parts.append(f"unknown field '{loc}'")
        elif not loc:
            parts.append(msg)
        else:
            parts.append(f"field '{loc}': {msg}")
    more = err.error_count() - len(parts)
    return _short("; ".join(parts) + (f" (and {more} more)" if more > 0 else ""), MAX_REASON_CHARS)


def _tag(err: ValidationError) -> str | None:
    """The event type the validator tried, when the input named a known one."""
    for e in err.errors(include_url=False)[:1]:
        for p in e["loc"][:1]:
            if isinstance(p, str) and p in EVENT_TYPES:
                return p
    return None


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
    except (ValueError, OverflowError, RecursionError, TypeError) as exc:  # a validator's own failure
        raise InvalidEvent(f"invalid event: {_short(str(exc), MAX_REASON_CHARS)}", "invalid_fields") from None
    raise _explain(raw, first_error)


def _explain(raw: bytes, err: ValidationError) -> InvalidEvent:
    """Why ``raw`` is not an event, in words a person can read."""
    first = err.errors(include_url=False)[0]
    if first["type"] == "json_invalid":
        detail = str(first.get("ctx", {}).get("error", first["msg"]))
        return InvalidEvent(f"malformed JSON: {_short(detail, MAX_REASON_CHARS)}", "malformed_json")
    try:
        doc = orjson.loads(raw)
    except orjson.JSONDecodeError:
        # JSON only to a lenient parser (NaN, Infinity, 1e999): the failing fields say why
        if not first["loc"]:
            return InvalidEvent(f"expected a JSON object: {first['msg']}", "not_an_object")
        etype = _tag(err)
        return InvalidEvent(f"invalid {etype or 'event'}: {_describe(err)}", "invalid_fields")
    if not isinstance(doc, dict):
        return InvalidEvent(f"expected a JSON object, got {type(doc).__name__}", "not_an_object")
    etype = doc.get("type")
    if etype not in EVENT_TYPES:
        known = ", ".join(EVENT_TYPES)
        shown = quote(etype)
        return InvalidEvent(f"unknown event type {shown}; known types: {known}", "unknown_type")
    return InvalidEvent(f"invalid {etype}: {_describe(err)}", "invalid_fields")
