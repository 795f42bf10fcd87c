"""Opening the embedded store while chDB's own lock on it is held: by a live process, a clear error naming
it; by a process that has exited while something still holds its lock (a killed process whose last threads
are still closing their files), a wait until the lock is released."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from molt_society.warehouse.client import StoreBusy, connect, lock_holder, locked

HOLD = """
import os, sys, time
import chdb
conn = chdb.connect(sys.argv[1])
conn.query("CREATE TABLE IF NOT EXISTS t (x Int32) ENGINE = MergeTree ORDER BY x")
if sys.argv[2] == "fork":  # a child that shares the open lock file, then the opener exits
    child = os.fork()
    if child == 0:
        time.sleep(120)
        os._exit(0)
    print(child, flush=True)
    os._exit(0)
print(os.getpid(), flush=True)
time.sleep(120)
"""


def _hold(path: Path, mode: str) -> tuple[subprocess.Popen[str], int]:
    proc = subprocess.Popen(
        [sys.executable, "-c", HOLD, str(path), mode],
        stdout=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    assert proc.stdout is not None
    return proc, int(proc.stdout.readline())


@pytest.fixture
def group() -> Iterator[list[int]]:
    pids: list[int] = []
    yield pids
    for pid in pids:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(pid, signal.SIGKILL)


def test_a_store_open_in_a_live_process_is_refused_naming_it(tmp_path: Path, group: list[int]) -> None:
    store = tmp_path / "ch"
    proc, pid = _hold(store, "hold")
    group.append(proc.pid)
    assert lock_holder(store) == pid
    assert locked(store / "status") is True
    started = time.monotonic()
    with pytest.raises(StoreBusy, match=f"open in process {pid}"):
        connect(f"chdb://{store}")
    assert time.monotonic() - started < 10  # at once, not after the release patience
    proc.kill()
    proc.wait()
    deadline = time.monotonic() + 30
    while locked(store / "status") and time.monotonic() < deadline:
        time.sleep(0.05)
    assert locked(store / "status") is False
    client = connect(f"chdb://{store}")  # free once its holder is gone
    assert client.command("SELECT count() FROM t") == 0
    client.close()


def test_a_lock_outliving_its_exited_opener_is_waited_for(tmp_path: Path, group: list[int]) -> None:
    store = tmp_path / "ch"
    proc, child = _hold(store, "fork")
    group.append(proc.pid)
    proc.wait()  # the opener has exited; its child still holds the lock
    assert lock_holder(store) == proc.pid
    assert proc.pid != child

    def release() -> None:
        time.sleep(2)
        os.kill(child, signal.SIGKILL)

    threading.Thread(target=release, daemon=True).start()
    started = time.monotonic()
    client = connect(f"chdb://{store}")
    waited = time.monotonic() - started
    assert client.command("SELECT count() FROM t") == 0
    client.close()
    assert waited >= 1.5  # it waited for the release rather than failing
