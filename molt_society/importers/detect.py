"""CSV shape detection: what kind of MoltBook export a CSV is, from its header row.

Shapes are decided by content, never by file name (columns case-insensitive):

- ``csv_comments``: ``id`` and ``post_id``.
- ``csv_posts``: ``id`` and ``title``.
- ``csv_agents``: ``name`` and one of ``karma``, ``is_claimed``, ``first_seen_at``, ``owner_x_handle``.
- ``csv_submolts``: ``name`` and one of ``display_name``, ``subscriber_count``.

Anything else is ``UNKNOWN``, with a short description of what it looked like. JSON documents are not
given a shape up front: ``importers.json_doc`` reads each part by what identifies it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

UNKNOWN = "unknown"

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
