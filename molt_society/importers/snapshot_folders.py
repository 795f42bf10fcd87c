"""Longitudinal collections: folders named by the time of their snapshot, read as one history.

Collections such as takschdube/moltbook-dataset publish the platform as it stood every few hours, each
snapshot in a folder named by its time (``2026-02-01T06-00-00Z/raw/posts_full.json``,
``runs/20260130T170118Z/...``). A file's snapshot time is the innermost folder of its path (inside the
import, containers included) that names a date and a time of day: ``YYYY-MM-DD`` or ``YYYYMMDD``, then
``T``, ``_``, ``-`` or a space, then ``HH``, ``MM`` and optionally ``SS`` (any of ``-``, ``:`` or ``_``
between them), optionally ``Z``; always UTC. A folder named by a date alone is a partition, not a
snapshot.

When an import holds at least two snapshot times, ``importers.builder`` reads it as one history: a post or
comment seen in many snapshots is one post or comment (its earliest copy), and the changes of its counts
become ``vote_tallied`` events at each later snapshot's time (see the builder's contract).
"""

from __future__ import annotations

import re
from datetime import UTC, datetime
from pathlib import PurePosixPath

_STAMP = re.compile(
    r"(?<!\d)(\d{4})-?(\d{2})-?(\d{2})[T_ -](\d{2})[-:_]?(\d{2})(?:[-:_]?(\d{2}))?(?:\.\d+)?Z?(?![\d:])"
)


def _parse(part: str) -> datetime | None:
    match = _STAMP.search(part)
    if match is None:
        return None
    y, mo, d, h, mi, s = (int(g) if g else 0 for g in match.groups())
    try:
        return datetime(y, mo, d, h, mi, s, tzinfo=UTC)
    except ValueError:  # digits that are no date (a month 13, an hour 25)
        return None


def snapshot_time(name: str) -> datetime | None:
    """The snapshot time of the file reported as ``name`` (its path inside the import), or None."""
    for folder in reversed(PurePosixPath(name).parts[:-1]):
        at = _parse(folder)
        if at is not None:
            return at
    return None
