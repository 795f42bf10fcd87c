"""Records in offset order with none left out: a consumer that is handed a gap fetches again from it.

Tansu 0.6.0 (the local broker's memory engine) can make a consumer that reads at the end of a partition
skip a batch that another producer appended at the same moment: the batch is in the log (a read from the
start finds it), but the fetch at its offset was answered with the batch after it. With three producer
processes appending 90,000 records to 4 partitions and consumers tailing them, a plain consumer never got
54 to 114 acknowledged records in about one round of five (``python -m molt_society.bench.tail_gaps``). In
the fuzz test on Tansu the stream worker never saw 1 of its 10,295 hostile records, and in one CI run 31 of
them never reached the dead-letter table.

The topics read through it (actions by the stream worker; events, metrics, dead letters by the sink; ticks
and feeds by the agent workers) are neither compacted nor
transactional, so their offsets are consecutive on every broker and a gap is always such a skip. The
guard passes a fetch's records up to the first gap, seeks back to the first offset missing and lets the
next fetch bring it. A gap that does not close within ``GAP_WAIT_S`` (no broker seen here does that) is
given up on and said as an error, rather than stalling the partition for ever.
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from typing import Any

from molt_society.runtime.logs import get_logger

log = get_logger(__name__)

GAP_WAIT_S = 10.0
"""How long a partition is fetched again from an offset it was not given before the gap is accepted."""


class Contiguous:
    """Checks each partition's fetched records against the next offset it expects (see the module)."""

    def __init__(self, consumer: Any, reader: str, wait_s: float = GAP_WAIT_S) -> None:
        self._consumer = consumer
        self._reader = reader
        self._wait_s = wait_s
        self._next: dict[Any, int] = {}
        self._gap: dict[Any, tuple[int, float]] = {}  # tp -> (first offset missing, first seen)
        self.refetches = 0
        """Fetches handed back because of a gap (each closed or given up on)."""
        self.gaps_closed = 0
        self.offsets_given_up = 0

    def expect(self, tp: Any, offset: int) -> None:
        """``tp`` continues at ``offset`` (its position after an assignment or a seek)."""
        self._next[tp] = offset
        self._gap.pop(tp, None)

    def forget(self, tps: Iterable[Any]) -> None:
        """``tps`` are no longer read (revoked): the next assignment says where they continue."""
        for tp in tps:
            self._next.pop(tp, None)
            self._gap.pop(tp, None)

    def fetched(self, batch: dict[Any, list[Any]]) -> dict[Any, list[Any]]:
        """A ``getmany`` result with each partition's records through ``records``; partitions left with
        none are left out."""
        return {tp: kept for tp, recs in batch.items() if (kept := self.records(tp, recs))}

    def records(self, tp: Any, records: list[Any]) -> list[Any]:
        """``records`` (one fetch of ``tp``, in order) up to the first gap, where ``tp`` is sought back to.

        Records before the expected offset are passed on untouched (whoever reads them decides what that
        means: the sink's resume check calls it a recreated topic). A partition never seen before
        continues from its first record."""
        if not records:
            return records
        want = self._next.get(tp, records[0].offset)
        gap = self._gap.get(tp)  # open before this fetch
        if records[0].offset > want and self._still_missing(tp, want, records[0].offset):
            return []
        end = len(records)
        for i in range(1, len(records)):
            missing = records[i - 1].offset + 1
            if records[i].offset != missing and self._still_missing(tp, missing, records[i].offset):
                end = i
                break
        kept = records[:end]
        if gap is not None and kept[0].offset <= gap[0] <= kept[-1].offset:
            if self._gap.get(tp) == gap:
                del self._gap[tp]
            self.gaps_closed += 1
            log.info("consumer.offset_gap_closed", **self._where(tp))
        self._next[tp] = max(kept[-1].offset + 1, want)
        return kept

    def _where(self, tp: Any) -> dict[str, Any]:
        """What every log line of the guard says of where it is."""
        return {"reader": self._reader, "topic": tp.topic, "partition": tp.partition}

    def _still_missing(self, tp: Any, missing: int, got: int) -> bool:
        """Seek ``tp`` back to ``missing`` (the next fetch brings it) and say so; False, without a seek,
        once the gap has stayed open ``wait_s``: then it is accepted and said as an error."""
        now = time.monotonic()
        seen = self._gap.get(tp)
        if seen is None or seen[0] != missing:
            seen = self._gap[tp] = (missing, now)
            log.warning(
                "consumer.offset_gap",
                **self._where(tp),
                missing_from=missing,
                fetched=got,
                action="fetching again from the first offset missing",
            )
        if now - seen[1] >= self._wait_s:
            del self._gap[tp]
            self.offsets_given_up += got - missing
            log.error(
                "consumer.offsets_skipped",
                **self._where(tp),
                missing_from=missing,
                missing_to=got - 1,
                seconds=round(now - seen[1], 1),
                reason="the broker did not deliver these offsets when fetched again",
            )
            return False
        self.refetches += 1
        self._consumer.seek(tp, missing)
        return True
