"""Opening ClickHouse: the embedded chDB engine or a server, by URL. The only caller of ``get_client``.

chDB note: the embedded engine (``chdb:///path``) allows ONE engine per process, and another process
cannot open the same data directory while it is in use. Whatever else needs the data while the sink runs
(the CLI, a dashboard) must ask the sink's HTTP endpoint, or use a ClickHouse server. All calls on a chDB
client must come from one thread. chDB locks the directory (``flock`` on its ``status`` file, which names
the opener's pid): an open of a directory held by a live process is a ``StoreBusy`` naming it; one held
after its opener exited (a killed engine's threads closing its files) is waited for.
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

import clickhouse_connect
import psutil
from clickhouse_connect.driver.exceptions import ProgrammingError

from molt_society.runtime.logs import get_logger
from molt_society.runtime.pids import pid_alive

#: How long an open waits for the lock of a store whose holder has exited or is exiting (a killed process
#: with many threads shows as exited before its last thread has closed its files).
RELEASE_PATIENCE_S = 30.0

log = get_logger(__name__)


class StoreBusy(RuntimeError):
    """The embedded store is open in another process (chDB's own lock on its data directory)."""


def connect(url: str) -> Any:
    """A clickhouse-connect client for ``url``.

    ``chdb:///abs/path`` opens the embedded engine on that directory (created if missing);
    ``http(s)://user:pass@host:port/db`` connects to a server. Datetimes come back timezone-aware (UTC).
    Call it, and use the client, from one thread only (chDB requirement; harmless for a server).
    """
    if url.startswith("chdb:"):
        location = url.removeprefix("chdb://")
        if location and location != "memory" and not location.startswith(("memory/", ":memory:")):
            Path(location).mkdir(parents=True, exist_ok=True)
            return _open_chdb(url, Path(location))
    elif not url.startswith(("http://", "https://")):
        raise ValueError(f"unsupported ClickHouse URL {url!r}: use chdb:///path or http(s)://host:port/db")
    return clickhouse_connect.get_client(dsn=url, tz_mode="aware")


def _open_chdb(url: str, location: Path, patience: float = RELEASE_PATIENCE_S) -> Any:
    """Open the embedded store at ``location``; while its lock is held by a process that has exited or is
    exiting, wait for the lock's release (up to ``patience`` s); a store open in a live process is a
    ``StoreBusy`` at once, naming that process. A failure with the lock free is tried once more (the lock
    may have been released between the two: ``make test`` saw that) and is then chDB's own error."""
    deadline = time.monotonic() + patience
    unlocked_failures = 0
    waited = False
    while True:
        try:
            client = clickhouse_connect.get_client(dsn=url, tz_mode="aware")
            if waited:
                log.info("store.lock_released", store=str(location))
            return client
        except ProgrammingError as ex:
            holder = lock_holder(location)
            held = locked(location / "status")
            if holder is None or holder == os.getpid() or (held is False and unlocked_failures):
                # not a lock another process holds: chDB's own error says what it is
                log.warning("store.open_failed", store=str(location), holder=holder, locked=held)
                raise
            if held is False:
                unlocked_failures += 1
                continue
            if (alive := _running(holder)) is not None:
                raise StoreBusy(
                    f"the embedded store {location} is open in process {holder} ({alive}); stop that "
                    "process, or use a ClickHouse server (CLICKHOUSE_URL) to share the data"
                ) from ex
            if time.monotonic() > deadline:
                raise StoreBusy(
                    f"the embedded store {location} is still locked {patience:.0f} s after its process "
                    f"{holder} exited ({ex})"
                ) from ex
            if not waited:
                log.info("store.waiting_for_release", store=str(location), holder=holder)
                waited = True
            time.sleep(0.2)


def lock_holder(location: Path) -> int | None:
    """The process id chDB wrote into the store's ``status`` file when it opened it (None without one)."""
    try:
        head = (location / "status").read_text(errors="replace").splitlines()[:1]
    except OSError:
        return None
    if not head or not head[0].startswith("PID:"):
        return None
    try:
        return int(head[0].removeprefix("PID:").strip())
    except ValueError:
        return None


def locked(path: Path) -> bool | None:
    """Whether a ``flock`` is held on ``path`` (by any process), read from ``/proc/locks`` without taking
    one; None where that cannot be told."""
    try:
        st = path.stat()
        table = Path("/proc/locks").read_text()
    except OSError:
        return None
    for line in table.splitlines():
        # "1: FLOCK  ADVISORY  WRITE 3175 fd:01:1234567 0 EOF" ("->" before a waiter's type)
        parts = [p for p in line.split() if p != "->"]
        if len(parts) < 6 or parts[1] != "FLOCK":
            continue
        try:
            major, minor, inode = parts[5].split(":")
            if (int(inode), int(major, 16), int(minor, 16)) == (
                st.st_ino,
                os.major(st.st_dev),
                os.minor(st.st_dev),
            ):
                return True
        except ValueError:
            continue
    return False


def _running(pid: int) -> str | None:
    """The command line of ``pid`` when it is a live process (``runtime.pids.pid_alive``), else None."""
    if not pid_alive(pid):
        return None
    try:
        proc = psutil.Process(pid)
        return " ".join(proc.cmdline())[:200] or proc.name()
    except psutil.Error:
        return None
