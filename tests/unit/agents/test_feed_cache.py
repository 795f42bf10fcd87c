"""FeedCache(as_of_tick=True): the view of tick t ignores updates of later ticks already read.

An agent worker killed in the middle of tick t is restarted, reads the feeds topic from its start and
redoes tick t: by then the log may hold the feed of t (the first instance finished the tick), and a view of
everything read would differ from the feed the first instance acted on; the events redone would then
conflict with the ones stored (same ids, other content). These updates are built by the stream workers'
own publisher (``streams.feed_updates.FeedPublisher``), so the cache reads what it reads in production.
"""

from __future__ import annotations

from typing import Any

import pytest

from molt_society.agents.feed_cache import FeedCache, FeedPassed
from molt_society.streams.feed_updates import FeedPublisher, FeedUpdate


def _item(pid: str, created: int, score: int) -> dict[str, Any]:
    return {
        "post_id": pid, "author": "a1", "submolt": "general", "title": pid, "created_us": created,
        "score": score, "comments": 0, "hot": float(score), "recent": [],
    }  # fmt: skip


def _updates(partitions: int, ticks: int) -> list[FeedUpdate]:
    """Per tick and partition, the update of a feed that gains one post per tick."""
    pubs = [FeedPublisher() for _ in range(partitions)]
    out = []
    for t in range(ticks):
        for q in range(partitions):
            posts = [_item(f"p{q}-{k}", k, k) for k in range(t + 1)]
            feed = {"general": {"new": posts[::-1], "hot": posts[::-1]}}
            out.append(pubs[q].update(feed, t, q, t * 1000))  # type: ignore[arg-type]
    return out


def _post_ids(cache: FeedCache, tick: int | None) -> set[str]:
    return {it["post_id"] for it in cache.view(tick).lists("general")["new"]}


def test_the_view_of_a_tick_holds_back_later_ticks() -> None:
    cache = FeedCache("unused:9092", "s", partitions=2, feed_size=50, as_of_tick=True)
    for upd in _updates(2, 5):  # ticks 0..4 read, as after a restart mid-tick 3
        cache.receive(upd)
    cache.complete_tick = 4  # what the consume loop records (and announces) after these records
    assert _post_ids(cache, 2) == {f"p{q}-{k}" for q in (0, 1) for k in range(3)}
    assert cache.view(2).tick == 2
    assert _post_ids(cache, 4) == {f"p{q}-{k}" for q in (0, 1) for k in range(5)}


def test_without_as_of_tick_the_view_holds_everything_read() -> None:
    """The clock's and the driver's caches (no view of a tick): the behaviour before the change."""
    cache = FeedCache("unused:9092", "s", partitions=2, feed_size=50)
    for upd in _updates(2, 5):
        cache.receive(upd)
    assert _post_ids(cache, None) == {f"p{q}-{k}" for q in (0, 1) for k in range(5)}


def test_a_view_of_a_tick_equals_a_cache_that_read_only_up_to_it() -> None:
    ups = _updates(3, 70)  # crosses a full update (FULL_EVERY) on every partition
    held = FeedCache("unused:9092", "s", partitions=3, feed_size=500, as_of_tick=True)
    for upd in ups:
        held.receive(upd)
    for t in (0, 10, 63, 64, 69):
        fresh = FeedCache("unused:9092", "s", partitions=3, feed_size=500)
        for upd in ups:
            if upd["tick"] <= t:
                fresh.receive(upd)
        assert held.view(t).submolts == fresh.view(None).submolts


def test_a_tick_older_than_one_shown_is_refused_not_shown_with_a_later_feed() -> None:
    """After a rebalance a worker can be given back a shard whose tick it had passed: its cache has
    applied later updates and cannot show the older feed, so it says so (the worker restarts)."""
    cache = FeedCache("unused:9092", "s", partitions=2, feed_size=50, as_of_tick=True)
    for upd in _updates(2, 5):
        cache.receive(upd)
    cache.complete_tick = 4
    assert _post_ids(cache, 3) == {f"p{q}-{k}" for q in (0, 1) for k in range(4)}
    assert _post_ids(cache, 3) == {f"p{q}-{k}" for q in (0, 1) for k in range(4)}  # the same tick again
    with pytest.raises(FeedPassed, match="tick 1 is gone"):
        cache.view(1)
