"""The simulation clock: publishes ticks to every shard and, in simulated time, waits for the barrier.

Simulated time (``mode=sim``): tick ``t + 1`` is published only when the feed of tick ``t`` is complete on
every partition, i.e. when every shard's actions of tick ``t`` have been validated and folded into the
feeds. Agents therefore always act on the feed as of the previous tick, whatever the timing.

Real time (``mode=realtime``): after the genesis tick (a barrier, so every worker is up), a tick is
published every ``tick_seconds`` of wall-clock time and agents act on the newest feed they have, like
agents on their own schedule.

At the end a final tick makes every shard write an end-of-time watermark, which closes every window.

A barrier that does not complete is never waited on silently: after ``barrier_warn_seconds`` the clock
exposes what it waits for (``Clock.waiting``: which partitions have not published the feed of the tick, and
their newest tick) and logs it; after ``barrier_timeout_seconds`` it raises ``BarrierTimeout`` naming them.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta

from aiokafka import AIOKafkaProducer

from molt_society.agents.feed_cache import FeedCache
from molt_society.runtime import kafka
from molt_society.runtime.logs import get_logger
from molt_society.runtime.record_auth import RecordKeys
from molt_society.runtime.settings import Settings
from molt_society.schemas import control
from molt_society.schemas.topics import Role, topic_name

log = get_logger(__name__)


@dataclass(frozen=True)
class BarrierWait:
    """A barrier that has waited longer than ``barrier_warn_seconds``: for which tick, how long, and the
    partitions that have not published its feed, with the newest tick each has published (None: none)."""

    tick: int
    seconds: float
    missing: dict[int, int | None]

    def describe(self) -> str:
        if not self.missing:
            return f"tick {self.tick} has waited {self.seconds:.0f} s for its feeds"
        parts = ", ".join(
            f"{q} (newest feed: {'none yet' if t is None else f'tick {t}'})"
            for q, t in sorted(self.missing.items())
        )
        return (
            f"tick {self.tick} has waited {self.seconds:.0f} s for the feed of partition"
            f"{'s' if len(self.missing) > 1 else ''} {parts}"
        )


class BarrierTimeout(TimeoutError):
    """The feed of a tick was not complete within ``barrier_timeout_seconds``."""

    def __init__(self, wait: BarrierWait) -> None:
        self.wait = wait
        super().__init__(
            f"the barrier of tick {wait.tick} timed out after {wait.seconds:.0f} s: {wait.describe()}. "
            "The stream worker owning those partitions, or an agent worker of a shard, did not deliver "
            "its part of the tick"
        )


class Clock:
    def __init__(
        self,
        settings: Settings,
        bootstrap: str,
        society: str,
        feeds: FeedCache,
        on_wait: Callable[[BarrierWait], None] | None = None,
    ) -> None:
        """``on_wait`` is told once per barrier that waits beyond ``barrier_warn_seconds`` (default: a
        warning in the log)."""
        self.s = settings
        self.bootstrap = bootstrap
        self.society = society
        self.feeds = feeds
        self.topic = topic_name(society, Role.TICKS)
        self.origin = datetime.fromisoformat(settings.sim_start)
        self.tick = -1
        self.origin_us = control.to_us(self.origin)
        self.end_us = 0
        self.waiting: BarrierWait | None = None  # set while a barrier has waited beyond the warning bound
        self.on_wait = on_wait or (lambda w: log.warning("clock.barrier_waiting", message=w.describe()))

    async def barrier(
        self,
        tick: int,
        stop: asyncio.Event | None = None,
        timeout: float | None = None,
        warn_after: float | None = None,
    ) -> bool:
        """Wait until every partition has published the feed of ``tick``; False if ``stop`` was set first.

        After ``warn_after`` seconds (default ``barrier_warn_seconds``) ``waiting`` says what is missing;
        raises ``BarrierTimeout`` after ``timeout`` seconds (default ``barrier_timeout_seconds``)."""
        bound = self.s.barrier_timeout_seconds if timeout is None else timeout
        warn = self.s.barrier_warn_seconds if warn_after is None else warn_after
        began = time.monotonic()
        warned = False
        try:
            while stop is None or not stop.is_set():
                try:
                    await self.feeds.wait_for(tick, timeout=0.5)
                    if warned:
                        log.info(
                            "clock.barrier_resumed", tick=tick, waited_s=round(time.monotonic() - began, 1)
                        )
                    return True
                except TimeoutError:
                    pass
                waited = time.monotonic() - began
                if waited >= warn or waited >= bound:
                    self.waiting = BarrierWait(tick, waited, self.feeds.missing(tick))
                    if not warned:
                        warned = True
                        self.on_wait(self.waiting)
                if waited >= bound:
                    assert self.waiting is not None
                    raise BarrierTimeout(self.waiting)
            return False
        finally:
            self.waiting = None

    def _warn_after(self, tick: int, start_tick: int) -> float:
        """The first tick also waits for the workers to start (a Faust worker takes 10-20 s here): it is
        said only after six times the usual bound."""
        return self.s.barrier_warn_seconds * (6 if tick == start_tick else 1)

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
        producer = kafka.producer(self.bootstrap, "control", keys=RecordKeys(self.s.state_dir))
        await producer.start()
        began = time.monotonic()
        if self.s.mode == "realtime":
            self.origin_us = int(time.time() * 1_000_000)
        try:
            t = start_tick
            lookahead = self.s.tick_lookahead
            while not stop.is_set():
                if ticks is not None and t >= ticks:
                    break
                if duration is not None and self.tick >= start_tick and time.monotonic() - began >= duration:
                    break
                if self.s.mode == "sim":
                    # pipelined: tick t goes out once the feed of t - lookahead is complete, so the next
                    # tick is already waiting when the agents' feed arrives (they wait for t - 1 themselves)
                    if t - lookahead >= start_tick and not await self._completed(
                        t - lookahead, start_tick, stop, on_tick
                    ):
                        break
                    if self.tick == start_tick:  # the duration counts from the first tick processed
                        began = time.monotonic()
                    sim_us = control.to_us(self.origin + timedelta(seconds=t * self.s.tick_seconds))
                    await self._publish(producer, t, sim_us, final=False)
                else:
                    await self._publish(producer, t, int(time.time() * 1_000_000), final=False)
                    if t == 0:  # genesis is a barrier in real time too: start once every worker is up
                        await self.barrier(0, stop, warn_after=self._warn_after(t, start_tick))
                    else:
                        await asyncio.sleep(self.s.tick_seconds)
                    self.tick = t
                    if t == start_tick:
                        began = time.monotonic()
                    on_tick(t)
                t += 1
            if self.s.mode == "sim":  # the ticks still in flight
                for u in range(max(start_tick, self.tick + 1), t):
                    if not await self._completed(u, start_tick, stop, on_tick):
                        break
            if self.s.mode == "sim":
                end_us = control.to_us(self.origin + timedelta(seconds=t * self.s.tick_seconds))
            else:
                end_us = int(time.time() * 1_000_000)
            self.end_us = end_us
            await self._publish(producer, t, end_us, final=True)
            return t
        finally:
            await producer.stop()

    async def _completed(
        self, tick: int, start_tick: int, stop: asyncio.Event, on_tick: Callable[[int], None]
    ) -> bool:
        """Wait for the feed of ``tick`` (False: stopped first); then it is the newest tick done."""
        if not await self.barrier(tick, stop, warn_after=self._warn_after(tick, start_tick)):
            return False
        self.tick = tick
        on_tick(tick)
        return True

    async def wait_closed(
        self, final_tick: int, timeout: float | None = None, stop: asyncio.Event | None = None
    ) -> bool:
        """Wait until every partition has processed the final watermark (False if ``stop`` was set first).

        Raises ``BarrierTimeout`` after ``timeout`` seconds (default ``barrier_timeout_seconds``)."""
        return await self.barrier(final_tick, stop, timeout)
