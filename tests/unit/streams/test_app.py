"""The aggregate agent's stall watch (``streams.app.Aggregator.check_stall``): on one partial, or idle with
partials on the topic it has not taken, for ``AGGREGATE_STALL_S``, the worker exits with ``STALL_EXIT``;
taking partials, or idle with nothing left on the topic, it does not. The topic's end offset is given by a
stand-in for the reader the watch asks it of (``runtime.lag.LagReader``)."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace
from typing import Any

import pytest
from aiokafka import TopicPartition
from faust.types import TP

from molt_society.streams import app as app_mod
from molt_society.streams.app import AGGREGATE_STALL_S, STALL_EXIT, Aggregator


class Exited(Exception):
    pass


def _aggregator(
    highwater: int | list[int | None] | None,
    monkeypatch: pytest.MonkeyPatch,
    clock: list[float],
    committed: int | None = None,
    owned: bool = True,
) -> Aggregator:
    agg = Aggregator.__new__(Aggregator)

    class Ends:  # stands in for runtime.lag.LagReader: the watch asks it the topic's end offset only
        def __init__(self, *_a: Any, **_k: Any) -> None:
            pass

        async def highwaters(self, topics: list[str]) -> dict[Any, int]:
            end = highwater[0] if isinstance(highwater, list) else highwater  # a list: the test moves it
            if end is None:
                raise TimeoutError("the broker did not answer")
            return {TopicPartition(t, 0): end for t in topics}

        async def committed(self, group: str, tps: list[TopicPartition]) -> dict[TopicPartition, int | None]:
            assert group == "society.s.aggregate"
            return {tp: committed for tp in tps}

        async def close(self) -> None:
            pass

    monkeypatch.setattr(app_mod, "LagReader", Ends)
    agg.bootstrap, agg.society, agg.ends, agg.group = "127.0.0.1:1", "s", None, "society.s.aggregate"
    agg.partials_tp = TP("society.s.partials", 0)
    agg.busy_since, agg.taken, agg.lag_since, agg.unanswered_at = None, -1, None, None
    # Faust's table recovery, as the watch reads it: not recovering unless a test says so
    recovery = SimpleNamespace(in_recovery=False, remaining=0)
    recovery.active_remaining_total = lambda: recovery.remaining
    agg.app = SimpleNamespace(
        tables=SimpleNamespace(recovery=recovery),
        rebalancing=False,
        # the changelogs are always assigned; the partials partition when this worker holds it
        consumer=SimpleNamespace(
            assignment=lambda: (
                {TP("society.s.aggregate-pending-changelog", 0)}
                | ({TP("society.s.partials", 0)} if owned else set())
            )
        ),
    )

    def stop_worker() -> None:
        raise Exited(STALL_EXIT)

    monkeypatch.setattr(agg, "stop_worker", stop_worker)
    # the module's own clock only: the event loop keeps the real one
    monkeypatch.setattr(app_mod, "time", SimpleNamespace(monotonic=lambda: clock[0]))
    return agg


def _check(agg: Aggregator) -> None:
    async def run() -> None:
        await agg.check_stall()

    asyncio.run(run())


def test_idle_with_partials_fetched_and_not_taken_exits_after_the_limit(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    clock = [1000.0]
    agg = _aggregator(56, monkeypatch, clock)
    agg.taken = 44
    _check(agg)  # the lag starts now
    clock[0] += AGGREGATE_STALL_S - 1
    _check(agg)
    clock[0] += 2
    with pytest.raises(Exited) as e:
        _check(agg)
    assert e.value.args == (STALL_EXIT,)


def test_taking_partials_resets_the_lag(monkeypatch: pytest.MonkeyPatch) -> None:
    clock = [1000.0]
    agg = _aggregator(56, monkeypatch, clock)
    agg.taken = 44
    _check(agg)
    clock[0] += AGGREGATE_STALL_S - 1
    agg.taken = 55  # it took the rest: nothing fetched is left
    _check(agg)
    clock[0] += AGGREGATE_STALL_S
    _check(agg)  # no exit


def test_idle_with_nothing_left_or_no_answer_is_no_stall(monkeypatch: pytest.MonkeyPatch) -> None:
    for hw in (None, 45):
        clock = [1000.0]
        agg = _aggregator(hw, monkeypatch, clock)
        agg.taken = 44
        for _ in range(3):
            _check(agg)
            clock[0] += AGGREGATE_STALL_S


def test_on_one_partial_for_the_limit_exits(monkeypatch: pytest.MonkeyPatch) -> None:
    clock = [1000.0]
    agg = _aggregator(45, monkeypatch, clock)
    agg.taken, agg.busy_since = 44, clock[0]
    clock[0] += AGGREGATE_STALL_S - 1
    _check(agg)
    clock[0] += 2
    with pytest.raises(Exited):
        _check(agg)


def test_a_restarted_worker_idle_with_all_committed_is_no_stall(monkeypatch: pytest.MonkeyPatch) -> None:
    """A restarted worker has taken nothing (``taken`` -1); its group committed all 56 partials: nothing
    is left for it, however long the next window takes."""
    clock = [1000.0]
    agg = _aggregator(56, monkeypatch, clock, committed=56)
    for _ in range(3):
        _check(agg)
        clock[0] += AGGREGATE_STALL_S


def test_a_restarted_worker_that_takes_nothing_committed_after_exits(monkeypatch: pytest.MonkeyPatch) -> None:
    clock = [1000.0]
    agg = _aggregator(56, monkeypatch, clock, committed=50)  # partials 50-55 wait and are not taken
    _check(agg)
    clock[0] += AGGREGATE_STALL_S + 1
    with pytest.raises(Exited):
        _check(agg)


def test_a_worker_without_the_partials_partition_is_no_stall(monkeypatch: pytest.MonkeyPatch) -> None:
    """With two stream workers one holds the partials partition; the other sees partials it has not taken
    (its peer's lag) and must not stop as stalled. The same lag where it holds the partition exits."""
    clock = [1000.0]
    agg = _aggregator(56, monkeypatch, clock, committed=40, owned=False)
    for _ in range(3):
        _check(agg)
        clock[0] += AGGREGATE_STALL_S
    owner = _aggregator(56, monkeypatch, clock, committed=40)
    _check(owner)
    clock[0] += AGGREGATE_STALL_S + 1
    with pytest.raises(Exited):
        _check(owner)


def test_time_the_broker_did_not_answer_is_not_counted_as_a_stall(monkeypatch: pytest.MonkeyPatch) -> None:
    """On one partial while the broker is stopped for 30 s: the watch counts the limit from the broker's
    last unanswered check, so the worker exits only a full limit after the broker answers again."""
    clock = [1000.0]
    end: list[int | None] = [45]
    agg = _aggregator(end, monkeypatch, clock)
    agg.taken, agg.busy_since = 44, clock[0]
    _check(agg)
    end[0] = None  # the broker stops answering
    for _ in range(6):
        clock[0] += 5
        _check(agg)
    end[0] = 45  # and answers again 30 s later
    clock[0] += AGGREGATE_STALL_S - 1  # 89 s on the partial, 59 since the broker's last silence
    _check(agg)
    clock[0] += 2
    with pytest.raises(Exited):
        _check(agg)


def test_idle_and_lagging_counts_from_the_brokers_answer(monkeypatch: pytest.MonkeyPatch) -> None:
    clock = [1000.0]
    end: list[int | None] = [56]
    agg = _aggregator(end, monkeypatch, clock)
    agg.taken = 44
    _check(agg)  # the lag starts now
    clock[0] += 20
    end[0] = None
    _check(agg)  # no answer at 1020: the lag is forgotten
    end[0] = 56
    clock[0] += 5
    _check(agg)  # the broker answers at 1025: the lag starts again
    clock[0] += AGGREGATE_STALL_S - 1
    _check(agg)
    clock[0] += 2
    with pytest.raises(Exited):
        _check(agg)
