"""Shape detection: what kind of MoltBook dump a parsed JSON document or a CSV header is.

Shapes are decided by content, never by file name:

JSON
- ``api_post_detail``: an object with a ``post`` object and a ``comments`` array (``GET /posts/<id>``).
- ``api_post_listing``: an object with a ``posts`` array and no ``date`` (``GET /posts``).
- ``daily_posts`` / ``daily_comments``: an object with ``date`` and a ``posts`` / ``comments`` array.
- ``flat_posts`` / ``flat_comments``: an array of post objects (``title``) / comment objects
  (``post_id``).

CSV (by header columns, case-insensitive)
- ``csv_comments``: ``id`` and ``post_id``.
- ``csv_posts``: ``id`` and ``title``.
- ``csv_agents``: ``name`` and one of ``karma``, ``is_claimed``, ``first_seen_at``, ``owner_x_handle``.
- ``csv_submolts``: ``name`` and one of ``display_name``, ``subscriber_count``.

Anything else is ``UNKNOWN``, with a short description of what it looked like.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

UNKNOWN = "unknown"

JSON_SHAPES = (
    "api_post_detail",
    "api_post_listing",
    "daily_posts",
    "daily_comments",
    "flat_posts",
    "flat_comments",
)
CSV_SHAPES = ("csv_posts", "csv_comments", "csv_agents", "csv_submolts")

# Columns a CSV of a shape must have (each entry: alternatives, any one of which will do).
CSV_REQUIRED: dict[str, tuple[tuple[str, ...], ...]] = {
    "csv_posts": (("id",), ("title",), ("created_at",)),
    "csv_comments": (("id",), ("post_id",), ("created_at",)),
    "csv_agents": (("name",),),
    "csv_submolts": (("name",),),
}


@dataclass(frozen=True)
class Detected:
    """A detected shape, or ``UNKNOWN`` with ``looks_like`` saying what was found instead."""

    shape: str
    looks_like: str = ""


def _describe(doc: object) -> str:
    if isinstance(doc, dict):
        keys = ", ".join(sorted(str(k) for k in doc)[:8])
        more = "" if len(doc) <= 8 else f" (+{len(doc) - 8} more)"
        return f"a JSON object with keys [{keys}{more}]"
    if isinstance(doc, list):
        kinds = sorted({type(x).__name__ for x in doc[:50]})
        return f"a JSON array of {len(doc)} item(s) ({', '.join(kinds) or 'empty'})"
    return f"a JSON {type(doc).__name__}"


def _all_have(items: Sequence[object], key: str) -> bool:
    return bool(items) and all(isinstance(x, dict) and key in x for x in items)


def detect_json(doc: object) -> Detected:
    """The shape of a parsed JSON document."""
    if isinstance(doc, dict):
        if isinstance(doc.get("post"), dict) and isinstance(doc.get("comments"), list):
            return Detected("api_post_detail")
        if isinstance(doc.get("posts"), list) and "post" not in doc:
            return Detected("daily_posts" if "date" in doc else "api_post_listing")
        if isinstance(doc.get("comments"), list) and "date" in doc and "post" not in doc:
            return Detected("daily_comments")
        return Detected(UNKNOWN, _describe(doc))
    if isinstance(doc, list):
        sample = doc[:50]
        if _all_have(sample, "post_id"):
            return Detected("flat_comments")
        if _all_have(sample, "title") and _all_have(sample, "id"):
            return Detected("flat_posts")
    return Detected(UNKNOWN, _describe(doc))


def normalise_header(header: Sequence[str]) -> list[str]:
    """Header cells stripped and lower-cased (a UTF-8 BOM on the first cell removed)."""
    return [h.strip().lstrip("\ufeff").lower() for h in header]


def detect_csv(header: Sequence[str]) -> Detected:
    """The shape of a CSV from its header row (already normalised)."""
    cols = set(header)
    if {"id", "post_id"} <= cols:
        return Detected("csv_comments")
    if {"id", "title"} <= cols:
        return Detected("csv_posts")
    if "name" in cols and cols & {"karma", "is_claimed", "first_seen_at", "owner_x_handle"}:
        return Detected("csv_agents")
    if "name" in cols and cols & {"display_name", "subscriber_count"}:
        return Detected("csv_submolts")
    shown = ",".join(header[:10])
    return Detected(UNKNOWN, f"a CSV with header [{shown}]")


def missing_columns(shape: str, header: Sequence[str]) -> list[str]:
    """Required columns of ``shape`` that the header lacks (alternatives shown as ``a|b``)."""
    cols = set(header)
    return ["|".join(alts) for alts in CSV_REQUIRED.get(shape, ()) if not cols & set(alts)]
