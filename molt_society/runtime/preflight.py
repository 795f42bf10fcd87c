"""Checks of the environment before a stack starts: a state folder it can write, a ClickHouse folder it
can write, room on their disks. Each failure is one line naming the folder and what is wrong, instead of
a traceback or a child process that never answers ("nothing listens ... after 20 s")."""

from __future__ import annotations

import os
import shutil
import uuid
from pathlib import Path

MIN_FREE_BYTES = 256 << 20
"""Free space a society needs to start: the broker's first log segments, ClickHouse's first parts."""


class EnvironmentProblem(RuntimeError):
    """The machine cannot hold a society where the settings say (one line)."""


def check_writable(folder: Path, what: str, min_free: int = MIN_FREE_BYTES) -> None:
    """``folder`` exists or can be created, a file can be written in it, and its disk has ``min_free``
    bytes free; ``EnvironmentProblem`` otherwise."""
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise EnvironmentProblem(f"the {what} {folder} cannot be created: {exc.strerror or exc}") from None
    if not folder.is_dir():
        raise EnvironmentProblem(f"the {what} {folder} is not a folder")
    probe = folder / f".write-probe-{uuid.uuid4().hex}"
    try:
        with open(probe, "wb") as f:
            f.write(b"x" * 4096)
            f.flush()
            os.fsync(f.fileno())
    except OSError as exc:
        raise EnvironmentProblem(f"the {what} {folder} is not writable: {exc.strerror or exc}") from None
    finally:
        probe.unlink(missing_ok=True)
    free = shutil.disk_usage(folder).free
    if free < min_free:
        raise EnvironmentProblem(
            f"the disk of the {what} {folder} has {free >> 20} MiB free; a society needs at least "
            f"{min_free >> 20} MiB to start"
        )
