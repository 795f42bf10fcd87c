"""The processes a benchmark runs: spawning and stopping them, noticing that one died, sampling their memory.

A benchmark starts the product's own processes (``python -m molt_society.<role>``, configured by the
environment as ``society.stack`` configures them) with their output in a log per process, and stops every
one of them whatever happens (SIGTERM, then SIGKILL). Memory and CPU are read from outside: psutil for a
process and its children (``RssMonitor``), ``/proc/PID/status`` and ``/proc/PID/stat`` where only the
kernel's own figures will do (``status_kib``, ``cpu_seconds``).
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
import threading
from pathlib import Path

import psutil

REPO = Path(__file__).resolve().parents[2]

FATAL_MARKERS = (b'"event": "processor.stopped"', b"Traceback (most recent call last)")
"""Log lines after which a child that is still running no longer does its job."""


def stop_process(
    proc: subprocess.Popen[bytes], timeout: float = 30.0, sig: signal.Signals = signal.SIGTERM
) -> None:
    """Send ``sig`` to a running ``proc`` and wait ``timeout`` seconds for it; SIGKILL it after that."""
    if proc.poll() is None:
        proc.send_signal(sig)
        try:
            proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


class Children:
    """Child processes of the benchmark, each with its log in ``logs``; stopped with SIGTERM, then SIGKILL."""

    def __init__(self, logs: Path) -> None:
        self.logs = logs
        self.procs: list[tuple[str, subprocess.Popen[bytes]]] = []
        self.scanned: dict[str, int] = {}

    def spawn(
        self, name: str, argv: list[str], env: dict[str, str], *, stdout_pipe: bool = False
    ) -> subprocess.Popen[bytes]:
        """Start ``argv`` as ``name``: output to its log (with ``stdout_pipe``, stdout to a pipe)."""
        log_path = self.log_path(name)
        with log_path.open("ab") as out:
            proc = subprocess.Popen(
                argv,
                cwd=REPO,
                env=env,
                stdout=subprocess.PIPE if stdout_pipe else out,
                stderr=out if stdout_pipe else subprocess.STDOUT,
            )
        self.procs.append((name, proc))
        return proc

    def log_path(self, name: str) -> Path:
        return self.logs / f"{re.sub(r'[^a-z0-9]+', '-', name.lower()).strip('-')}.log"

    def forget(self, proc: subprocess.Popen[bytes]) -> None:
        """No longer stop ``proc`` with the others (it was stopped)."""
        self.procs = [(n, p) for n, p in self.procs if p is not proc]

    def stop(
        self, proc: subprocess.Popen[bytes], timeout: float = 30.0, sig: signal.Signals = signal.SIGTERM
    ) -> None:
        stop_process(proc, timeout, sig)
        self.forget(proc)

    def stop_all(self) -> None:
        for _, proc in list(reversed(self.procs)):
            self.stop(proc, timeout=15.0)

    def check(self, proc: subprocess.Popen[bytes]) -> None:
        """Raise if ``proc`` has exited, or its log shows that its main service died (a Faust worker
        whose processor service crashed keeps running without consuming)."""
        name = next((n for n, p in self.procs if p is proc), "child")
        if proc.poll() is not None:
            raise RuntimeError(f"{name} exited with code {proc.returncode}: {self.tail(name)}")
        path = self.log_path(name)
        offset = self.scanned.get(name, 0)
        with contextlib.suppress(OSError), path.open("rb") as f:
            f.seek(offset)
            data = f.read()
            end = data.rfind(b"\n") + 1
            self.scanned[name] = offset + end
            for marker in FATAL_MARKERS:
                if marker in data[:end]:
                    raise RuntimeError(f"{name} failed ({marker.decode()}): {self.tail(name, 8)}")

    def tail(self, name: str, lines: int = 5) -> str:
        """The last ``lines`` lines of ``name``'s log, on one line."""
        path = self.log_path(name)
        if not path.exists():
            return ""
        return " | ".join(path.read_text(errors="replace").strip().splitlines()[-lines:])


class RssMonitor(threading.Thread):
    """Peak RSS and CPU time (process + children) of tracked processes, sampled every ``interval`` s."""

    def __init__(self, interval: float = 0.5) -> None:
        super().__init__(daemon=True, name="rss-monitor")
        self.interval = interval
        self.tracked: dict[str, psutil.Process] = {}
        self.peak: dict[str, int] = {}
        self.last: dict[str, int] = {}
        self.cpu: dict[str, float] = {}  # cumulative user + system seconds at the last sample
        self.lock = threading.Lock()
        self.halt = threading.Event()

    def track(self, key: str, pid: int) -> None:
        with self.lock:
            self.tracked[key] = psutil.Process(pid)
            self.peak[key] = 0
            self.cpu[key] = 0.0
        self.sample()

    def untrack(self, key: str) -> None:
        self.sample()
        with self.lock:
            self.tracked.pop(key, None)

    def sample(self) -> None:
        with self.lock:
            items = list(self.tracked.items())
        for key, proc in items:
            try:
                procs = [proc, *proc.children(recursive=True)]
                rss = 0
                cpu = 0.0
                for p in procs:
                    with contextlib.suppress(psutil.Error):
                        rss += p.memory_info().rss
                        t = p.cpu_times()
                        cpu += t.user + t.system
            except psutil.Error:
                continue
            with self.lock:
                if rss:
                    self.last[key] = rss
                    self.peak[key] = max(self.peak.get(key, 0), rss)
                    self.cpu[key] = max(self.cpu.get(key, 0.0), cpu)

    def run(self) -> None:
        while not self.halt.wait(self.interval):
            self.sample()


def status_kib(pid: int, key: str) -> int | None:
    """A ``kB`` figure of ``/proc/PID/status`` (``VmRSS``, ``VmHWM``, ...); None if unreadable."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith(key + ":"):
                return int(line.split()[1])
    except (OSError, ValueError):
        return None
    return None


def cpu_seconds(pid: int) -> float | None:
    """User + system CPU seconds of a process (``/proc/PID/stat``)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError):
        return None
