"""runtime.contiguous: a fetch with an offset gap is cut there and the partition fetched again from it."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from molt_society.runtime.contiguous import Contiguous


@dataclass(frozen=True)
class TP:
    topic: str
    partition: int


@dataclass(frozen=True)
class Rec:
    partition: int
    offset: int


@dataclass
class Consumer:
    seeks: list[tuple[Any, int]] = field(default_factory=list)

    def seek(self, tp: Any, offset: int) -> None:
        self.seeks.append((tp, offset))


A = TP("t", 0)
B = TP("t", 1)


def recs(*offsets: int, partition: int = 0) -> list[Rec]:
    return [Rec(partition, o) for o in offsets]


def test_consecutive_records_pass_and_each_partition_is_its_own() -> None:
    c = Consumer()
    g = Contiguous(c, "test")
    assert g.records(A, recs(5, 6, 7)) == recs(5, 6, 7)  # a first fetch sets where A continues
    assert g.records(B, recs(0, 1, partition=1)) == recs(0, 1, partition=1)
    assert g.records(A, recs(8, 9)) == recs(8, 9)
    assert g.records(A, []) == []
    assert c.seeks == []
    assert g.refetches == 0


def test_a_fetch_past_the_next_offset_is_held_back_and_fetched_again_from_it() -> None:
    c = Consumer()
    g = Contiguous(c, "test")
    g.records(A, recs(0, 1, 2))
    assert g.records(A, recs(5, 6)) == []  # 3 and 4 never came
    assert c.seeks == [(A, 3)]
    assert g.records(A, recs(3, 4, 5, 6)) == recs(3, 4, 5, 6)  # the fetch again brings them
    assert (g.refetches, g.gaps_closed, g.offsets_given_up) == (1, 1, 0)
    assert g.records(A, recs(7)) == recs(7)


def test_a_gap_inside_a_fetch_cuts_it_there() -> None:
    c = Consumer()
    g = Contiguous(c, "test")
    assert g.records(A, recs(10, 11, 14, 15)) == recs(10, 11)
    assert c.seeks == [(A, 12)]
    assert g.records(A, recs(12, 13, 14, 15)) == recs(12, 13, 14, 15)
    assert g.gaps_closed == 1


def test_a_gap_that_stays_open_is_given_up_on_without_losing_the_records_after_it() -> None:
    c = Consumer()
    g = Contiguous(c, "test", wait_s=0.0)
    g.records(A, recs(0))
    assert g.records(A, recs(3, 4, 6)) == recs(3, 4, 6)  # both gaps accepted at once
    assert c.seeks == []
    assert g.offsets_given_up == 2 + 1
    assert g.records(A, recs(7)) == recs(7)


def test_records_before_the_next_offset_are_passed_on_for_the_reader_to_judge() -> None:
    c = Consumer()
    g = Contiguous(c, "test")
    g.records(A, recs(0, 1, 2))
    assert g.records(A, recs(1, 2, 3)) == recs(1, 2, 3)  # e.g. the sink's resume check sees them
    assert c.seeks == []


def test_forgotten_partitions_continue_from_their_next_first_record() -> None:
    c = Consumer()
    g = Contiguous(c, "test")
    g.records(A, recs(0, 1))
    g.forget([A])
    assert g.records(A, recs(40, 41)) == recs(40, 41)  # reassigned elsewhere in the log: no gap
    g.expect(A, 50)
    assert g.records(A, recs(52)) == []
    assert c.seeks == [(A, 50)]
