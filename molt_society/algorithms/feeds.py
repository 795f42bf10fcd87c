"""Feed ranking as MoltBook ranks posts: "new" by creation time, "hot" by Reddit's hot formula.

MoltBook is a Reddit-style site and its ``sort=hot`` listing behaves like Reddit's "hot":
``hot = sign(score) * log10(max(|score|, 1)) + created_seconds / 45000`` (one order of magnitude of net
votes is worth 12.5 hours of recency). It depends only on a post's own votes and creation time, not on
"now", so every worker computes the same ranking from the same events.

A feed is computed over the ``HOT_WINDOW`` newest posts of a submolt: an older post cannot beat a post
12.5 h newer without ten times its votes, and bounding the candidates keeps a tick's work constant.
"""

from __future__ import annotations

import math
from collections.abc import Iterable

from molt_society.schemas.control import FeedItem

HOT_WINDOW = 500


def hot_window(feed_size: int) -> int:
    """How many newest posts of a submolt a partition keeps: ``HOT_WINDOW``, or the feed's size when that
    is larger (a partition must be able to fill a 'new' list on its own for the merge to be exact)."""
    return max(HOT_WINDOW, feed_size)


_HOT_EPOCH_S = 1_134_028_003  # Reddit's epoch offset; only shifts every score by a constant.


def hot_score(score: int, created_us: int) -> float:
    """Reddit's hot rank of a post with net ``score`` created at ``created_us`` (Unix microseconds)."""
    order = math.log10(max(abs(score), 1))
    sign = 1 if score > 0 else -1 if score < 0 else 0
    return round(sign * order + (created_us / 1_000_000 - _HOT_EPOCH_S) / 45000, 7)


def rank_new(items: Iterable[FeedItem], n: int) -> list[FeedItem]:
    """The ``n`` newest items; ties by post id so the order is the same everywhere."""
    return sorted(items, key=lambda i: (-i["created_us"], i["post_id"]))[:n]


def rank_hot(items: Iterable[FeedItem], n: int) -> list[FeedItem]:
    """The ``n`` hottest items; ties by post id."""
    return sorted(items, key=lambda i: (-i["hot"], i["post_id"]))[:n]


def merge_feeds(
    parts: Iterable[dict[str, dict[str, list[FeedItem]]]], n: int
) -> dict[str, dict[str, list[FeedItem]]]:
    """Merge per-partition feeds into one per submolt.

    Each partition sends its own top ``n`` per list; the top ``n`` of the union of per-partition top-``n``
    lists is the global top ``n``, so the merge is exact.
    """
    merged: dict[str, dict[str, list[FeedItem]]] = {}
    for part in parts:
        for submolt, lists in part.items():
            slot = merged.setdefault(submolt, {"new": [], "hot": []})
            slot["new"].extend(lists.get("new", []))
            slot["hot"].extend(lists.get("hot", []))
    return {
        s: {"new": rank_new(v["new"], n), "hot": rank_hot(v["hot"], n)} for s, v in sorted(merged.items())
    }
