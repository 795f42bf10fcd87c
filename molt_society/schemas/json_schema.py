"""The event contract as JSON Schema (draft 2020-12), for producers written in other languages."""

from __future__ import annotations

from typing import Any

from molt_society.schemas.events import EVENT_ADAPTER, SCHEMA_VERSION


def event_json_schema() -> dict[str, Any]:
    """JSON Schema of one event (any type; ``type`` is the discriminator)."""
    schema = EVENT_ADAPTER.json_schema(mode="validation")
    # ``type`` has a default in each model, so pydantic leaves it optional; on the wire it is the
    # discriminator and must be present.
    for definition in schema.get("$defs", {}).values():
        props = definition.get("properties", {})
        if "type" in props and "body" in props:
            required = definition.setdefault("required", [])
            if "type" not in required:
                required.append("type")
            props["type"].pop("default", None)
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema["$id"] = f"urn:molt-society:event:v{SCHEMA_VERSION}"
    schema["title"] = "Agent society event"
    schema["description"] = (
        "One immutable agent action. The envelope (event_id UUIDv7, type, schema_version, society, actor, "
        "occurred_at UTC with microseconds, causation_id) is shared; body depends on type. One event per "
        "Kafka record value, UTF-8 JSON."
    )
    return schema
