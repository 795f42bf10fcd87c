"""A stack whose driver died, and stopping a running one: ``clear_stale_stack`` finds a ``stack.json``
whose driver is dead, stops any survivor and removes the stale state (``society status``, ``society run``,
``society stop``); ``check_no_live_stack`` refuses to start beside a live one; ``stop_stack`` is
``society stop``.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from molt_society.runtime.pids import pid_alive
from molt_society.runtime.process_status import STATUS_DIR
from molt_society.runtime.settings import Settings
from molt_society.runtime.stack_state import read_state, state_path
from molt_society.society.stack import Journal, StackBusy


def _recorded(state: dict[str, Any]) -> list[tuple[str, int, int | None]]:
    """(label, pid, start time) of every process a stack.json names, the broker last."""
    out: list[tuple[str, int, int | None]] = []
    for p in state.get("processes") or []:
        with contextlib.suppress(KeyError, TypeError, ValueError):
            out.append((f"{p['role']} (pid {int(p['pid'])})", int(p["pid"]), p.get("start")))
    for key in ("model_server", "broker"):
        doc = state.get(key)
        if isinstance(doc, dict) and isinstance(doc.get("pid"), int):
            out.append((f"{key.replace('_', ' ')} (pid {doc['pid']})", doc["pid"], doc.get("start")))
    return out


def driver_of(state: dict[str, Any]) -> tuple[int, int | None] | None:
    """(pid, start time) of the process that drives the stack of ``state``, if recorded."""
    d = state.get("driver")
    if isinstance(d, dict) and isinstance(d.get("pid"), int):
        start = d.get("start")
        return d["pid"], start if isinstance(start, int) else None
    return None


def driver_alive(state: dict[str, Any]) -> bool:
    """True while the driver of ``state`` runs (a stack.json without one: while any of its processes runs)."""
    driver = driver_of(state)
    if driver is not None:
        return pid_alive(*driver)
    return any(pid_alive(pid, start) for _, pid, start in _recorded(state))


def terminate(procs: list[tuple[str, int, int | None]], grace: float = 15.0) -> list[str]:
    """SIGTERM (SIGKILL after ``grace`` s) the processes (not our children) that still run; their labels."""
    alive = [p for p in procs if pid_alive(p[1], p[2])]
    for _, pid, _ in alive:
        for sig in (signal.SIGTERM, signal.SIGCONT):
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, sig)
    deadline = time.monotonic() + grace
    while time.monotonic() < deadline and any(pid_alive(pid, start) for _, pid, start in alive):
        time.sleep(0.1)
    for _, pid, start in alive:
        if pid_alive(pid, start):
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline and any(pid_alive(pid, start) for _, pid, start in alive):
        time.sleep(0.1)
    return [label for label, _, _ in alive]


@dataclass(frozen=True)
class StaleStack:
    """A stack.json whose driver died; its survivors have been stopped and the state removed."""

    society: str
    driver_pid: int | None
    died_at: float
    stopped: list[str]

    def describe(self) -> str:
        who = f"(pid {self.driver_pid})" if self.driver_pid is not None else "(pid not recorded)"
        when = datetime.fromtimestamp(self.died_at).strftime("%Y-%m-%d %H:%M:%S")
        msg = (
            f"the driver of society {self.society} {who} died at {when} (its last sign of life); "
            "its processes were stopped"
        )
        if self.stopped:
            msg += f" ({len(self.stopped)} still ran and were stopped now: {', '.join(self.stopped)})"
        return msg + (f" and its stale state removed; continue it with: society run --resume {self.society}")


def clear_stale_stack(settings: Settings) -> StaleStack | None:
    """If ``stack.json`` names a dead driver: stop its survivors, remove the state, say what it was."""
    state = read_state(settings)
    if not state or driver_alive(state):
        return None
    path = state_path(settings)
    try:
        died_at = path.stat().st_mtime
    except OSError:
        died_at = time.time()
    stopped = terminate(_recorded(state))
    society = str(state.get("society", "?"))
    for name in ("sink.json", "dashboard.json"):
        f = settings.state_dir / society / name
        with contextlib.suppress(OSError, ValueError):
            pid = json.loads(f.read_text()).get("pid")
            if not (isinstance(pid, int) and pid_alive(pid)):
                f.unlink()
    for f in (settings.state_dir / society / STATUS_DIR).glob("*.json"):
        with contextlib.suppress(OSError, ValueError):
            if not pid_alive(int(f.stem.rpartition("-")[2])):
                f.unlink()
    with contextlib.suppress(OSError):
        path.unlink()
    driver = driver_of(state)
    stale = StaleStack(society, driver[0] if driver else None, died_at, stopped)
    Journal(settings.state_dir / society / "run.log")(
        "stack.stale_cleared", level="warning", message=stale.describe()
    )
    return stale


def check_no_live_stack(settings: Settings) -> StaleStack | None:
    """Before starting a stack: clear a stale one (returned, to be told); refuse a live one (StackBusy)."""
    stale = clear_stale_stack(settings)
    state = read_state(settings)
    if state:
        driver = driver_of(state)
        raise StackBusy(
            f"society {state.get('society')} already runs here (driver pid "
            f"{driver[0] if driver else '?'}, state {state_path(settings)}); stop it with "
            "`society stop`, or use another SOCIETY_STATE_DIR"
        )
    return stale


def stop_stack(settings: Settings, timeout: float, say: Callable[[str], None]) -> int:
    """``society stop``: SIGTERM the driver (it drains, flushes and stops its stack), SIGKILL it after
    ``timeout`` s; then clear whatever is left. Returns the exit code (1: nothing ran)."""
    stale = clear_stale_stack(settings)
    if stale is not None:
        say(stale.describe())
        return 0
    state = read_state(settings)
    driver = driver_of(state) if state else None
    if not state or driver is None:
        say(f"no running stack here (no driver in {state_path(settings)})")
        return 1
    pid, start = driver
    society = state.get("society")
    say(f"stopping society {society}: SIGTERM to its driver (pid {pid}); it drains, flushes and stops ...")
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and pid_alive(pid, start):
        time.sleep(0.2)
    if pid_alive(pid, start):
        say(f"the driver did not stop within {timeout:.0f} s: killing it (its processes get SIGTERM)")
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
        while pid_alive(pid, start):
            time.sleep(0.1)
    left = clear_stale_stack(settings)
    if left is not None and left.stopped:
        say(f"stopped what was left: {', '.join(left.stopped)}")
    survivors = [label for label, p, st in _recorded(state) if pid_alive(p, st)]
    if survivors:
        say(f"still running: {', '.join(survivors)}")
        return 1
    say(f"society {society} stopped; nothing of it runs any more")
    return 0
