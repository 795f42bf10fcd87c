"""What one run of ``bench.pipeline`` measured: a figure per stage, the latency, memory and CPU, and the
state of the source code it measured (others may edit it while the benchmark runs)."""

from __future__ import annotations

import contextlib
import hashlib
from dataclasses import dataclass, field
from datetime import datetime

from molt_society.bench.dataset import Dataset
from molt_society.bench.processes import REPO

TARGET_REPLAY_EVENTS = 1_000_000
TARGET_REPLAY_S = 60.0


@dataclass
class Stage:
    """One throughput figure."""

    key: str
    label: str
    events: int = 0
    seconds: float = 0.0
    note: str = ""
    error: str | None = None

    @property
    def rate(self) -> float | None:
        if self.error is not None or self.seconds <= 0:
            return None
        return self.events / self.seconds


@dataclass
class LatencyResult:
    windows: int = 0
    p50: float | None = None
    p99: float | None = None
    max: float | None = None
    seen_p50: float | None = None
    seen_p99: float | None = None
    seen_max: float | None = None
    vs_last_p50: float | None = None
    vs_last_p99: float | None = None
    produced: int = 0
    seconds: float = 0.0
    error: str | None = None


@dataclass
class Memory:
    peak: dict[str, int] = field(default_factory=dict)
    final: dict[str, int] = field(default_factory=dict)
    cpu: dict[str, float] = field(default_factory=dict)  # CPU seconds used during the end-to-end stage
    e2e_seconds: float = 0.0


@dataclass
class Run:
    started: datetime
    command: str
    events: int
    quick: bool
    machine: dict[str, str]
    load_before: tuple[float, float, float]
    load_after: tuple[float, float, float] | None = None
    dataset: Dataset | None = None
    stages: dict[str, Stage] = field(default_factory=dict)
    latency: LatencyResult = field(default_factory=LatencyResult)
    memory: Memory = field(default_factory=Memory)
    profile: list[tuple[str, float]] = field(default_factory=list)
    profile_inclusive: list[tuple[str, float]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    code: dict[str, tuple[str, float]] = field(default_factory=dict)  # path -> (sha256, mtime) at start
    code_changed: list[tuple[str, float]] = field(default_factory=list)  # (path, mtime) changed during run
    stage_started: dict[str, float] = field(default_factory=dict)


CODE_DIRS = ("schemas", "agents", "streams", "sinks", "society")


def code_state() -> dict[str, tuple[str, float]]:
    """Hash and mtime of the pipeline's source files (others may edit them while the benchmark runs)."""
    out: dict[str, tuple[str, float]] = {}
    for d in CODE_DIRS:
        for path in sorted((REPO / "molt_society" / d).rglob("*")):
            if path.suffix in (".py", ".sql", ".toml") and path.is_file():
                with contextlib.suppress(OSError):
                    data = path.read_bytes()
                    out[str(path.relative_to(REPO))] = (
                        hashlib.sha256(data).hexdigest(),
                        path.stat().st_mtime,
                    )
    return out


def code_fingerprint(state: dict[str, tuple[str, float]]) -> str:
    h = hashlib.sha256()
    for path, (digest, _) in sorted(state.items()):
        h.update(f"{path}:{digest}\n".encode())
    return h.hexdigest()[:12]


def code_changes(before: dict[str, tuple[str, float]]) -> list[tuple[str, float]]:
    """(path, mtime) of every source file changed since ``before`` (``code_state``); mtime 0 if deleted."""
    after = code_state()
    changed = sorted(
        (path, mtime) for path, (digest, mtime) in after.items() if before.get(path, ("", 0.0))[0] != digest
    )
    return changed + [(path, 0.0) for path in sorted(set(before) - set(after))]


def replay_verdict(st: Stage | None) -> bool | None:
    """Whether the replay stage met 1,000,000 events in < 60 s (at its rate, when N is not 1,000,000)."""
    if st is None or st.rate is None:
        return None
    return st.rate * TARGET_REPLAY_S > TARGET_REPLAY_EVENTS
