"""``runtime.consume_loop``: the one consume loop of the agent workers, stream workers and sinks.

A stopping member is not held by a fetch that never returns (``consume_until``): aiokafka's ``getmany``
can wait for a group coordinator that died with the broker; a sink whose driver was SIGKILLed (its broker
stopped by the same kernel signal) then never exited. The loop is cancelled only while it waits in
``getmany``, never in a step. A start that never returns is abandoned on stop; a commit that is never
answered is given up; commits reach the broker in the order handed in, only for partitions still owned;
the loop hands its steps owned, contiguous records, pauses assigned partitions while the steps position
them and raises what a step failed with. The broker is replaced by recorders here; the real paths run in
every integration test (``tests/integration/test_faults.py`` kills each process and the broker).
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass
from typing import Any

import pytest
from aiokafka import TopicPartition
from aiokafka.errors import CommitFailedError, KafkaConnectionError

from molt_society.runtime import consume_loop


class Member:
    """A consume loop that flushes for ``flush_s`` when asked to stop, then waits in a fetch forever."""

    name = "test"

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
        await asyncio.wait_for(consume_loop.consume_until(member, stop), 30)
        return time.monotonic() - began

    return asyncio.run(go())


def test_a_fetch_that_never_returns_is_abandoned_after_the_grace(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(consume_loop, "STOP_GRACE_S", 0.3)
    took = _stop_after(Member(), 0.1)
    assert 0.35 <= took < 5


def test_a_flush_under_way_is_never_cancelled(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(consume_loop, "STOP_GRACE_S", 0.2)
    member = Member(flush_s=1.0)  # longer than the grace
    took = _stop_after(member, 0.1)
    assert member.flushed
    assert took >= 1.1


def test_a_loop_that_returns_by_itself_is_awaited_and_its_error_raised() -> None:
    class Failing:
        name = "test"
        fetching = False

        async def consume(self, stop: asyncio.Event) -> None:
            raise RuntimeError("ClickHouse is gone")

    with pytest.raises(RuntimeError, match="ClickHouse is gone"):
        _stop_after(Failing(), 5.0)


def test_a_commit_that_is_never_answered_is_given_up() -> None:
    """aiokafka's commit looks for a coordinator that died with the broker forever; the flush must end."""
    from molt_society.runtime.settings import Settings
    from molt_society.sinks import batching
    from molt_society.sinks.sink_stats import SinkStats

    tp = TopicPartition("society.s.events", 0)
    consumer = Broker({tp}, never=True)

    async def go() -> tuple[bool, float, SinkStats]:
        stats = SinkStats()
        commits = consume_loop.Commits(consumer, "sink", timeout_s=0.2)
        b = batching.Batcher(Settings(), stats, None, None, {}, commits.commit, asyncio.Event())  # type: ignore[arg-type]
        began = time.monotonic()
        ok = await asyncio.wait_for(b._commit_past(tp, 41), 10)
        assert commits.failed == 1
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
        started = await asyncio.wait_for(consume_loop.start_unless_stopped(consumer, stop), 30)
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


# ------------------------------------------------------------------ commits and the loop, on a recorder
@dataclass
class Rec:
    offset: int
    topic: str = "t"
    partition: int = 0


class Broker:
    """A consumer that records commits, pauses and seeks, and serves scripted fetches."""

    def __init__(self, owned: set[TopicPartition], never: bool = False) -> None:
        self.owned = owned
        self.never = never
        self.commits: list[dict[TopicPartition, int]] = []
        self.slow: dict[int, float] = {}  # n-th commit -> seconds it takes
        self.refuse: BaseException | None = None
        self.fetches: list[dict[TopicPartition, list[Rec]]] = []
        self.paused: set[TopicPartition] = set()
        self.seeks: list[tuple[TopicPartition, int]] = []
        self.listener: Any = None
        self.rebalance: dict[int, tuple[str, list[TopicPartition]]] = {}  # before the n-th fetch
        self.stopped = False
        self.fetched = 0

    def assignment(self) -> set[TopicPartition]:
        return set(self.owned)

    async def commit(self, offsets: dict[TopicPartition, int]) -> None:
        n = len(self.commits)
        self.commits.append({})
        if self.never:
            await asyncio.Event().wait()
        await asyncio.sleep(self.slow.get(n, 0.0))
        if self.refuse is not None:
            raise self.refuse
        self.commits[n] = dict(offsets)

    def subscribe(self, topics: list[str], listener: Any) -> None:
        self.listener = listener

    async def start(self) -> None:
        pass

    async def stop(self) -> None:
        self.stopped = True

    def pause(self, *tps: TopicPartition) -> None:
        self.paused.update(tps)

    def resume(self, *tps: TopicPartition) -> None:
        self.paused.difference_update(tps)

    def seek(self, tp: TopicPartition, offset: int) -> None:
        self.seeks.append((tp, offset))

    async def getmany(self, timeout_ms: int) -> dict[TopicPartition, list[Rec]]:
        n = self.fetched
        self.fetched += 1
        if n in self.rebalance:
            kind, tps = self.rebalance[n]
            if kind == "revoke":
                await self.listener.on_partitions_revoked(tps)
                self.owned.difference_update(tps)
            else:
                self.owned.update(tps)
                await self.listener.on_partitions_assigned(tps)
        if n < len(self.fetches):
            return self.fetches[n]
        await asyncio.sleep(timeout_ms / 1000)
        return {}


T0, T1, T2 = (TopicPartition("t", p) for p in range(3))


def test_commits_reach_the_broker_in_order_and_only_for_owned_partitions() -> None:
    broker = Broker({T0, T1})
    broker.slow = {0: 0.3}  # the first commit is slow: the second must not overtake it

    async def go() -> list[bool]:
        commits = consume_loop.Commits(broker, "test")
        first = asyncio.ensure_future(commits.commit({T0: 5}))
        await asyncio.sleep(0.01)
        second = asyncio.ensure_future(commits.commit({T0: 9, T2: 3}))  # T2 is not ours
        none = await commits.commit({T2: 4})  # nothing owned: no call at all
        return [await first, await second, none]

    assert asyncio.run(go()) == [True, True, False]
    assert broker.commits == [{T0: 5}, {T0: 9}]


@pytest.mark.parametrize(
    ("error", "refused", "failed"),
    [(CommitFailedError("rebalanced"), 1, 0), (KafkaConnectionError("gone"), 0, 1)],
)
def test_a_refused_or_failed_commit_is_counted_and_the_loop_goes_on(
    error: BaseException, refused: int, failed: int
) -> None:
    broker = Broker({T0})
    broker.refuse = error

    async def go() -> tuple[bool, int, int]:
        commits = consume_loop.Commits(broker, "test")
        ok = await commits.commit({T0: 1})
        return ok, commits.refused, commits.failed

    assert asyncio.run(go()) == (False, refused, failed)


class Steps:
    """Records what the loop hands it; fails on the n-th submit when told to."""

    def __init__(self, broker: Broker, fail_on: int | None = None) -> None:
        self.broker = broker
        self.fail_on = fail_on
        self.submitted: list[dict[TopicPartition, list[int]]] = []
        self.polls = 0
        self.revokes: list[list[TopicPartition]] = []
        self.assigns: list[tuple[list[TopicPartition], set[TopicPartition]]] = []  # and what was paused
        self.closed: list[bool] = []
        self.error: BaseException | None = None

    async def submit(self, batch: consume_loop.Batch) -> None:
        self.submitted.append({tp: [r.offset for r in recs] for tp, recs in batch.items()})
        if self.fail_on is not None and len(self.submitted) == self.fail_on:
            self.error = RuntimeError("a step failed")

    async def poll(self) -> None:
        self.polls += 1

    async def revoked(self, partitions: Any) -> None:
        self.revokes.append(sorted(partitions))

    async def assigned(self, partitions: Any) -> None:
        await asyncio.sleep(0.01)  # positioning takes a while: the partitions must stay paused
        self.assigns.append((sorted(partitions), set(self.broker.paused)))

    def failure(self) -> BaseException | None:
        return self.error

    async def close(self, failed: bool) -> None:
        self.closed.append(failed)


def _run_loop(broker: Broker, steps: Steps, fetches: int) -> BaseException | None:
    async def go() -> BaseException | None:
        stop = asyncio.Event()
        loop = consume_loop.ConsumeLoop(broker, "test", steps, poll_ms=10)
        loop.subscribe(["t"])
        assert await loop.start(stop)

        async def stop_after() -> None:
            while broker.fetched < fetches:
                await asyncio.sleep(0.01)
            stop.set()

        stopper = asyncio.ensure_future(stop_after())
        try:
            await asyncio.wait_for(loop.run(stop), 10)
        except RuntimeError as exc:
            return exc
        finally:
            stopper.cancel()
        return None

    return asyncio.run(go())


def test_the_loop_hands_its_steps_owned_contiguous_records_and_positions_assignments_paused() -> None:
    broker = Broker({T0})
    broker.fetches = [
        {T0: [Rec(0), Rec(1)], T2: [Rec(0, partition=2)]},  # T2 is not assigned: left out
        {T0: [Rec(2), Rec(4)]},  # offset 3 missing: the guard passes 2 and seeks back to 3
        {},  # T1 assigned before this fetch
        {T0: [Rec(3), Rec(4)], T1: [Rec(7, partition=1)]},
        {},  # T0 revoked before this fetch
    ]
    broker.rebalance = {2: ("assign", [T0, T1]), 4: ("revoke", [T0])}
    steps = Steps(broker)
    assert _run_loop(broker, steps, fetches=6) is None
    assert steps.submitted == [{T0: [0, 1]}, {T0: [2]}, {T0: [3, 4], T1: [7]}]
    assert broker.seeks == [(T0, 3)]
    assert steps.assigns == [([T0, T1], {T0, T1})]  # paused while the steps positioned them
    assert broker.paused == set()  # and resumed after
    assert steps.revokes == [[T0]]
    assert steps.polls >= 5  # after every fetch, empty or not
    assert steps.closed == [False]
    assert broker.stopped


def test_a_step_failure_ends_the_loop_with_it_and_still_closes() -> None:
    broker = Broker({T0})
    broker.fetches = [{T0: [Rec(0)]}, {T0: [Rec(1)]}, {T0: [Rec(2)]}]
    steps = Steps(broker, fail_on=2)
    error = _run_loop(broker, steps, fetches=100)
    assert isinstance(error, RuntimeError)
    assert str(error) == "a step failed"
    assert len(steps.submitted) == 2  # nothing handed in after the failure
    assert steps.closed == [True]
    assert broker.stopped
