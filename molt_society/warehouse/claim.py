"""A sink's claim on the embedded chDB directory, so that readers who open it briefly step aside.

chDB allows one engine per directory and says nothing of who holds it. A reader that opens the directory
for a moment and releases it (the dashboard, once a refresh) would otherwise race a sink starting later:
on a slow machine the dashboard's refreshes follow each other with only milliseconds free between them,
and the sink could try for its whole patience without finding the directory free.

So a sink writes ``<chdb directory>.sink`` (its pid, its society) before it opens the directory, and
removes it when it closes; ``claimed_by`` tells a reader whether a live sink claims the directory, and a
reader that is about to open it waits for that sink's ``/query`` instead. A claim whose process is gone
(a killed sink), or whose pid now belongs to something that is not a sink, counts as no claim.
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

import orjson

SUFFIX = ".sink"


def claim_path(chdb_path: Path) -> Path:
    """The claim file of the chDB directory ``chdb_path`` (beside it: the directory is chDB's own)."""
    return chdb_path.with_name(chdb_path.name + SUFFIX)


def write_claim(chdb_path: Path, society: str) -> None:
    """Claim ``chdb_path`` for this process (atomically; the directory's parent is created if missing)."""
    path = claim_path(chdb_path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f"{path.name}.{os.getpid()}.tmp")
    tmp.write_bytes(orjson.dumps({"pid": os.getpid(), "society": society}))
    tmp.replace(path)


def drop_claim(chdb_path: Path) -> None:
    """Remove this process's claim on ``chdb_path`` (another process's claim is left alone)."""
    path = claim_path(chdb_path)
    if _claim_pid(path) == os.getpid():
        with contextlib.suppress(FileNotFoundError):
            path.unlink()


def claimed_by(chdb_path: Path) -> int | None:
    """The pid of the live sink, other than this process, that claims ``chdb_path``; else None."""
    pid = _claim_pid(claim_path(chdb_path))
    if pid is None or pid == os.getpid() or not _is_sink(pid):
        return None
    return pid


def _claim_pid(path: Path) -> int | None:
    try:
        pid = orjson.loads(path.read_bytes())["pid"]
    except (OSError, orjson.JSONDecodeError, KeyError, TypeError):
        return None
    return pid if isinstance(pid, int) and pid > 0 else None


def _is_sink(pid: int) -> bool:
    """Whether ``pid`` is alive and (where /proc says) a sink process."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass  # alive, another user's
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return True  # no /proc here: alive is all that can be said
    return b"molt_society.sinks" in cmdline
