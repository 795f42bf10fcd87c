"""The simulation clock: publishes ticks to every shard and, in simulated time, waits for the barrier.

Simulated time (``mode=sim``): tick ``t + 1`` is published only when the feed of tick ``t`` is complete on
every partition, i.e. when every shard's actions of tick ``t`` have been validated and folded into the
feeds. Agents therefore always act on the feed as of the previous tick, whatever the timing.

Real time (``mode=realtime``): after the genesis tick (a barrier, so every worker is up), a tick is
published every ``tick_seconds`` of wall-clock time and agents act on the newest feed they have, like
agents on their own schedule.

At the end a final tick makes every shard write an end-of-time watermark, which closes every window.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from datetime import datetime, timedelta

from aiokafka import AIOKafkaProducer

from agents.feed_cache import FeedCache
from schemas import control
from schemas.topics import Role, topic_name
from society.settings import Settings


class Clock:
    def __init__(self, settings: Settings, bootstrap: str, society: str, feeds: FeedCache) -> None:
        self.s = settings
        self.bootstrap = bootstrap
        self.society = society
        self.feeds = feeds
        self.topic = topic_name(society, Role.TICKS)
        self.origin = datetime.fromisoformat(settings.sim_start)
        self.tick = -1
        self.origin_us = control.to_us(self.origin)
        self.end_us = 0

    async def _publish(self, producer: AIOKafkaProducer, t: int, sim_time_us: int, final: bool) -> None:
        futures = []
        for shard in range(self.s.shards):
            tick: control.Tick = {
                "tick": t,
                "shard": shard,
                "sim_time_us": sim_time_us,
                "origin_us": self.origin_us,
                "final": final,
                "wall_time": time.time(),
            }
            futures.append(
                await producer.send(self.topic, control.dumps(tick), key=str(shard).encode(), partition=shard)
            )
        await asyncio.gather(*futures)

    async def run(
        self,
        *,
        ticks: int | None,
        duration: float | None,
        stop: asyncio.Event,
        on_tick: Callable[[int], None] = lambda t: None,
        start_tick: int = 0,
    ) -> int:
        """Run until tick ``ticks`` or for ``duration`` seconds (whichever first); return the next tick.

        ``start_tick`` > 0 continues a society whose history up to that tick was replayed (a fork).
        """
        producer = AIOKafkaProducer(bootstrap_servers=self.bootstrap, acks="all", linger_ms=0)
        await producer.start()
        began = time.monotonic()
        if self.s.mode == "realtime":
            self.origin_us = int(time.time() * 1_000_000)
        try:
            t = start_tick
            while not stop.is_set():
                if ticks is not None and t >= ticks:
                    break
                if duration is not None and t > start_tick and time.monotonic() - began >= duration:
                    break
                if self.s.mode == "sim":
                    sim_us = control.to_us(self.origin + timedelta(seconds=t * self.s.tick_seconds))
                    await self._publish(producer, t, sim_us, final=False)
                    while not stop.is_set():
                        try:
                            await self.feeds.wait_for(t, timeout=0.5)
                            break
                        except TimeoutError:
                            continue
                else:
                    await self._publish(producer, t, int(time.time() * 1_000_000), final=False)
                    if t == 0:  # genesis is a barrier in real time too: start once every worker is up
                        while not stop.is_set():
                            try:
                                await self.feeds.wait_for(0, timeout=0.5)
                                break
                            except TimeoutError:
                                continue
                    else:
                        await asyncio.sleep(self.s.tick_seconds)
                self.tick = t
                if t == start_tick:  # the duration counts from the first tick the stack has processed
                    began = time.monotonic()
                on_tick(t)
                t += 1
            if self.s.mode == "sim":
                end_us = control.to_us(self.origin + timedelta(seconds=t * self.s.tick_seconds))
            else:
                end_us = int(time.time() * 1_000_000)
            self.end_us = end_us
            await self._publish(producer, t, end_us, final=True)
            return t
        finally:
            await producer.stop()

    async def wait_closed(self, final_tick: int, timeout: float = 120.0) -> None:
        """Wait until every partition has processed the final watermark."""
        await self.feeds.wait_for(final_tick, timeout=timeout)
