"""A feed reader whose fetch never comes back is found and replaced within seconds (``FeedCache._watch``).

The broker here is real and keeps answering; what is made to fail is this reader's own fetching: its
consumer's ``getmany`` is replaced by one that never returns, as a fetch whose answer never came looks from
the inside (the stall seen under load: an agent worker waited 600 s for a feed the log already held). The
cache must notice within seconds while someone waits, say so, read on from where it was with a new
consumer, and take every record once.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

from aiokafka import AIOKafkaProducer

from molt_society.agents.feed_cache import FeedCache, FeedPassed
from molt_society.runtime import kafka
from molt_society.runtime.broker import ensure_topics
from molt_society.schemas import control
from molt_society.schemas.topics import Role, topic_name
from molt_society.streams.feed_updates import FeedPublisher, FeedUpdate

PARTITIONS = 2


def _item(pid: str, created: int) -> dict[str, Any]:
    return {
        "post_id": pid, "author": "a1", "submolt": "general", "title": pid, "created_us": created,
        "score": created, "comments": 0, "hot": float(created), "recent": [],
    }  # fmt: skip


def _updates(pubs: list[FeedPublisher], tick: int) -> list[FeedUpdate]:
    """Every partition's update of ``tick``: each feed gains one post per tick (the stream workers' own
    publisher builds them)."""
    out = []
    for q, pub in enumerate(pubs):
        posts = [_item(f"p{q}-{k}", k) for k in range(tick + 1)]
        feed = {"general": {"new": posts[::-1], "hot": posts[::-1]}}
        out.append(pub.update(feed, tick, q, tick * 1000))  # type: ignore[arg-type]
    return out


async def _send(producer: AIOKafkaProducer, topic: str, updates: list[FeedUpdate]) -> None:
    for upd in updates:
        await producer.send_and_wait(topic, control.dumps(upd), partition=upd["partition"])


async def _scenario(broker: str, society: str) -> tuple[FeedCache, float, set[str], int]:
    await ensure_topics(broker, society, partitions=PARTITIONS, shards=1)
    topic = topic_name(society, Role.FEEDS)
    pubs = [FeedPublisher() for _ in range(PARTITIONS)]
    producer = kafka.producer(broker, "control")
    await producer.start()
    cache = FeedCache(broker, society, PARTITIONS, feed_size=50, stall_s=1.0)
    try:
        for t in range(3):
            await _send(producer, topic, _updates(pubs, t))
        await cache.start()
        await cache.wait_for(2, timeout=30)
        assert cache._consumer is not None

        async def never(*_: Any, **__: Any) -> dict[Any, Any]:
            await asyncio.Event().wait()  # a fetch whose answer never comes
            return {}

        cache._consumer.getmany = never
        for t in range(3, 6):
            await _send(producer, topic, _updates(pubs, t))
        began = time.monotonic()
        await cache.wait_for(5, timeout=60)
        waited = time.monotonic() - began
        applied = cache._applied
        ids = {it["post_id"] for it in cache.view().lists("general")["new"]}
        return cache, waited, ids, applied
    finally:
        await cache.stop()
        await producer.stop()


def test_a_reader_whose_fetch_never_returns_is_replaced_and_reads_every_record_once(
    broker: str, society_name: str
) -> None:
    cache, waited, ids, applied = asyncio.run(_scenario(broker, society_name))
    assert cache.restarts == 1
    assert waited < 15, f"the stuck reader was replaced only after {waited:.1f} s"
    assert cache.complete_tick == 5
    # every update of ticks 0-5 applied once: a replayed one would count twice, a skipped one would leave
    # a post out of the merged feed
    assert applied == PARTITIONS * 6
    assert ids == {f"p{q}-{k}" for q in range(PARTITIONS) for k in range(6)}


async def _reread_scenario(broker: str, society: str) -> tuple[set[str], set[str], bool]:
    await ensure_topics(broker, society, partitions=PARTITIONS, shards=1)
    topic = topic_name(society, Role.FEEDS)
    pubs = [FeedPublisher() for _ in range(PARTITIONS)]
    producer = kafka.producer(broker, "control")
    await producer.start()
    cache = FeedCache(broker, society, PARTITIONS, feed_size=50, as_of_tick=True)
    try:
        for t in range(4):
            await _send(producer, topic, _updates(pubs, t))
        await cache.start()
        await cache.wait_for(3, timeout=30)
        later = {it["post_id"] for it in cache.view(3).lists("general")["new"]}
        try:
            cache.view(1)
            passed = False
        except FeedPassed:
            passed = True
        await cache.reread()
        await cache.wait_for(1, timeout=30)
        older = {it["post_id"] for it in cache.view(1).lists("general")["new"]}
        return later, older, passed
    finally:
        await cache.stop()
        await producer.stop()


def test_a_cache_read_again_shows_a_tick_it_had_passed(broker: str, society_name: str) -> None:
    """What an agent worker given back a passed tick does (``agents.worker._feed_as_of``)."""
    later, older, passed = asyncio.run(_reread_scenario(broker, society_name))
    assert passed
    assert later == {f"p{q}-{k}" for q in range(PARTITIONS) for k in range(4)}
    assert older == {f"p{q}-{k}" for q in range(PARTITIONS) for k in range(2)}
