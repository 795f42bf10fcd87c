"""Threads of a partition state that were not touched for a while, kept on disk (SQLite) instead of memory.

A stream worker holds its partitions' live threads in memory and archives them once idle for
``SOCIETY_THREAD_TTL_SECONDS`` of event time (30 days). A replay of a MoltBook dump spans less than that,
so every thread of a 17M-event archive would stay in memory to the end (about 2.8 KB each with its
comments: issue 30). A ``PartitionState`` given a ``ColdThreads`` keeps at most ``hot`` threads in memory:
past that, the least recently used go here as the rows its snapshots hold, and come back (exactly as they
were) when an event of theirs arrives; which threads are in memory changes nothing but memory and time.

The database is a private temporary file, unlinked once open (gone with the process, killed or not):
rows are the state's own encoding of what it accepted, read back with orjson, never executed. Its page
cache is ``CACHE_KIB``. A Bloom filter of the post ids ever stored answers most lookups of a thread that is
not there (every new post asks) without the database, whose B-tree lookups grew with the archive (11% of a
state process at 5.4M events).
"""

from __future__ import annotations

import sqlite3
import tempfile
from collections.abc import Iterable, Iterator
from pathlib import Path

CACHE_KIB = 16_384
"""SQLite's page cache per database (KiB); the operating system's file cache holds the rest."""
PRAGMAS = ("journal_mode=OFF", "synchronous=OFF", "temp_store=MEMORY", f"cache_size=-{CACHE_KIB}")
"""The database's settings: no journal or sync (a private file gone with the process), temporary data in
memory, ``CACHE_KIB`` of page cache."""


class PostFilter:
    """A Bloom filter of post ids: ``key in f`` is False for every key never added, and True for every key
    added (and for about 1% of the others once ``capacity`` keys are in). Python's ``hash`` of a str (fixed
    within a process, cached on the string) gives the bit positions by double hashing; nothing leaves the
    process."""

    HASHES = 7
    BITS_PER_KEY = 10

    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        self.count = 0
        self._m = capacity * self.BITS_PER_KEY
        self._bits = bytearray((self._m + 7) // 8)

    def _positions(self, key: str) -> list[int]:
        h = hash(key) & 0xFFFF_FFFF_FFFF_FFFF
        first, step, m = h & 0xFFFF_FFFF, (h >> 32) | 1, self._m
        return [(first + i * step) % m for i in range(self.HASHES)]

    def add(self, key: str) -> None:
        bits = self._bits
        for at in self._positions(key):
            bits[at >> 3] |= 1 << (at & 7)
        self.count += 1

    def __contains__(self, key: object) -> bool:
        """The positions of ``_positions``, one at a time: a key never added (every new post) is told at
        its first clear bit, most often the first or second."""
        if not isinstance(key, str):
            return False
        h = hash(key) & 0xFFFF_FFFF_FFFF_FFFF
        at, step, m, bits = h & 0xFFFF_FFFF, (h >> 32) | 1, self._m, self._bits
        for _ in range(self.HASHES):
            q = at % m
            if not bits[q >> 3] >> (q & 7) & 1:
                return False
            at += step
        return True


class ColdThreads:
    """``put`` rows (post id, event time of its last event, encoded thread), ``get`` one back by post id."""

    FILTER_CAPACITY = 1 << 16
    """Post ids the first filter holds at about 1% false positives; it doubles (rebuilt from the database)
    whenever as many were put since it was built."""

    def __init__(self, folder: Path | None = None) -> None:
        self._dir = Path(tempfile.mkdtemp(prefix="society-cold-", dir=folder))
        self._db = sqlite3.connect(self._dir / "threads.db", isolation_level=None)
        for pragma in PRAGMAS:
            self._db.execute(f"PRAGMA {pragma}")
        # a rowid table: a thread put is appended at the end of the table's B-tree, and only the small
        # post_id index takes a random insert. Keyed by post_id itself (WITHOUT ROWID), every put of a
        # 3 KB row landed at a random place of a B-tree of whole rows, one row per page: at 17M events
        # the state processes spent 65 s each on puts, and a put cost more the more threads were stored
        # (three times a rowid table's at 600,000 rows)
        self._db.execute(
            "CREATE TABLE thread(post_id TEXT NOT NULL UNIQUE, last_us INTEGER NOT NULL, row BLOB NOT NULL)"
        )
        self._db.execute("CREATE INDEX thread_last ON thread(last_us)")
        # a killed process leaves no file behind (gigabytes at 17M events): the open database is all
        # there is of it; SQLite opens no other file without a journal and with temporary data in memory
        (self._dir / "threads.db").unlink()
        self._dir.rmdir()
        self.rows = 0  # rows written (a thread written again counts again)
        self.loads = 0  # rows read back
        self._seen = PostFilter(self.FILTER_CAPACITY)  # every post id ever put (dropped ones too)

    def put(self, rows: Iterable[tuple[str, int, bytes]]) -> None:
        """Store threads (a thread stored before is replaced: a cold copy is never newer than memory's)."""
        batch = list(rows)
        self._db.execute("BEGIN")
        self._db.executemany("INSERT OR REPLACE INTO thread VALUES (?, ?, ?)", batch)
        self._db.execute("COMMIT")
        self.rows += len(batch)
        seen = self._seen
        if seen.count + len(batch) > seen.capacity:  # a larger filter, of what the database holds now
            stored = self._db.execute("SELECT count(*) FROM thread").fetchone()[0]
            seen = self._seen = PostFilter(max(2 * seen.capacity, 2 * stored))
            for (post_id,) in self._db.execute("SELECT post_id FROM thread"):
                seen.add(post_id)
        else:
            for post_id, _, _ in batch:
                seen.add(post_id)

    def get(self, post_id: str) -> bytes | None:
        """The stored row of a thread, or None."""
        if post_id not in self._seen:
            return None
        found = self._db.execute("SELECT row FROM thread WHERE post_id = ?", (post_id,)).fetchone()
        if found is None:
            return None
        self.loads += 1
        row: bytes = found[0]
        return row

    def __contains__(self, post_id: object) -> bool:
        if post_id not in self._seen:
            return False
        return self._db.execute("SELECT 1 FROM thread WHERE post_id = ?", (post_id,)).fetchone() is not None

    def idle(self, before_us: int) -> list[str]:
        """Post ids whose stored copy's last event is before ``before_us`` (a copy may be stale: the caller
        skips threads it holds in memory)."""
        return [
            pid for (pid,) in self._db.execute("SELECT post_id FROM thread WHERE last_us < ?", (before_us,))
        ]

    def drop(self, post_ids: Iterable[str]) -> None:
        self._db.execute("BEGIN")
        self._db.executemany("DELETE FROM thread WHERE post_id = ?", [(p,) for p in post_ids])
        self._db.execute("COMMIT")

    def stored(self) -> Iterator[tuple[str, bytes]]:
        """Every stored (post id, row), by post id."""
        yield from self._db.execute("SELECT post_id, row FROM thread ORDER BY post_id")

    def close(self) -> None:
        """Remove the database (the threads in it are gone)."""
        self._db.close()
