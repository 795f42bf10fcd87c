"""Which of a stack's running children stopped beating in their status files (``runtime.process_status``).

A child's event loop beats every 2 s. One whose last beat (or, before its first, its spawn) is
``silence_s`` old is *silent*: said once, shown while it lasts, and said again when it beats again. One
silent for ``stall_s`` is *stalled*: the supervisor kills it, and restarts it as any child that died
(``society.supervisor``). A stopped process (SIGSTOP), a loop blocked in a call that never returns, a
process that hangs before its loop runs: each is noticed this way, where a log line would never come.

Time the supervisor itself did not run (a suspended machine, a driver stopped and continued) is nobody's
silence: after a gap in its own checks every child's silence counts from the end of that gap.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from molt_society.runtime.process_status import read_status
from molt_society.society.stack import Child

CHECK_S = 1.0
OWN_GAP_S = 5.0  # a gap this long between the supervisor's own checks restarts every child's silence

Kind = Literal["silent", "beats_again", "stalled"]


@dataclass(frozen=True)
class Change:
    kind: Kind
    child: Child
    silent_s: float


class Liveness:
    def __init__(self, run_dir: Path, silence_s: float, stall_s: float) -> None:
        self.run_dir = run_dir
        self.silence_s = silence_s
        self.stall_s = max(stall_s, silence_s)
        self.silent: dict[int, float] = {}  # pid -> its last sign of life, while its silence is said
        self.stalled: set[int] = set()  # said once each
        self._last_check: float | None = None  # wall time of the previous check
        self._counted_from = 0.0  # silences count from here at the earliest (after a gap of our own)

    def check(self, children: Iterable[Child], now: float) -> list[Change]:
        """What changed since the last check, for the running ``children`` (time ``now``, epoch s); nothing
        is read sooner than ``CHECK_S`` after the last check (the supervisor polls more often; a child beats
        every 2 s)."""
        if self._last_check is not None and now - self._last_check < CHECK_S:
            return []
        if self._last_check is not None and now - self._last_check > OWN_GAP_S:
            self._counted_from = now
        self._last_check = now
        changes: list[Change] = []
        running: set[int] = set()
        for child in children:
            pid = child.process.pid
            if child.process.poll() is not None:
                continue
            running.add(pid)
            status = read_status(self.run_dir, child.role, pid)
            last = max(status.beat if status is not None else child.spawned_at, self._counted_from)
            silent = max(0.0, now - last)
            if silent >= self.stall_s:
                if pid not in self.stalled:
                    self.stalled.add(pid)
                    self.silent.pop(pid, None)
                    changes.append(Change("stalled", child, silent))
            elif silent >= self.silence_s:
                if pid not in self.silent:
                    self.silent[pid] = last
                    changes.append(Change("silent", child, silent))
            elif pid in self.silent:
                changes.append(Change("beats_again", child, last - self.silent.pop(pid)))
        self.silent = {p: t for p, t in self.silent.items() if p in running}
        self.stalled &= running
        return changes
