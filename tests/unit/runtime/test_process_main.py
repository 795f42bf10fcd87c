"""The one runner of the stack's processes (runtime.process_main) and the status file each keeps
(runtime.process_status), on real child processes; and the supervisor's reading of those files
(society.liveness)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import pytest

from molt_society.runtime import process_status
from molt_society.runtime.process_status import read_status, status_path
from molt_society.society.liveness import OWN_GAP_S, Liveness
from molt_society.society.stack import Child

# A process run by the runner: ready at once, then it waits for its stop (or fails, or blocks its loop).
CHILD = textwrap.dedent(
    """
    import asyncio, sys, time
    from molt_society.runtime import process_status
    from molt_society.runtime.process_main import Entry, serve

    mode = sys.argv[1]

    async def body(started, stop):
        if mode == "fail":
            raise RuntimeError("the body broke")
        process_status.mark_ready(url="http://127.0.0.1:1", society=started.society)
        if mode == "block":
            time.sleep(3600)  # the event loop stops turning
        await stop.wait()

    sys.exit(serve(Entry(role="probe", name="probe"), sys.argv[2:], body))
    """
)


def _start(tmp_path: Path, mode: str, society: str = "probe-s") -> subprocess.Popen[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SOCIETY_", "KAFKA_"))}
    env.update(SOCIETY_STATE_DIR=str(tmp_path), SOCIETY_LOG_JSON="true")
    argv = [sys.executable, "-c", CHILD, mode, "--society", society, "--bootstrap", "127.0.0.1:1"]
    return subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def _wait(what: Any, timeout: float = 60.0) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        got = what()
        if got:
            return got
        time.sleep(0.05)
    raise AssertionError("not within the timeout")


def test_a_process_is_ready_beats_and_removes_its_status_at_a_clean_stop(tmp_path: Path) -> None:
    proc = _start(tmp_path, "ready")
    run_dir = tmp_path / "probe-s"
    try:
        first = _wait(lambda: read_status(run_dir, "probe", proc.pid))
        assert (first.role, first.pid) == ("probe", proc.pid)
        ready = _wait(lambda: (s := read_status(run_dir, "probe", proc.pid)) and s.ready is not None and s)
        assert ready.ready_detail == {"url": "http://127.0.0.1:1", "society": "probe-s"}
        assert ready.started <= ready.ready
        beats = lambda: (s := read_status(run_dir, "probe", proc.pid)) and s.beat > ready.beat + 1 and s  # noqa: E731
        later = _wait(beats)
        assert later.ready == ready.ready  # readiness is said once
    finally:
        proc.send_signal(signal.SIGTERM)
        out, _ = proc.communicate(timeout=60)
    assert proc.returncode == 0, out
    assert not status_path(run_dir, "probe", proc.pid).exists()
    assert '"event": "probe.starting"' in out


def test_a_failing_body_exits_1_saying_why_once_and_leaves_no_status(tmp_path: Path) -> None:
    proc = _start(tmp_path, "fail")
    out, _ = proc.communicate(timeout=60)
    assert proc.returncode == 1, out
    failed = [json.loads(line) for line in out.splitlines() if '"probe.failed"' in line]
    assert [("the body broke" in f["error"]) for f in failed] == [True], out
    assert not status_path(tmp_path / "probe-s", "probe", proc.pid).exists()


def test_a_bad_society_name_is_a_usage_error(tmp_path: Path) -> None:
    proc = _start(tmp_path, "ready", society="../../etc")
    out, _ = proc.communicate(timeout=60)
    assert proc.returncode == 2, out
    assert "error:" in out
    assert not (tmp_path / "status").exists()
    assert not list(tmp_path.rglob("*.json"))


def test_a_blocked_event_loop_stops_the_beat(tmp_path: Path) -> None:
    proc = _start(tmp_path, "block")
    run_dir = tmp_path / "probe-s"
    try:
        ready = _wait(lambda: (s := read_status(run_dir, "probe", proc.pid)) and s.ready is not None and s)
        time.sleep(3 * process_status.BEAT_S)
        still = read_status(run_dir, "probe", proc.pid)
        assert still is not None
        assert still.beat - ready.beat < process_status.BEAT_S + 0.5
    finally:
        proc.kill()
        proc.wait()


# ------------------------------------------------------------------------------------------ liveness
def _child(proc: subprocess.Popen[bytes], spawned_at: float) -> Child:
    return Child("agents", proc, [], Path("/dev/null"), 0, None, spawned_at)


def _beat(run_dir: Path, pid: int, at: float) -> None:
    path = status_path(run_dir, "agents", pid)
    path.parent.mkdir(parents=True, exist_ok=True)
    doc = {"role": "agents", "pid": pid, "started": at, "ready": at, "beat": at, "ready_detail": {}}
    path.write_text(json.dumps(doc))


@pytest.fixture
def sleeper() -> Any:
    proc = subprocess.Popen(["sleep", "600"])
    yield proc
    proc.kill()
    proc.wait()


def test_liveness_says_silent_once_beats_again_then_stalled_once(tmp_path: Path, sleeper: Any) -> None:
    live = Liveness(tmp_path, silence_s=10, stall_s=30)
    child = _child(sleeper, spawned_at=1000.0)
    _beat(tmp_path, sleeper.pid, 1000.0)
    kinds = lambda now: [(c.kind, round(c.silent_s)) for c in live.check([child], now)]  # noqa: E731
    assert kinds(1004) == []
    assert kinds(1008) == []
    assert kinds(1011) == [("silent", 11)]
    assert kinds(1012) == []  # said once
    _beat(tmp_path, sleeper.pid, 1013.0)
    assert kinds(1014) == [("beats_again", 13)]  # silent from 1000 to 1013
    assert kinds(1015) == []
    seen = [(now, kinds(now)) for now in range(1016, 1060)]
    assert [(now, c) for now, c in seen if c] == [(1023, [("silent", 10)]), (1043, [("stalled", 30)])]
    assert live.stalled == {sleeper.pid}


def test_liveness_counts_from_the_spawn_before_the_first_beat_and_skips_exited_children(
    tmp_path: Path, sleeper: Any
) -> None:
    live = Liveness(tmp_path, silence_s=10, stall_s=30)
    never = _child(sleeper, spawned_at=2000.0)  # no status file at all: a process hung before its loop
    done = subprocess.Popen(["true"])
    done.wait()
    exited = _child(done, spawned_at=0.0)
    got = []
    for now in range(2001, 2032):
        got += [(c.kind, c.child.process.pid) for c in live.check([never, exited], float(now))]
    assert got == [("silent", sleeper.pid), ("stalled", sleeper.pid)]


def test_a_gap_in_the_supervisors_own_checks_is_nobodys_silence(tmp_path: Path, sleeper: Any) -> None:
    live = Liveness(tmp_path, silence_s=10, stall_s=30)
    child = _child(sleeper, spawned_at=3000.0)
    _beat(tmp_path, sleeper.pid, 3000.0)
    assert live.check([child], 3001.0) == []
    resumed = 3001.0 + OWN_GAP_S + 100  # the driver was stopped (or the machine suspended) for 105 s
    assert live.check([child], resumed) == []
    seen = [(k, [c.kind for c in live.check([child], resumed + k)]) for k in range(1, 13)]
    assert [(k, c) for k, c in seen if c] == [(10, ["silent"])]  # silent from the end of the gap
