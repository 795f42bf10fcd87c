"""Private temporary folders named for the process that made them, and the sweep of those whose process is
gone.

An import's records (``importers.scratch``) and its sorted runs (``importers.spill``) are gigabytes at 17M
events, and a process killed before its ``close`` left them in the temporary folder for good (``make test``
left a sorted run folder per killed direct replay). Each folder is now ``<kind>-<pid>-<random>``; making a
folder of a kind first removes the folders of that kind whose process no longer runs (``runtime.pids``:
exited, or a zombie); a live process, however old, keeps its own, and a pid reused since by another
process keeps a dead one's folder until that process ends too.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

from molt_society.runtime.logs import get_logger
from molt_society.runtime.pids import pid_alive

log = get_logger(__name__)


def private_dir(kind: str, parent: Path | None = None) -> Path:
    """A new folder ``<kind>-<this pid>-<random>`` in ``parent`` (the temporary folder by default), after
    ``sweep`` of that kind there."""
    base = Path(parent) if parent is not None else Path(tempfile.gettempdir())
    sweep(kind, base)
    return Path(tempfile.mkdtemp(prefix=f"{kind}-{os.getpid()}-", dir=base))


def sweep(kind: str, base: Path) -> list[Path]:
    """Remove the folders ``<kind>-<pid>-*`` in ``base`` whose process no longer runs; the removed ones."""
    removed = []
    for path in base.glob(f"{kind}-*-*"):
        pid = path.name[len(kind) + 1 :].split("-", 1)[0]
        if not pid.isdigit() or not path.is_dir() or path.is_symlink() or pid_alive(int(pid)):
            continue
        shutil.rmtree(path, ignore_errors=True)
        removed.append(path)
    if removed:
        log.info("tempdirs.swept", kind=kind, folders=len(removed), base=str(base))
    return removed
