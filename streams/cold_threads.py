"""Threads of a partition state that were not touched for a while, kept on disk (SQLite) instead of memory.

A stream worker holds its partitions' live threads in memory and archives them once idle for
``SOCIETY_THREAD_TTL_SECONDS`` of event time (30 days). A replay of a MoltBook dump spans less than that,
so every thread of a 17M-event archive would stay in memory to the end (about 2.8 KB each with its
comments: issue 30). A ``PartitionState`` given a ``ColdThreads`` keeps at most ``hot`` threads in memory:
past that, the least recently used go here as the rows its snapshots hold, and come back (exactly as they
were) when an event of theirs arrives; which threads are in memory changes nothing but memory and time.

The database is a private temporary file, removed by ``close``: rows are the state's own encoding of what
it accepted, read back with orjson, never executed. Its page cache is ``CACHE_KIB``.
"""

from __future__ import annotations

import shutil
import sqlite3
import tempfile
from collections.abc import Iterable, Iterator
from pathlib import Path

CACHE_KIB = 16_384
"""SQLite's page cache per database (KiB); the operating system's file cache holds the rest."""


class ColdThreads:
    """``put`` rows (post id, event time of its last event, encoded thread), ``get`` one back by post id."""

    def __init__(self, folder: Path | None = None) -> None:
        self._dir = Path(tempfile.mkdtemp(prefix="society-cold-", dir=folder))
        self._db = sqlite3.connect(self._dir / "threads.db", isolation_level=None)
        for pragma in (
            "journal_mode=OFF",
            "synchronous=OFF",
            "temp_store=MEMORY",
            f"cache_size=-{CACHE_KIB}",
        ):
            self._db.execute(f"PRAGMA {pragma}")
        self._db.execute(
            "CREATE TABLE thread(post_id TEXT PRIMARY KEY, last_us INTEGER NOT NULL, row BLOB NOT NULL) "
            "WITHOUT ROWID"
        )
        self._db.execute("CREATE INDEX thread_last ON thread(last_us)")
        self.rows = 0  # rows written (a thread written again counts again)
        self.loads = 0  # rows read back

    def put(self, rows: Iterable[tuple[str, int, bytes]]) -> None:
        """Store threads (a thread stored before is replaced: a cold copy is never newer than memory's)."""
        batch = list(rows)
        self._db.execute("BEGIN")
        self._db.executemany("INSERT OR REPLACE INTO thread VALUES (?, ?, ?)", batch)
        self._db.execute("COMMIT")
        self.rows += len(batch)

    def get(self, post_id: str) -> bytes | None:
        """The stored row of a thread, or None."""
        found = self._db.execute("SELECT row FROM thread WHERE post_id = ?", (post_id,)).fetchone()
        if found is None:
            return None
        self.loads += 1
        row: bytes = found[0]
        return row

    def __contains__(self, post_id: object) -> bool:
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
        shutil.rmtree(self._dir, ignore_errors=True)
