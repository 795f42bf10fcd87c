"""Feeds read from the feeds topic, merged per tick, with a wait for completeness.

The stream workers publish, per events partition and tick, what changed in that partition's top posts
(``streams.feed_updates``); applying a partition's records in order gives its feed. A tick's feed is
complete when every partition has published it; the merge of the per-partition top lists is exact
(``algorithms.feeds.merge_feeds``). Agent workers and the clock read all partitions from the beginning,
without a group.

A reader that stops receiving while a tick is waited for is found and replaced (``_watch``): when nothing
has arrived for ``stall_s`` seconds while someone waits, the feeds topic's high watermarks are read on a
connection of their own (``runtime.lag.LagReader``); a partition whose log goes past what this reader
received, with nothing received between two such checks, means its fetch is not coming back (a request
the broker never answered, a lost wake-up). The reader is then logged as ``feeds.reader_stuck`` and
replaced by a new consumer from the offsets it had reached, so the same records follow, once each.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections import deque

from aiokafka import AIOKafkaConsumer, TopicPartition

from molt_society.agents.brain import FeedView
from molt_society.algorithms.feeds import merge_feeds
from molt_society.runtime import kafka
from molt_society.runtime.contiguous import Contiguous
from molt_society.runtime.lag import LagReader
from molt_society.runtime.logs import get_logger
from molt_society.runtime.record_auth import RecordKeys
from molt_society.runtime.task_cancel import cancel_and_wait
from molt_society.schemas import control
from molt_society.schemas.topics import Role, topic_name
from molt_society.streams.feed_updates import FeedState, FeedUpdate

log = get_logger(__name__)

STALL_S = 3.0
"""A waiter waiting this long with no feed record received has the reader checked (``_watch``)."""
CHECK_EVERY_S = 1.0


class FeedPassed(RuntimeError):
    """``FeedCache.view`` of a tick older than one it already showed (updates cannot be taken back)."""


class FeedCache:
    """Latest feed snapshots per partition, and the newest tick every partition has published."""

    def __init__(
        self,
        bootstrap: str,
        society: str,
        partitions: int,
        feed_size: int,
        fetch_wait_ms: int = 10,
        *,
        as_of_tick: bool = False,
        stall_s: float = STALL_S,
        keys: RecordKeys | None = None,
    ) -> None:
        """``as_of_tick``: hold back every update of a tick later than the newest one ``view(tick)`` asked
        for, so that the view is the feed as of that tick even when the log already holds later ticks (an
        agent worker restarted in the middle of a tick redoes it on the same feed as the first time)."""
        self.bootstrap = bootstrap
        self.society = society
        self.keys = keys  # with keys, records the stream workers did not sign are skipped (logged)
        self.fetch_wait_ms = fetch_wait_ms
        self.stall_s = stall_s
        self.topic = topic_name(society, Role.FEEDS)
        self.partitions = partitions
        self.feed_size = feed_size
        self.states: dict[int, FeedState] = {}  # per partition, the feed its records describe
        self.ticks: dict[int, int] = {}  # per partition, the newest tick it published
        self._applied = 0  # records applied: the merged view is recomputed when this moves
        self._pending: dict[int, deque[FeedUpdate]] = {}  # per partition, updates read, not yet applied
        self._horizon: int | None = -1 if as_of_tick else None  # apply updates up to this tick (None: all)
        self.complete_tick = -1
        self._changed = asyncio.Condition()
        self._task: asyncio.Task[None] | None = None
        self._consumer: AIOKafkaConsumer | None = None
        self._gaps = Contiguous(None, "feeds")  # given its consumer in _open()
        self._view: FeedView | None = None
        self._view_key = (-1, -1)
        self._failure: BaseException | None = None
        self._next: dict[int, int] = {}  # per partition, the offset after the last record received
        self._received_at = time.monotonic()
        self._wanted = -1  # the newest tick a waiter asked for
        self._watcher: asyncio.Task[None] | None = None
        self.restarts = 0

    async def start(self) -> None:
        await self._open()
        self._watcher = asyncio.create_task(self._watch(), name="feeds.watch")

    async def _open(self) -> None:
        """A consumer of every partition from where this cache is (the beginning at first), and its task."""
        # "reader" resets to the earliest record when trimmed past its position (society.trim): the newest
        # feed records stay
        self._consumer = kafka.consumer(self.bootstrap, "reader", fetch_max_wait_ms=self.fetch_wait_ms)
        await self._consumer.start()
        self._gaps = Contiguous(self._consumer, "feeds")  # continues from each partition's first record
        tps = [TopicPartition(self.topic, q) for q in range(self.partitions)]
        self._consumer.assign(tps)
        fresh = [tp for tp in tps if tp.partition not in self._next]
        if fresh:
            await self._consumer.seek_to_beginning(*fresh)
        for tp in tps:
            if tp.partition in self._next:
                self._consumer.seek(tp, self._next[tp.partition])
        self._received_at = time.monotonic()
        self._task = asyncio.create_task(self._run())

    async def reread(self) -> None:
        """Forget everything read and read the topic again from its start: the cache a restarted worker
        starts with (after ``FeedPassed``). Waiters see the complete tick start again from nothing."""
        await self._close(5.0)
        self.states.clear()
        self.ticks.clear()
        self._pending.clear()
        self._next.clear()
        self._applied = 0
        if self._horizon is not None:
            self._horizon = -1
        self.complete_tick = -1
        self._view = None
        self._view_key = (-1, -1)
        self._failure = None
        await self._open()

    async def stop(self, timeout: float = 10.0) -> None:
        """Stop reading; bounded, since a consumer of a broker that is gone can take long to close."""
        await cancel_and_wait(self._watcher)
        await self._close(timeout)

    async def _close(self, timeout: float) -> None:
        await cancel_and_wait(self._task)
        if self._consumer:
            try:
                await asyncio.wait_for(self._consumer.stop(), timeout)
            except asyncio.CancelledError:
                # aiokafka's fetcher awaits the fetch requests it cancels when it closes, so its stop() can
                # raise CancelledError with no one cancelling us; a real cancellation goes on
                task = asyncio.current_task()
                if task is not None and task.cancelling():
                    raise
            except TimeoutError:
                pass

    async def _watch(self) -> None:
        """Replace the reader when it stopped receiving while its partitions have more (module docstring)."""
        lag: LagReader | None = None
        strikes = 0
        seen = -1.0  # _received_at at the previous check
        try:
            while True:
                await asyncio.sleep(CHECK_EVERY_S)
                quiet = time.monotonic() - self._received_at
                if self._wanted <= self.complete_tick or quiet < self.stall_s or self._failure is not None:
                    strikes = 0
                    continue
                if lag is None:
                    lag = LagReader(self.bootstrap, self.society, timeout=2.0, client_id="feeds-watch")
                try:
                    hws = await lag.highwaters([self.topic], partial=True)
                except Exception as exc:  # the broker does not answer anyone: nothing to replace
                    log.info("feeds.watch_unanswered", topic=self.topic, error=repr(exc))
                    strikes = 0
                    continue
                behind = {
                    tp.partition: (self._next.get(tp.partition, 0), hw)
                    for tp, hw in hws.items()
                    if hw > self._next.get(tp.partition, 0)
                }
                strikes = strikes + 1 if behind and self._received_at == seen else int(bool(behind))
                seen = self._received_at
                if strikes < 2:
                    continue
                log.warning(
                    "feeds.reader_stuck",
                    topic=self.topic,
                    waiting_for_tick=self._wanted,
                    complete_tick=self.complete_tick,
                    quiet_s=round(quiet, 1),
                    behind={q: {"received_to": n, "log_end": hw} for q, (n, hw) in sorted(behind.items())},
                )
                await self._close(5.0)
                await self._open()
                self.restarts += 1
                strikes = 0
                log.warning("feeds.reader_replaced", topic=self.topic, restarts=self.restarts)
        finally:
            if lag is not None:
                with contextlib.suppress(Exception):
                    await lag.close()

    async def _run(self) -> None:
        try:
            await self._consume()
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # a waiter must hear of it rather than wait for a tick that never comes
            async with self._changed:
                self._failure = exc
                self._changed.notify_all()
            raise

    async def _consume(self) -> None:
        assert self._consumer is not None
        while True:
            batch = self._gaps.fetched(await self._consumer.getmany(timeout_ms=200))
            if not batch:
                continue
            self._received_at = time.monotonic()
            for tp, records in batch.items():
                for rec in records:
                    forged = self.keys.problem(rec) if self.keys is not None else None
                    if forged is not None:  # a forged feed could pass the barrier or feed the agents
                        log.warning("feeds.forged", partition=rec.partition, offset=rec.offset, reason=forged)
                        continue
                    self.receive(control.loads(rec.value))
                self._next[tp.partition] = records[-1].offset + 1
            if len(self.ticks) == self.partitions:
                tick = min(self.ticks.values())
                if tick > self.complete_tick:
                    async with self._changed:
                        self.complete_tick = tick
                        self._changed.notify_all()

    async def wait_for(self, tick: int, timeout: float | None = None) -> None:
        """Wait until every partition has published the feed of ``tick`` (or a later one).

        Raises TimeoutError after ``timeout`` seconds, RuntimeError if reading the feeds topic failed."""
        self._wanted = max(self._wanted, tick)
        async with self._changed:
            await asyncio.wait_for(
                self._changed.wait_for(lambda: self.complete_tick >= tick or self._failure is not None),
                timeout,
            )
        if self.complete_tick < tick and self._failure is not None:
            raise RuntimeError(f"reading {self.topic} failed: {self._failure!r}") from self._failure

    def newest_ticks(self) -> dict[int, int | None]:
        """Per partition, the newest tick whose feed it has published (None: none yet)."""
        return {q: self.ticks.get(q) for q in range(self.partitions)}

    def missing(self, tick: int) -> dict[int, int | None]:
        """The partitions that have not published the feed of ``tick`` yet, with their newest tick."""
        return {q: t for q, t in self.newest_ticks().items() if t is None or t < tick}

    def receive(self, upd: FeedUpdate) -> None:
        """Take one record of the feeds topic (applied now or, holding back later ticks, when viewed)."""
        q = upd["partition"]
        self._pending.setdefault(q, deque()).append(upd)
        self.ticks[q] = max(upd["tick"], self.ticks.get(q, upd["tick"]))
        if self._horizon is None:
            self._apply_up_to(None)

    def _apply_up_to(self, tick: int | None) -> None:
        """Apply the pending updates of ticks up to ``tick`` (all when None), in each partition's order."""
        for q, queue in self._pending.items():
            while queue and (tick is None or queue[0]["tick"] <= tick):
                upd = queue.popleft()
                if q not in self.states:
                    if not upd["full"]:
                        continue  # a reader starting mid-log (a trimmed topic) waits for a full update
                    self.states[q] = FeedState()
                self.states[q].apply(upd)
                self._applied += 1

    def view(self, tick: int | None = None) -> FeedView:
        """The merged feed as of the end of ``tick`` (of every record read so far when None).

        In simulated time an agent worker waits for tick ``t - 1`` and asks for its view. Without
        ``as_of_tick`` the view holds whatever has been read; with it, later ticks' updates stay pending,
        so a tick redone after a restart sees the feed it saw the first time. Updates cannot be taken
        back: asked for a tick older than one it already showed, it raises ``FeedPassed`` instead of
        showing a later feed (the agent worker then reads the topic again: ``reread``).
        """
        if tick is not None and self._horizon is not None:
            if tick < self._horizon:
                raise FeedPassed(
                    f"the feed as of tick {tick} is gone from this cache: it has applied tick "
                    f"{self._horizon}'s (a rebalance gave back a tick this worker had passed); only a fresh "
                    "cache, read from the topic again, shows it"
                )
            self._horizon = tick
        self._apply_up_to(self._horizon if tick is not None else None)
        shown = self.complete_tick if tick is None else min(tick, self.complete_tick)
        if self._view is None or self._view_key != (self._applied, shown):
            parts = [self.states[q].view() for q in sorted(self.states)]
            self._view = FeedView(shown, merge_feeds(parts, self.feed_size))
            self._view_key = (self._applied, shown)
        return self._view
