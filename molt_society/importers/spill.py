"""Records sorted by a key without holding them all: an external merge sort over temporary files.

An import or a replay orders its events by ``(event time, event id)`` before they are published; a dump
of millions of events does not fit in memory as objects. ``SortedSpill`` keeps at most ``run_size``
records in memory; each full buffer is sorted and written to a run file (length-prefixed binary, in a
temporary folder removed on ``close``), and iteration merges the runs (``heapq.merge``), so memory is one
buffer plus one record per run whatever the number of records. Ties on the key keep insertion order.

With ``tally_ties``, each run also gets a side file of the first 8 bytes of its records' tie-breaks (an
event's id), so that ``repeated_ties`` can say which ids occur more than once in the whole spill without
reading the records again or holding every id: a direct replay remembers only those
(``streams.event_ids.EventIds``).
"""

from __future__ import annotations

import heapq
import shutil
import struct
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO

import numpy as np

from molt_society.runtime.tempdirs import private_dir

RUN_SIZE = 200_000
"""Records held before a run is written: about 100 MB of encoded events of a few hundred bytes."""
_HEAD = struct.Struct(">qIQI")  # time (us), tie-break length, sequence, payload length
TIE_SUFFIX = ".ties"
"""A run's side file with ``tally_ties``: its tie-breaks' first 8 bytes (zero-padded), big-endian uint64."""
TIE_BUCKET_BITS = 4
"""``repeated_ties`` works on one bucket of prefixes at a time, by their top 4 bits (a sixteenth)."""


class SortedSpill:
    """``add(us, tie, payload)`` in any order; iterate to get the payloads by ``(us, tie)``."""

    def __init__(
        self, run_size: int = RUN_SIZE, folder: Path | None = None, *, tally_ties: bool = False
    ) -> None:
        self.run_size = run_size
        self.tally_ties = tally_ties
        self._parent = folder
        self._dir: Path | None = None
        self._buffer: list[tuple[int, bytes, int, bytes]] = []
        self._runs: list[Path] = []
        self._count = 0

    def __len__(self) -> int:
        return self._count

    @property
    def runs(self) -> int:
        """Run files written so far (0 while everything fits one buffer)."""
        return len(self._runs)

    def add(self, us: int, tie: bytes, payload: bytes) -> None:
        # a copy of exactly its length: orjson's result keeps its whole write buffer (4 KiB for a
        # 400-byte event), which made the buffer ten times its size
        self._buffer.append((us, tie, self._count, bytes(memoryview(payload))))
        self._count += 1
        if len(self._buffer) >= self.run_size:
            self._flush()

    def _flush(self) -> None:
        if not self._buffer:
            return
        path = self.folder() / f"run-{len(self._runs):05d}.bin"
        self._buffer.sort()
        with path.open("wb", buffering=1 << 20) as f:
            for us, tie, seq, payload in self._buffer:
                f.write(_HEAD.pack(us, len(tie), seq, len(payload)))
                f.write(tie)
                f.write(payload)
        if self.tally_ties:
            prefixes = b"".join([tie[:8].ljust(8, b"\0") for _, tie, _, _ in self._buffer])
            path.with_name(path.name + TIE_SUFFIX).write_bytes(prefixes)
        self._runs.append(path)
        self._buffer = []

    def folder(self) -> Path:
        """This spill's folder (made now if no run was written yet): what is put in it is removed with it."""
        if self._dir is None:
            self._dir = private_dir("society-sort", self._parent)
        return self._dir

    def adopt(self, runs: list[Path], count: int) -> None:
        """Merge ``runs``, sealed by another spill (another process's) and holding ``count`` records, with
        this one's: they are read with its own, in key order, and removed with it when they are in its
        ``folder``. Ties on the key keep no order between spills (an event's key is its time and id)."""
        self._runs.extend(runs)
        self._count += count

    def seal(self) -> list[Path]:
        """Write what is buffered to a run and return the run files: another process can then read the
        records in order (``SortedSpill.of_runs``). The files stay this spill's (``close`` removes them)."""
        self._flush()
        return list(self._runs)

    @classmethod
    def of_runs(cls, runs: list[Path], count: int) -> SortedSpill:
        """A reader of the ``count`` records in another spill's sealed ``runs`` (``seal``); its ``close``
        leaves the files to their owner."""
        spill = cls()
        spill._runs = list(runs)
        spill._count = count
        return spill

    def __iter__(self) -> Iterator[bytes]:
        """The payloads in key order (may be iterated more than once)."""
        if not self._runs:
            for item in sorted(self._buffer):
                yield item[3]
            return
        self._flush()
        files = [p.open("rb", buffering=1 << 20) for p in self._runs]
        try:
            for item in heapq.merge(*(_read_run(f) for f in files)):
                yield item[3]
        finally:
            for f in files:
                f.close()

    def close(self) -> None:
        """Remove the run files (the spill is empty afterwards)."""
        self._buffer = []
        self._runs = []
        self._count = 0
        if self._dir is not None:
            shutil.rmtree(self._dir, ignore_errors=True)
            self._dir = None

    def __enter__(self) -> SortedSpill:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def repeated_ties(runs: list[Path]) -> frozenset[int] | None:
    """The tie-break prefixes (first 8 bytes as a big-endian integer) that occur more than once in the
    ``runs`` of a spill made with ``tally_ties``: every id that two records share is among them (and, once
    in 2**64 / n**2 or so, an id that only shares its prefix). Memory: one bucket of prefixes at a time
    (8 bytes x records / 16). None when a run has no side file (a spill made without ``tally_ties``)."""
    files = [run.with_name(run.name + TIE_SUFFIX) for run in runs]
    if not all(side.is_file() for side in files):
        return None
    repeated: set[int] = set()
    shift = np.uint64(64 - TIE_BUCKET_BITS)
    for bucket in range(1 << TIE_BUCKET_BITS):
        parts = []
        for side in files:
            prefixes = np.fromfile(side, dtype=">u8").astype(np.uint64)
            parts.append(prefixes[(prefixes >> shift) == bucket])
        merged = np.sort(np.concatenate(parts)) if parts else np.empty(0, np.uint64)
        same = merged[1:][merged[1:] == merged[:-1]]
        repeated.update(int(x) for x in np.unique(same))
    return frozenset(repeated)


def _read_run(f: BinaryIO) -> Iterator[tuple[int, bytes, int, bytes]]:
    size = _HEAD.size
    while head := f.read(size):
        us, tie_len, seq, n = _HEAD.unpack(head)
        tie = f.read(tie_len)
        yield us, tie, seq, f.read(n)
