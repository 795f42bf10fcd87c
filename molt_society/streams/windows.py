"""Event-time windows of one partition: what an accepted event changes in its window (``Effect``) and what
the partition saw of each open window (``WindowAcc``), with the window's snapshot row."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any, NamedTuple


class Effect(NamedTuple):  # a tuple: built for every accepted event, a frozen dataclass costs 4x
    """What an accepted event changes in the window it falls in."""

    touched: str | None = None  # thread
    edge: tuple[str, str] | None = None  # interaction: commenter -> replied-to author
    counted: bool = True  # False for model calls: data, not actions
    joined: int = 0  # agents an agents_joined cohort registers (then its actor is not counted active)
    agent: bool = True  # False: the actor is the experiment or a moderator, not an active agent
    removed: str | None = None  # "post" or "comment": a removal that took content out of the feeds
    banned: int = 0  # agents an agent_banned bans


COUNTED, NOT_COUNTED = Effect(), Effect(counted=False)
INTERVENTION = Effect(agent=False)
REMOVED = {kind: Effect(agent=False, removed=kind) for kind in ("post", "comment")}
BANNED = Effect(agent=False, banned=1)


@dataclass(slots=True)
class WindowAcc:
    """What one partition saw of one event-time window."""

    counts: Counter[str] = field(default_factory=Counter)
    active: set[str] = field(default_factory=set)
    edges: Counter[tuple[str, str]] = field(default_factory=Counter)
    touched: set[str] = field(default_factory=set)
    joined: int = 0  # agents registered by agents_joined cohorts (they are not counted as active)
    removed: Counter[str] = field(default_factory=Counter)  # "post"/"comment" -> first removals
    banned: int = 0  # agent_banned events

    def row(self) -> list[Any]:
        """The window as a snapshot stores it (``of_row``)."""
        return [
            dict(self.counts),
            sorted(self.active),
            [[s, d, w] for (s, d), w in self.edges.items()],
            sorted(self.touched),
            self.joined,
            dict(self.removed),
            self.banned,
        ]

    @classmethod
    def of_row(cls, row: list[Any]) -> WindowAcc:
        """The window ``row`` stored (rows of snapshots taken before removals existed lack their fields)."""
        counts, active, edges, touched, joined, *moderation = row
        removed, banned = moderation if moderation else ({}, 0)
        return cls(
            Counter(counts),
            set(active),
            Counter({(s, d): w for s, d, w in edges}),
            set(touched),
            joined,
            Counter(removed),
            banned,
        )
