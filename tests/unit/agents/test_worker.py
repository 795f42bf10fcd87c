"""``agents.worker.AgentWorker._act``: ticks are acted on in tick order across separate fetches.

On a cluster the partitions of the ticks topic have different leaders, so one worker's shards come in
separate fetches. In simulated time tick t of a shard waits for the complete feed of tick t - 1, which
needs the same worker's tick t - 1 of its other shard: acting on one fetch to its end before taking the
next waited forever (seen on 3 brokers). The broker, the feeds and the sends are replaced by recorders here;
the real path runs in ``tests/integration/test_kafka_cluster.py``.
"""

from __future__ import annotations

import asyncio
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from aiokafka import TopicPartition

from molt_society.agents.worker import AgentWorker
from molt_society.runtime.consume_loop import Commits
from molt_society.runtime.record_auth import RecordKeys
from molt_society.runtime.settings import Settings
from molt_society.schemas import control

BOUND_S = 10.0  # a deadlock fails the test instead of hanging it


TICKS_TOPIC = "society.s.ticks"
KEYS = RecordKeys(Path(tempfile.mkdtemp(prefix="worker-order-")))  # the state folder of the tests' worker


@dataclass
class Record:
    value: bytes
    offset: int
    partition: int = 0
    topic: str = TICKS_TOPIC
    key: bytes | None = None
    headers: list[tuple[str, bytes]] = field(default_factory=list)


def _tick(shard: int, tick: int, signed: bool = True) -> Record:
    body = {"tick": tick, "shard": shard, "sim_time_us": 0, "origin_us": 0, "final": False, "wall_time": 0.0}
    value = control.dumps(body)
    headers = KEYS.headers(TICKS_TOPIC, None, value) if signed else []
    return Record(value, tick, shard, headers=headers)


class Feeds:
    """The feed of tick t is complete once every shard has acted on tick t (what the stream workers'
    barrier gives when one worker holds every shard)."""

    def __init__(self, shards: set[int]) -> None:
        self.shards = shards
        self.acted: set[tuple[int, int]] = set()
        self.complete_tick = -1
        self.changed = asyncio.Event()

    def act(self, shard: int, tick: int) -> None:
        self.acted.add((shard, tick))
        while all((s, self.complete_tick + 1) in self.acted for s in self.shards):
            self.complete_tick += 1
        self.changed.set()

    async def wait_for(self, tick: int, timeout: float | None = None) -> None:
        async def until() -> None:
            while self.complete_tick < tick:
                self.changed.clear()
                await self.changed.wait()

        await asyncio.wait_for(until(), timeout)


class Consumer:
    def __init__(self, tps: list[TopicPartition]) -> None:
        self.tps = set(tps)
        self.committed: dict[TopicPartition, int] = {}
        self.resumed: list[TopicPartition] = []

    def assignment(self) -> set[TopicPartition]:
        return self.tps

    async def commit(self, offsets: dict[TopicPartition, int]) -> None:
        self.committed.update(offsets)

    def resume(self, *tps: TopicPartition) -> None:
        self.resumed.extend(tps)


def test_ticks_of_separate_fetches_are_acted_on_in_tick_order() -> None:
    settings = Settings(agents=20, shards=4, kafka_bootstrap="127.0.0.1:9", state_dir=KEYS.state_dir)
    worker = AgentWorker(settings, "127.0.0.1:9", "s")
    order: list[tuple[int, int]] = []
    feeds = Feeds({1, 3})

    async def decide(tick: control.Tick, feeds_: Any, stop: asyncio.Event) -> tuple[list[Any], int]:
        if tick["tick"] > 0:
            await feeds.wait_for(tick["tick"] - 1)  # as the real one: the previous tick's complete feed
        order.append((tick["shard"], tick["tick"]))
        return [], 0

    async def send(tick: control.Tick, *_: Any) -> list[Any]:
        feeds.act(tick["shard"], tick["tick"])
        return []

    worker._decide = decide  # type: ignore[method-assign]
    worker._send = send  # type: ignore[method-assign]
    tp1, tp3 = TopicPartition("ticks", 1), TopicPartition("ticks", 3)
    consumer = Consumer([tp1, tp3])

    async def go() -> None:
        work: asyncio.Queue[Any] = asyncio.Queue()
        stop = asyncio.Event()
        # shard 1's fetch first, with a forged tick (unsigned) that must not be acted on
        work.put_nowait({tp1: [_tick(1, 0), _tick(1, 1), _tick(1, 9, signed=False), _tick(1, 2)]})
        commits = Commits(consumer, "agents")
        acting = asyncio.create_task(
            worker._act(work, 4, stop, commits, consumer=consumer, producer=None, feeds=feeds)  # type: ignore[arg-type]
        )
        await asyncio.sleep(0.3)  # shard 1's tick 1 waits for a feed that needs shard 3's tick 0
        work.put_nowait({tp3: [_tick(3, 0), _tick(3, 1), _tick(3, 2)]})  # shard 3's fetch, later
        for _ in range(int(BOUND_S / 0.05)):
            if len(consumer.committed) == 2:
                break
            await asyncio.sleep(0.05)
        stop.set()
        acting.cancel()
        await asyncio.gather(acting, return_exceptions=True)

    asyncio.run(go())
    assert order == [(1, 0), (3, 0), (1, 1), (3, 1), (1, 2), (3, 2)]
    assert consumer.committed == {tp1: 3, tp3: 3}  # both fetches committed after their last tick
    assert set(consumer.resumed) == {tp1, tp3}
