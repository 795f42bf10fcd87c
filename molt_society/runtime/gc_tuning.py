"""The garbage collector of a process that turns millions of records into others: collect less often.

CPython collects cyclic garbage by generations: after every 700 new container objects (threshold 0),
every 10 of those (1) and every 10 of those (2); each collection walks every object of its generations. A
process that makes and drops a few objects per record (dicts, lists, rows) while it holds a large heap (a
partition's threads and windows, a batch of rows waiting for its insert) pays for that heap again and
again, and more as the heap grows. Measured: 18 of 58 CPU seconds of a stream worker in ``make bench``;
in a direct replay of 1.35M events (issue 30, ``gc.callbacks``), 18.6 of the insert process's 46.6 CPU
seconds (25,182 collections, 107 of them full), 5.7 of each state process's 24 and 4.3 of the import's 44.

``tune_gc`` moves what the process has built so far (modules, settings, clients) out of the collector's
sight (``gc.freeze``) and collects young objects after ``THRESHOLDS[0]`` new ones, the older generations
after ``THRESHOLDS[1]`` and ``THRESHOLDS[2]`` collections of the younger. Reference counting still frees at
once everything that is not in a cycle (almost everything here); cycles are still collected, later.
Called at the start of the stream worker, the sink, an import and a direct replay's processes.
"""

from __future__ import annotations

import gc

THRESHOLDS = (100_000, 50, 100)
"""New container objects between two young collections; then collections of each generation between two
of the next."""


def tune_gc() -> None:
    """Collect this process's cyclic garbage at ``THRESHOLDS``, with what exists now frozen."""
    gc.collect()
    gc.freeze()
    gc.set_threshold(*THRESHOLDS)
