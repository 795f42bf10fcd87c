"""A stopping sink is not held by a fetch that never returns (``sinks.consumer._consume_until``).

aiokafka's ``getmany`` can wait for a group coordinator that died with the broker; a sink whose driver was
SIGKILLed (its broker stopped by the same kernel signal) then never exited. The loop is cancelled only
while it waits in ``getmany``, never in a flush.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest

from molt_society.sinks import consumer as sink_consumer


class Member:
    """A consume loop that flushes for ``flush_s`` when asked to stop, then waits in a fetch forever."""

    def __init__(self, flush_s: float = 0.0) -> None:
        self.fetching = False
        self.flush_s = flush_s
        self.flushed = False

    async def consume(self, stop: asyncio.Event) -> None:
        await stop.wait()
        if self.flush_s:
            await asyncio.sleep(self.flush_s)  # a flush: never cancelled
            self.flushed = True
        self.fetching = True
        await asyncio.Event().wait()  # the fetch that never returns


def _stop_after(member: Any, delay: float) -> float:
    async def go() -> float:
        stop = asyncio.Event()
        asyncio.get_running_loop().call_later(delay, stop.set)
        began = time.monotonic()
        await asyncio.wait_for(sink_consumer._consume_until(member, stop), 30)
        return time.monotonic() - began

    return asyncio.run(go())


def test_a_fetch_that_never_returns_is_abandoned_after_the_grace(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sink_consumer, "STOP_GRACE_S", 0.3)
    took = _stop_after(Member(), 0.1)
    assert 0.35 <= took < 5


def test_a_flush_under_way_is_never_cancelled(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sink_consumer, "STOP_GRACE_S", 0.2)
    member = Member(flush_s=1.0)  # longer than the grace
    took = _stop_after(member, 0.1)
    assert member.flushed
    assert took >= 1.1


def test_a_loop_that_returns_by_itself_is_awaited_and_its_error_raised() -> None:
    class Failing:
        fetching = False

        async def consume(self, stop: asyncio.Event) -> None:
            raise RuntimeError("ClickHouse is gone")

    with pytest.raises(RuntimeError, match="ClickHouse is gone"):
        _stop_after(Failing(), 5.0)


def test_a_commit_that_is_never_answered_is_given_up(monkeypatch: pytest.MonkeyPatch) -> None:
    """aiokafka's commit looks for a coordinator that died with the broker forever; the flush must end."""
    from aiokafka import TopicPartition

    from molt_society.runtime.settings import Settings
    from molt_society.sinks import batching
    from molt_society.sinks.sink_stats import SinkStats

    monkeypatch.setattr(batching, "COMMIT_TIMEOUT_S", 0.2)

    async def never(offsets: dict[Any, int]) -> None:
        await asyncio.Event().wait()

    async def go() -> tuple[bool, float, SinkStats]:
        stats = SinkStats()
        b = batching.Batcher(Settings(), stats, None, None, {}, never, asyncio.Event())  # type: ignore[arg-type]
        began = time.monotonic()
        ok = await asyncio.wait_for(b._commit_past(TopicPartition("society.s.events", 0), 41), 10)
        return ok, time.monotonic() - began, stats

    ok, took, stats = asyncio.run(go())
    assert ok is False
    assert 0.2 <= took < 5
    assert stats.commit_errors == 1
    assert "society.s.events:0" not in stats.committed


class Joining:
    """A consumer whose ``start`` never returns (aiokafka retrying a broker that is gone), or returns."""

    def __init__(self, forever: bool) -> None:
        self.forever = forever
        self.cancelled = False

    async def start(self) -> None:
        if not self.forever:
            return
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            self.cancelled = True
            raise


def _start(consumer: Joining, stop_after: float | None) -> tuple[bool, float]:
    async def go() -> tuple[bool, float]:
        stop = asyncio.Event()
        if stop_after is not None:
            asyncio.get_running_loop().call_later(stop_after, stop.set)
        began = time.monotonic()
        started = await asyncio.wait_for(sink_consumer._start_unless_stopped(consumer, stop), 30)
        return started, time.monotonic() - began

    return asyncio.run(go())


def test_a_stop_while_joining_abandons_the_start() -> None:
    """The SIGTERM of a killed driver's kernel reaches a sink whose consumer still joins a broker that died
    with the driver: the sink stops at once instead of retrying for ever."""
    consumer = Joining(forever=True)
    started, took = _start(consumer, 0.1)
    assert not started
    assert consumer.cancelled
    assert took < 5


def test_a_start_that_answers_is_a_start() -> None:
    started, took = _start(Joining(forever=False), None)
    assert started
    assert took < 5
