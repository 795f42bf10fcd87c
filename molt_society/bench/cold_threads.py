"""The cost of putting threads to disk (``streams.cold_threads``) as the stored threads grow.

A direct replay's state process puts the least recently used threads of its partitions to a SQLite table
(``ColdThreads.put``), about 3 KB a row, until the end of the history: 1.9 million rows per state process at
17M events. This puts ``--threads`` random post ids, ``--batch`` at a time, through ``ColdThreads`` and, in
the same run, through the table layout it had before (keyed by ``post_id`` itself, ``WITHOUT ROWID``),
built here with the same pragmas for comparison, and prints the milliseconds per batch in each fifth of the
run: a put must cost the same whatever the table already holds.

    python -m molt_society.bench.cold_threads [--threads 600000] [--batch 1000]
"""

from __future__ import annotations

import argparse
import os
import random
import sqlite3
import tempfile
import time
import uuid
from collections.abc import Callable
from pathlib import Path

from molt_society.streams.cold_threads import PRAGMAS, ColdThreads

ROW_BYTES = 2_800
"""A thread's encoded row, about its size at 17M events (issue 30: 2.8 KB with its comments)."""

Put = Callable[[list[tuple[str, int, bytes]]], None]


def keyed_table(folder: Path) -> tuple[Put, Callable[[], None]]:
    """The layout before: rows in a B-tree keyed by post id (``WITHOUT ROWID``), same pragmas."""
    db = sqlite3.connect(folder / "keyed.db", isolation_level=None)
    for pragma in PRAGMAS:
        db.execute(f"PRAGMA {pragma}")
    db.execute(
        "CREATE TABLE thread(post_id TEXT PRIMARY KEY, last_us INTEGER NOT NULL, row BLOB NOT NULL) "
        "WITHOUT ROWID"
    )
    db.execute("CREATE INDEX thread_last ON thread(last_us)")

    def put(batch: list[tuple[str, int, bytes]]) -> None:
        db.execute("BEGIN")
        db.executemany("INSERT OR REPLACE INTO thread VALUES (?, ?, ?)", batch)
        db.execute("COMMIT")

    return put, db.close


def run(put: Put, threads: int, batch: int, seed: int) -> list[float]:
    """Milliseconds per batch in each fifth of the run."""
    rng = random.Random(seed)
    row = os.urandom(ROW_BYTES)
    batches = threads // batch
    fifths: list[list[float]] = [[] for _ in range(5)]
    for b in range(batches):
        rows = [(str(uuid.UUID(int=rng.getrandbits(128))), b * batch + i, row) for i in range(batch)]
        start = time.perf_counter()
        put(rows)
        fifths[min(4, b * 5 // batches)].append((time.perf_counter() - start) * 1000)
    return [sum(f) / len(f) if f else 0.0 for f in fifths]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=600_000)
    parser.add_argument("--batch", type=int, default=1_000)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-cold-") as tmp:
        cold = ColdThreads(Path(tmp))
        try:
            now = run(cold.put, args.threads, args.batch, seed=1)
        finally:
            cold.close()
        keyed_put, keyed_close = keyed_table(Path(tmp))
        try:
            before = run(keyed_put, args.threads, args.batch, seed=1)
        finally:
            keyed_close()
    print(f"ms per put of {args.batch:,} rows of {ROW_BYTES:,} B, by fifth of {args.threads:,} threads")
    print("| layout | " + " | ".join(f"fifth {i + 1}" for i in range(5)) + " | last / first |")
    print("|---|" + "---:|" * 6)
    for name, ms in (
        ("ColdThreads (rowid table)", now),
        ("keyed by post id (WITHOUT ROWID, before)", before),
    ):
        print(f"| {name} | " + " | ".join(f"{m:.1f}" for m in ms) + f" | {ms[-1] / ms[0]:.2f} |")
    print(f"keyed / rowid, last fifth: {before[-1] / now[-1]:.2f}")


if __name__ == "__main__":
    main()
