"""Feed records as changes: what a reader must learn to know a partition's feed, and no more.

A partition's feed (per submolt, the top posts by "new" and by "hot") changes a little per tick: a few
posts gain a comment or a vote, a few new posts enter. Publishing the whole feed every tick put about
270 KB per tick on the broker for a society of 2,000 agents (30 times its events), and the local broker
keeps every record in memory. A ``FeedUpdate`` carries instead:

- ``submolts``: the ranked post ids of the submolts whose lists changed;
- ``items``: the feed items that are new to the reader or differ from what it holds;
- ``full``: true when the reader must forget what it holds first (a publisher's first update, e.g. after a
  stream worker restart, and every ``FULL_EVERY`` ticks, so a reader can start from any full update).

Publisher and reader keep the same ``FeedState`` (lists of ids plus the items they name, items named by no
list dropped), so the reader's view equals the feed the publisher ranked, item for item.
"""

from __future__ import annotations

from typing import TypedDict

from molt_society.schemas.control import FeedItem

FULL_EVERY = 64
"""Ticks between two full updates of a partition (a reader starting mid-log waits at most this long)."""


class FeedUpdate(TypedDict):
    tick: int
    partition: int
    watermark_us: int
    full: bool
    submolts: dict[str, dict[str, list[str]]]  # submolt -> {"new": [post ids], "hot": [post ids]}
    items: dict[str, FeedItem]  # post id -> item


class FeedState:
    """What a reader knows of one partition's feed (see module docstring)."""

    def __init__(self) -> None:
        self.lists: dict[str, dict[str, list[str]]] = {}
        self.items: dict[str, FeedItem] = {}
        self._named: dict[str, int] = {}  # post id -> how many lists name it

    def apply(self, update: FeedUpdate) -> None:
        """Take ``update`` in; items that no list names any more are dropped. The cost is that of what
        changed (the lists replaced and their ids), not of the whole feed: the names are counted."""
        if update["full"]:
            self.lists, self.items, self._named = {}, {}, {}
        named, unnamed = self._named, []
        for s, lists in update["submolts"].items():
            for ids in self.lists.get(s, {}).values():
                for pid in ids:
                    named[pid] -= 1
                    if not named[pid]:
                        unnamed.append(pid)
            for ids in lists.values():
                for pid in ids:
                    named[pid] = named.get(pid, 0) + 1
            self.lists[s] = lists
        self.items.update(update["items"])
        for pid in unnamed:
            if not named.get(pid):
                named.pop(pid, None)
                self.items.pop(pid, None)
        for pid in update["items"]:
            if pid not in named:
                del self.items[pid]

    def view(self) -> dict[str, dict[str, list[FeedItem]]]:
        """The feed: per submolt the ranked items of "new" and "hot"."""
        items = self.items
        return {
            s: {kind: [items[pid] for pid in ids] for kind, ids in lists.items()}
            for s, lists in self.lists.items()
        }


class FeedPublisher:
    """Turns a partition's current feed into the update its readers need, mirroring their state."""

    def __init__(self) -> None:
        self.mirror = FeedState()
        self.last_full: int | None = None
        # the lists object of each submolt the last update looked at: a partition's feed cache replaces a
        # submolt's lists when it re-ranks them and keeps the same object otherwise, so an unchanged
        # submolt is skipped without comparing its items (a replay of 600 submolts spent 29% of the
        # stream worker in this loop)
        self._seen: dict[str, object] = {}

    def update(
        self, feed: dict[str, dict[str, list[FeedItem]]], tick: int, partition: int, watermark_us: int
    ) -> FeedUpdate:
        full = self.last_full is None or tick - self.last_full >= FULL_EVERY or tick < self.last_full
        known = {} if full else self.mirror.lists
        have = {} if full else self.mirror.items
        submolts: dict[str, dict[str, list[str]]] = {}
        items: dict[str, FeedItem] = {}
        if full:
            self._seen = {}
        seen = self._seen
        for s, lists in feed.items():
            if seen.get(s) is lists:
                continue
            seen[s] = lists
            ids = {kind: [it["post_id"] for it in ranked] for kind, ranked in lists.items()}
            if known.get(s) != ids:
                submolts[s] = ids
            for ranked in lists.values():
                for it in ranked:
                    pid = it["post_id"]
                    if pid not in items and have.get(pid) != it:
                        items[pid] = it
        if full:
            self.last_full = tick
        upd: FeedUpdate = {
            "tick": tick,
            "partition": partition,
            "watermark_us": watermark_us,
            "full": full,
            "submolts": submolts,
            "items": items,
        }
        self.mirror.apply(upd)
        return upd
