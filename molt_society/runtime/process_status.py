"""Each process of a stack keeps a status file: ``<state_dir>/<society>/status/<role>-<pid>.json``.

A process of the stack (``runtime.process_main`` starts each) writes its file when it starts, again when it
is ready to work (``mark_ready``: the agent worker's group joined, the stream worker's first partition
rebuilt, the sink's HTTP endpoint serving, the dashboard serving), and beats in it every ``BEAT_S`` seconds
from its event loop, so a beat that stops means a loop that no longer turns (or a stopped process). The
supervisor reads readiness and liveness here (``society.supervisor``), never from log lines. Written
atomically (a temporary file renamed); removed by the process when it stops cleanly, by the supervisor
when it notices the process gone.

Fields: ``role``, ``pid``, ``started`` / ``ready`` / ``beat`` (epoch seconds; ``ready`` null until ready),
``ready_detail`` (what readiness meant for that role).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

BEAT_S = 2.0
STATUS_DIR = "status"


def status_path(run_dir: Path, role: str, pid: int) -> Path:
    """Where the process ``pid`` of ``role`` in the society whose folder is ``run_dir`` writes its status."""
    return run_dir / STATUS_DIR / f"{role}-{pid}.json"


@dataclass(frozen=True)
class Status:
    """A status file as read back."""

    role: str
    pid: int
    started: float
    ready: float | None
    beat: float
    ready_detail: dict[str, Any]


def read_status(run_dir: Path, role: str, pid: int) -> Status | None:
    """The status of ``pid`` (None: not written yet, removed, or not a status file)."""
    try:
        doc = orjson.loads(status_path(run_dir, role, pid).read_bytes())
        ready = doc["ready"]
        return Status(
            role=str(doc["role"]),
            pid=int(doc["pid"]),
            started=float(doc["started"]),
            ready=None if ready is None else float(ready),
            beat=float(doc["beat"]),
            ready_detail=dict(doc.get("ready_detail") or {}),
        )
    except (OSError, orjson.JSONDecodeError, KeyError, TypeError, ValueError):
        return None


def forget_status(run_dir: Path, role: str, pid: int) -> None:
    """Remove the status file of a process that is gone."""
    status_path(run_dir, role, pid).unlink(missing_ok=True)


class ProcessStatus:
    """This process's status file (one per process; ``current()`` is the one ``begin`` made)."""

    def __init__(self, run_dir: Path, role: str) -> None:
        self.role = role
        self.pid = os.getpid()
        self.path = status_path(run_dir, role, self.pid)
        self.started = time.time()
        self.ready: float | None = None
        self.ready_detail: dict[str, Any] = {}
        self.beat = self.started

    def write(self) -> None:
        doc = {
            "role": self.role,
            "pid": self.pid,
            "started": round(self.started, 3),
            "ready": None if self.ready is None else round(self.ready, 3),
            "beat": round(self.beat, 3),
            "ready_detail": self.ready_detail,
        }
        with contextlib.suppress(OSError):  # a full disk must not stop the process; the supervisor says so
            self.path.parent.mkdir(parents=True, exist_ok=True)
            tmp = self.path.with_name(self.path.name + ".tmp")
            tmp.write_bytes(orjson.dumps(doc))
            tmp.replace(self.path)

    def mark_ready(self, **detail: Any) -> None:
        if self.ready is None:
            self.ready = self.beat = time.time()
            self.ready_detail = detail
            self.write()

    async def heartbeat(self, every: float = BEAT_S) -> None:
        """Beat every ``every`` seconds for as long as the event loop turns (cancel it to stop)."""
        while True:
            self.beat = time.time()
            self.write()
            await asyncio.sleep(every)

    def remove(self) -> None:
        self.path.unlink(missing_ok=True)


_CURRENT: ProcessStatus | None = None


def begin(run_dir: Path, role: str) -> ProcessStatus:
    """Start this process's status file (written at once, not ready yet)."""
    global _CURRENT
    _CURRENT = ProcessStatus(run_dir, role)
    _CURRENT.write()
    return _CURRENT


def current() -> ProcessStatus | None:
    return _CURRENT


def mark_ready(**detail: Any) -> None:
    """This process is ready to work (only the first call counts); nothing when it keeps no status file
    (a worker run inside a test or a benchmark)."""
    if _CURRENT is not None:
        _CURRENT.mark_ready(**detail)
