"""``streams.window_order``: the next window in order, holes, and when reading back can stop."""

from __future__ import annotations

from collections.abc import Callable

from molt_society.streams.window_order import ReadBack, earliest_window, next_window

W = 600


def _has(pending: dict[int, set[int]]) -> Callable[[int, int], bool]:
    return lambda start, q: q in pending.get(start, set())


def test_the_earliest_window_is_read_from_the_table_keys() -> None:
    assert earliest_window(["1200:0", "600:1", "1200:3"]) == 600
    assert earliest_window([]) is None


def test_the_first_window_is_the_earliest_pending() -> None:
    pending = {1200: {0, 1}, 600: {1}}
    nxt = next_window(None, W, 2, _has(pending), earliest=600, recent=1200)
    assert nxt is not None
    assert (nxt.start_us, nxt.missing, nxt.later_complete) == (600, frozenset({0}), 1200)
    assert nxt.hole
    assert not nxt.ready


def test_the_window_after_the_last_waits_until_complete() -> None:
    nxt = next_window(600, W, 2, _has({1200: {0}, 1800: {0}}), earliest=None, recent=1800)
    assert nxt is not None
    assert (nxt.start_us, nxt.missing, nxt.later_complete) == (1200, frozenset({1}), None)
    assert not nxt.hole
    assert not nxt.ready


def test_a_later_complete_window_never_goes_first() -> None:
    nxt = next_window(600, W, 2, _has({1800: {0, 1}}), earliest=None, recent=1800)  # nothing of 1200
    assert nxt is not None
    assert nxt.start_us == 1200
    assert nxt.missing == frozenset({0, 1})
    assert nxt.later_complete == 1800


def test_a_ready_window_and_nothing_pending() -> None:
    nxt = next_window(600, W, 2, _has({1200: {0, 1}}), earliest=None, recent=1200)
    assert nxt is not None
    assert nxt.ready
    assert not nxt.hole
    assert next_window(None, W, 2, _has({}), earliest=None, recent=None) is None


def test_read_back_keeps_what_is_missing_and_stops_once_each_partition_shows_an_earlier_window() -> None:
    want = ReadBack(1200, frozenset({0, 1}))
    assert not want.done
    assert want.keep(1200, 1)  # found
    assert not want.keep(1200, 2)  # not missing
    assert not want.keep(1800, 0)  # later
    assert not want.done  # partition 0 can still be further back
    assert not want.keep(600, 0)  # earlier: not kept, but nothing of 0's for 1200 is further back
    assert want.done


def test_the_first_windows_check_keeps_every_earlier_window_and_reads_to_the_start() -> None:
    want = ReadBack(1200, frozenset(), earlier=True)
    assert want.keep(600, 0)
    assert want.keep(0, 1)
    assert not want.keep(1200, 0)
    assert not want.done
