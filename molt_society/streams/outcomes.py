"""What a partition's state answers for one record: accepted, a duplicate, rejected, or a mark applied."""

from __future__ import annotations

from dataclasses import dataclass

from molt_society.schemas.control import WindowPartial


# Outcomes are built for every record: plain slotted dataclasses, which build 3x faster than frozen ones.
@dataclass(slots=True)
class Accepted:
    event_id: str
    event_type: str
    occurred_us: int
    late: bool


@dataclass(slots=True)
class Duplicate:
    event_id: str


@dataclass(slots=True)
class Rejected:
    reason: str
    code: str


Outcome = Accepted | Duplicate | Rejected


@dataclass(frozen=True, slots=True)
class MarkApplied:
    """A watermark that counted: the partials of the windows it closed, the tick it completed (or None)."""

    partials: list[WindowPartial]
    tick: int | None
