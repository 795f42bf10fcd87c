"""What the one consume loop (``runtime.consume_loop``) itself costs per fetch, against a bare loop.

The broker is replaced by a recorder that answers every ``getmany`` at once with ``--records`` records on
each of ``--partitions`` partitions, and the steps do nothing, so what is timed is the loop's own work: the
gap guard, the partitions still assigned, the lock, ``submit`` and ``poll``, ``failure()``. The bare loop is
the shape the three processes had before (``getmany`` -> the gap guard -> the work). Rounds alternate the
two; the figure is microseconds per fetch. A fetch of the stack carries up to 10,000 (stream worker) or
20,000 (sink) records and costs milliseconds to process, so a few microseconds per fetch is nothing.

    python -m molt_society.bench.consume_loop [--fetches 20000] [--records 500] [--partitions 4]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time
from collections.abc import Collection
from dataclasses import dataclass
from typing import Any

from aiokafka import TopicPartition

from molt_society.runtime.consume_loop import Batch, ConsumeLoop
from molt_society.runtime.contiguous import Contiguous


@dataclass
class _Rec:
    offset: int


class _Recorder:
    """A consumer whose fetches return at once: ``records`` new records on every partition."""

    def __init__(self, partitions: int, records: int, fetches: int, stop: asyncio.Event) -> None:
        self.tps = {TopicPartition("t", p) for p in range(partitions)}
        self.records = records
        self.left = fetches
        self.stop_event = stop
        self.next = 0

    def assignment(self) -> set[TopicPartition]:
        return self.tps

    async def getmany(self, timeout_ms: int) -> dict[TopicPartition, list[_Rec]]:
        self.left -= 1
        if self.left <= 0:
            self.stop_event.set()
        first, self.next = self.next, self.next + self.records
        recs = [_Rec(o) for o in range(first, self.next)]
        return dict.fromkeys(self.tps, recs)

    def subscribe(self, topics: list[str], listener: Any) -> None:
        pass

    def seek(self, tp: TopicPartition, offset: int) -> None:
        raise AssertionError("no gap is made here")

    def pause(self, *tps: TopicPartition) -> None:
        pass

    def resume(self, *tps: TopicPartition) -> None:
        pass

    async def start(self) -> None:
        pass

    async def stop(self) -> None:
        pass


class _Nothing:
    """Steps that count what they are handed and do nothing else."""

    def __init__(self) -> None:
        self.records = 0

    async def submit(self, batch: Batch) -> None:
        self.records += sum(len(r) for r in batch.values())

    async def poll(self) -> None:
        pass

    async def revoked(self, partitions: Collection[TopicPartition]) -> None:
        pass

    async def assigned(self, partitions: Collection[TopicPartition]) -> None:
        pass

    def failure(self) -> BaseException | None:
        return None

    async def close(self, failed: bool) -> None:
        pass


async def _one_loop(fetches: int, records: int, partitions: int) -> tuple[float, int]:
    stop = asyncio.Event()
    steps = _Nothing()
    loop = ConsumeLoop(_Recorder(partitions, records, fetches, stop), "bench", steps)
    began = time.perf_counter()
    await loop.run(stop)
    return time.perf_counter() - began, steps.records


async def _bare(fetches: int, records: int, partitions: int) -> tuple[float, int]:
    stop = asyncio.Event()
    consumer = _Recorder(partitions, records, fetches, stop)
    gaps = Contiguous(consumer, "bench")
    steps = _Nothing()
    began = time.perf_counter()
    while not stop.is_set():
        batch = gaps.fetched(await consumer.getmany(timeout_ms=100))
        if batch:
            await steps.submit(batch)
    return time.perf_counter() - began, steps.records


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--fetches", type=int, default=20_000)
    parser.add_argument("--records", type=int, default=500, help="records per partition per fetch")
    parser.add_argument("--partitions", type=int, default=4)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    per: dict[str, list[float]] = {"bare loop": [], "one loop": []}
    for _ in range(args.rounds):
        for name, run in (("bare loop", _bare), ("one loop", _one_loop)):
            seconds, handed = asyncio.run(run(args.fetches, args.records, args.partitions))
            assert handed == args.fetches * args.records * args.partitions, (name, handed)
            per[name].append(seconds / args.fetches * 1e6)
    print(
        f"{args.fetches:,} fetches of {args.records:,} records on {args.partitions} partitions, "
        f"{args.rounds} rounds alternated: microseconds per fetch (median, min-max)"
    )
    for name, us in per.items():
        print(f"  {name}: {statistics.median(us):.1f} ({min(us):.1f}-{max(us):.1f})")
    bare, one = statistics.median(per["bare loop"]), statistics.median(per["one loop"])
    print(f"  the one loop's own cost: {one - bare:+.1f} us per fetch")


if __name__ == "__main__":
    main()
