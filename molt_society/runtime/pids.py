"""Whether a process id names a running process: ``/proc`` on Linux, with the process's start time to tell it
from a later process that reuses the id. A module of its own (it was in ``runtime.broker``) so that the
store's and the temporary folders' checks import no Kafka client."""

from __future__ import annotations

import os
import sys
from pathlib import Path


def process_start_time(pid: int) -> int | None:
    """The start time of process ``pid`` in clock ticks since boot (Linux ``/proc``), None if it does not
    exist or has exited (a zombie counts as exited). Recorded with a pid, it tells the process from a later
    one that reuses the pid."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = stat[stat.rindex(")") + 2 :].split()
    if fields[0] in ("Z", "X"):
        return None
    return int(fields[19])


def pid_alive(pid: int, start_time: int | None = None) -> bool:
    """True when ``pid`` runs (not a zombie) and, given ``start_time``, is the process that was recorded."""
    if sys.platform.startswith("linux"):
        now = process_start_time(pid)
        return now is not None and (start_time is None or now == start_time)
    try:  # pragma: no cover - not Linux
        os.kill(pid, 0)
    except ProcessLookupError:  # pragma: no cover
        return False
    except PermissionError:  # pragma: no cover
        return True
    return True  # pragma: no cover
