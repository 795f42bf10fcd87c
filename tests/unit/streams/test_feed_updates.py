"""Feed records as changes (``streams.feed_updates``): a reader applying a partition's updates in order
holds exactly the feed the partition ranked, at every tick, and the updates are a fraction of the feeds."""

from __future__ import annotations

import zlib
from datetime import UTC, datetime, timedelta

import numpy as np
import orjson

from molt_society.agents.behaviour import load_behaviour
from molt_society.agents.brain import FeedView, TickContext
from molt_society.agents.roster import build_roster
from molt_society.agents.stochastic import StochasticBrain
from molt_society.algorithms.feeds import merge_feeds
from molt_society.schemas.control import FeedItem
from molt_society.schemas.events import partition_key
from molt_society.schemas.wire import encode_event
from molt_society.streams.feed_updates import FULL_EVERY, FeedState, FeedUpdate
from molt_society.streams.partition_state import PartitionState

START = datetime(2026, 1, 28, tzinfo=UTC)
P = 2


def _state(q: int, partitions: int, feed_size: int) -> PartitionState:
    return PartitionState(
        q,
        partitions,
        window_us=3600 * 10**6,
        feed_size=feed_size,
        max_event_bytes=1 << 20,
        max_future_us=2**62,
    )


def _run(ticks: int) -> list[tuple[list[FeedUpdate], list[dict[str, dict[str, list[FeedItem]]]]]]:
    """A real society on ``P`` partitions: per tick, each partition's update and its full feed."""
    behaviour = load_behaviour()
    roster = build_roster(3, 1500, 2, behaviour)
    brain = StochasticBrain(behaviour)
    states = [
        PartitionState(
            q, P, window_us=3600 * 10**6, feed_size=15, max_event_bytes=1 << 20, max_future_us=2**62
        )
        for q in range(P)
    ]
    readers = [FeedState() for _ in range(P)]
    feed = FeedView(-1, {})
    out = []
    for tick in range(ticks):
        for shard in range(2):
            ctx = TickContext(
                "s",
                tick,
                START + timedelta(seconds=300 * tick),
                300.0,
                np.random.default_rng([3, shard, tick]),
                tuple(behaviour.submolts.names),
            )
            for ev in brain.decide_now(roster.cohort(shard), feed, ctx):
                q = zlib.crc32(partition_key(ev).encode()) % P
                states[q].accept_action(encode_event(ev), now_us=2**62)
        updates = [s.feed_update(tick) for s in states]
        fulls = [s.feed_snapshot(tick)["submolts"] for s in states]  # the whole feed, as it was sent before
        for r, u in zip(readers, updates, strict=True):
            r.apply(orjson.loads(orjson.dumps(u)))  # through the wire form
        out.append((updates, fulls))
        feed = FeedView(tick, merge_feeds((r.view() for r in readers), 15))
    return out


def test_reader_holds_the_ranked_feed_and_updates_are_small() -> None:
    ticks = FULL_EVERY + 20
    run = _run(ticks)
    readers = [FeedState() for _ in range(P)]
    late = [FeedState() for _ in range(P)]  # starts reading at the second full update
    sent = whole = 0
    for tick, (updates, fulls) in enumerate(run):
        for q in range(P):
            readers[q].apply(updates[q])
            assert readers[q].view() == fulls[q], (tick, q)
            if tick >= FULL_EVERY:
                if tick == FULL_EVERY:
                    assert updates[q]["full"]
                late[q].apply(updates[q])
                assert late[q].view() == fulls[q]
            sent += len(orjson.dumps(updates[q]))
            whole += len(orjson.dumps(fulls[q]))
    assert [u["full"] for u in run[0][0]] == [True] * P
    assert not any(u["full"] for updates, _ in run[1:FULL_EVERY] for u in updates)
    assert sent < whole / 4, (sent, whole)  # measured: about a tenth


def test_a_restarted_publisher_starts_with_a_full_update() -> None:
    """A fresh state (a stream worker restarted) sends everything; a reader holding stale items ends up
    with exactly the new feed."""
    s = PartitionState(
        0, 1, window_us=3600 * 10**6, feed_size=5, max_event_bytes=1 << 20, max_future_us=2**62
    )
    reader = FeedState()
    reader.lists = {"general": {"new": ["gone"], "hot": ["gone"]}}
    reader.items = {"gone": {"post_id": "gone"}}  # type: ignore[typeddict-item]
    u = s.feed_update(0)
    assert u["full"]
    reader.apply(u)
    assert reader.view() == s.feed_snapshot(0)["submolts"]
    assert "gone" not in reader.items


def test_a_reader_drops_exactly_the_items_no_list_names() -> None:
    """Random feeds (posts moving between lists, leaving and coming back, one post in both lists, items
    changing): after every update the reader holds the publisher's feed and no item more."""
    import random

    from molt_society.streams.feed_updates import FeedPublisher

    rng = random.Random(5)
    pub, reader = FeedPublisher(), FeedState()
    feed: dict[str, dict[str, list[FeedItem]]] = {}
    for tick in range(300):
        for s in rng.sample(["a", "b", "c", "d"], rng.randint(0, 3)):  # re-ranked submolts: new objects
            pids = [f"{s}{rng.randrange(10)}" for _ in range(rng.randint(0, 6))]  # a post is in one submolt
            item = {p: {"post_id": p, "score": rng.randrange(3)} for p in pids}
            feed[s] = {
                "new": [item[p] for p in dict.fromkeys(pids)],  # type: ignore[misc]
                "hot": [item[p] for p in dict.fromkeys(reversed(pids))],  # type: ignore[misc]
            }
        reader.apply(pub.update(dict(feed), tick, 0, tick))
        assert reader.view() == feed
        named = {it["post_id"] for lists in feed.values() for ranked in lists.values() for it in ranked}
        assert set(reader.items) == named
