"""The local stack: broker, stream workers, sink and agent workers as child processes of one command.

``LocalStack.start`` starts the local broker (``SOCIETY_BROKER``: Apache Kafka by default, or Tansu) unless
``KAFKA_BOOTSTRAP`` names a cluster, creates the society's topics, then starts the sink, the stream workers
and the agent workers, each a separate Python process configured through the same environment variables
as ``Settings``. A society with LLM agents and no ``SOCIETY_LLM_BASE_URL`` also gets the local model server
(``society.model_server``). It writes ``<state_dir>/stack.json`` (the driver's pid, the broker's and every
child's, with their start times) so ``society sql``, ``society status`` and ``society stop`` can find the
running stack.

Faults:

- Every child and the broker get SIGTERM from the kernel when the driver dies (``child_preexec``), so a
  SIGKILLed driver leaves no orphan; ``society.stale_stack`` finds a ``stack.json`` whose driver is dead,
  stops any survivor and removes the stale state (``society status``, ``society run``, ``society stop``).
- ``society.supervisor.Supervisor`` (run by ``society run``) watches the children and the broker and
  restarts what dies; what the supervision sees and does goes to ``<run>/run.log`` (``Journal``, here).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from molt_society.runtime.broker import child_preexec, ensure_topics
from molt_society.runtime.brokers import Broker, start_broker
from molt_society.runtime.logs import get_logger
from molt_society.runtime.pids import process_start_time
from molt_society.runtime.process_status import forget_status
from molt_society.runtime.settings import Settings
from molt_society.runtime.stack_state import state_path
from molt_society.society.model_server import LocalModelServer

log = get_logger(__name__)

PIPELINE_NICE = 10
SUPERVISED = ("sinks", "streams", "agents", "dashboard")  # every child role the supervisor restarts
_ALIASES = {"kafka_bootstrap": "KAFKA_BOOTSTRAP", "clickhouse_url": "CLICKHOUSE_URL"}


def settings_env(settings: Settings, **overrides: Any) -> dict[str, str]:
    """Environment variables that reproduce ``settings`` (plus overrides) in a child process."""
    env = dict(os.environ)
    values = settings.model_dump()
    values.update(overrides)
    for name, value in values.items():
        if value is None:
            continue
        key = _ALIASES.get(name, f"SOCIETY_{name.upper()}")
        env[key] = str(value).lower() if isinstance(value, bool) else str(value)
    return env


ROLE_NAMES = {
    "sinks": "the sink",
    "streams": "stream worker",
    "agents": "agent worker",
    "dashboard": "the dashboard",
}
RESTART_MARK = "supervisor.restarted"  # the line the supervisor writes into a child's log before a restart


def describe_exit(code: int) -> str:
    """``exited with code 1`` or ``was killed by SIGKILL`` for a ``Popen.returncode``."""
    if code < 0:
        try:
            return f"was killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"was killed by signal {-code}"
    return f"exited with code {code}"


_ERROR_LEVELS = {"error", "critical", "exception", "fatal"}
_ERROR_WORDS = ("Error", "Exception", "Traceback", "error:", "FATAL", "panicked")


def last_error_line(path: Path, limit: int = 300, tail_bytes: int = 64 * 1024) -> str | None:
    """The last error in a child's log since its last (re)start: a JSON record at level error or above (its
    event and error), else the last plain line that looks like one (a traceback's last line, a Rust panic)."""
    try:
        with open(path, "rb") as f:
            f.seek(0, os.SEEK_END)
            f.seek(max(0, f.tell() - tail_bytes))
            data = f.read()
    except OSError:
        return None
    for raw in reversed(data.decode(errors="replace").splitlines()):
        line = raw.strip()
        if not line:
            continue
        if line.startswith("{"):
            try:
                doc = json.loads(line)
            except ValueError:
                doc = None
            if isinstance(doc, dict):
                if doc.get("event") == RESTART_MARK:
                    return None  # older lines belong to the previous process
                if str(doc.get("level", "")).lower() in _ERROR_LEVELS:
                    detail = str(doc.get("error") or doc.get("exception") or doc.get("message") or "").strip()
                    event = str(doc.get("event", ""))
                    text = f"{event}: {detail.splitlines()[-1]}" if detail else event or line
                    return text[:limit]
                continue
        if any(w in line for w in _ERROR_WORDS):
            return line[:limit]
    return None


class Journal:
    """What the stack's supervision saw and did: JSON lines in ``<run>/run.log`` (``ts`` is the epoch time,
    for measuring recoveries) and the same record in the process's structured log."""

    def __init__(self, path: Path | None) -> None:
        self.path = path

    def __call__(self, event: str, level: str = "info", **fields: Any) -> None:
        if self.path is not None:
            now = time.time()
            rec = {
                "timestamp": datetime.fromtimestamp(now).astimezone().isoformat(timespec="milliseconds"),
                "ts": round(now, 3),
                "level": level,
                "event": event,
                **fields,
            }
            with contextlib.suppress(OSError):
                self.path.parent.mkdir(parents=True, exist_ok=True)
                with open(self.path, "a") as f:
                    f.write(json.dumps(rec, default=str) + "\n")
        # at info in the process's log: the console already has the run's own words for it (``society run``)
        log.info(event, severity=level, **fields)


class StackFailed(RuntimeError):
    """The stack cannot go on (a role restarted too often, the broker was lost); the message says why."""


class BrokerLost(StackFailed):
    """The local broker's process exited for good: Tansu, which kept the society's topics in memory only,
    or an Apache Kafka that exited ``restart_limit`` times within the restart window."""

    def __init__(self, bootstrap: str, pid: int, status: int, at: float, kind: str = "tansu") -> None:
        self.bootstrap, self.pid, self.status, self.at = bootstrap, pid, status, at
        when = f"{datetime.fromtimestamp(at):%H:%M:%S}"
        if kind == "kafka":
            why = (
                f"the broker at {bootstrap} (Apache Kafka, pid {pid}) {describe_exit(status)} at {when}, "
                "again after every restart within the restart window; the society cannot go on on it"
            )
        else:
            why = (
                f"the broker at {bootstrap} (Tansu, pid {pid}) {describe_exit(status)} at {when}; it kept "
                "the society's topics in memory only, so they are gone and the society cannot go on"
            )
        super().__init__(why + ". Every event stored so far is in ClickHouse")


class StackBusy(RuntimeError):
    """Another live driver owns this state directory's stack."""


BrokerLostHook = Callable[["LocalStack", BrokerLost], int]
"""Called by ``society.run.run_society`` (main thread, no event loop running, no supervisor) when the local
broker was lost: it must leave a working broker, the society's topics and children in the stack (e.g.
``society.recover.rebuild``), and return the tick the clock continues from; raising stops the run."""


@dataclass
class Child:
    role: str
    process: subprocess.Popen[bytes]
    argv: list[str]
    log_path: Path
    index: int = 0
    start_time: int | None = None  # /proc start time: tells this process from a later one with its pid
    spawned_at: float = field(default_factory=time.time)

    @property
    def label(self) -> str:
        name = ROLE_NAMES.get(self.role, self.role)
        return name if name.startswith("the ") else f"{name} {self.index}"


def role_argv(role: str, society: str, bootstrap: str) -> list[str]:
    """The command of one of the stack's processes (``sinks``, ``streams``, ``agents``, ``dashboard``)."""
    return [sys.executable, "-m", f"molt_society.{role}", "--society", society, "--bootstrap", bootstrap]


@dataclass
class LocalStack:
    settings: Settings
    society: str
    stream_workers: int = 1
    agent_workers: int = 1
    broker: Broker | None = None
    bootstrap: str = ""
    children: list[Child] = field(default_factory=list)
    model_server: LocalModelServer | None = None
    nice: int = 0  # CPU niceness of the broker and the pipeline's processes (see start)
    supervised: bool = False  # a Supervisor restarts children: a dead sink is waited for, not an error
    restarts: dict[str, int] = field(default_factory=dict)
    driver_pid: int = field(default_factory=os.getpid)
    started_at: float = field(default_factory=time.time)
    _journal: Journal | None = None

    @property
    def run_dir(self) -> Path:
        return self.settings.state_dir / self.society

    @property
    def state_path(self) -> Path:
        return state_path(self.settings)

    @property
    def journal(self) -> Journal:
        """The run's own log, ``<run>/run.log`` (see ``Journal``)."""
        if self._journal is None:
            self._journal = Journal(self.run_dir / "run.log")
        return self._journal

    def start(self, *, agents: bool = True, dashboard: bool = False) -> None:
        """Start everything. With a local model server on the same cores (LLM agents and no
        ``SOCIETY_LLM_BASE_URL``), the model server starts first and the broker and the pipeline's
        processes run at nice +10, so that they do not preempt its compute threads (BENCHMARKS.md).

        Call it from the main thread: the children are tied to the thread that forks them
        (``runtime.broker.child_preexec``)."""
        self.run_dir.mkdir(parents=True, exist_ok=True)
        if agents and self.settings.llm_agents and not self.settings.llm_base_url:
            log_file = self.run_dir / "model-server.log"
            self.model_server = LocalModelServer.from_settings(self.settings, log_file).start()
            self.nice = max(self.nice, PIPELINE_NICE)
        if self.settings.kafka_bootstrap:
            self.bootstrap = self.settings.kafka_bootstrap
        else:
            self.broker = start_broker(self.settings, self.run_dir, nice=self.nice)
            self.bootstrap = self.broker.bootstrap
            kind = self.settings.broker
            self.journal("stack.broker_started", bootstrap=self.bootstrap, pid=self.broker.pid, kind=kind)
        self.write_state()
        asyncio.run(
            ensure_topics(
                self.bootstrap,
                self.society,
                self.settings.partitions,
                self.settings.shards,
                self.settings.replication,
            )
        )
        self.journal("stack.topics_created", bootstrap=self.bootstrap)
        self.spawn("sinks")
        for _ in range(self.stream_workers):
            self.spawn("streams")
        if agents:
            for _ in range(self.agent_workers):
                self.spawn("agents")
        if dashboard:
            with contextlib.suppress(FileNotFoundError):
                (self.run_dir / "dashboard.json").unlink()
            if self.settings.chdb_path is not None:
                self.sink_url()  # the dashboard then reads through the sink, never opening chDB itself
            self.spawn("dashboard")
        self.write_state()

    def _popen(self, role: str, index: int, log_path: Path) -> Child:
        argv = role_argv(role, self.society, self.bootstrap)
        extra: dict[str, Any] = {}
        if self.model_server is not None:
            extra["llm_base_url"] = self.model_server.base_url
        env = settings_env(self.settings, state_dir=self.settings.state_dir.resolve(), log_json=True, **extra)
        with open(log_path, "ab") as out:
            proc = subprocess.Popen(
                argv, stdout=out, stderr=subprocess.STDOUT, env=env, preexec_fn=child_preexec(self.nice)
            )
        return Child(role, proc, argv, log_path, index, process_start_time(proc.pid))

    def spawn(self, role: str) -> Child:
        """Start one more process of ``role`` (sinks, streams, agents or dashboard)."""
        n = sum(1 for c in self.children if c.role == role)
        child = self._popen(role, n, self.run_dir / f"{role}-{n}.log")
        self.children.append(child)
        self.journal("stack.spawned", role=role, index=n, pid=child.process.pid, log=str(child.log_path))
        return child

    def respawn(self, old: Child, reason: str) -> Child:
        """Start a process in place of ``old`` (which exited), appending to its log; updates stack.json."""
        now = time.time()
        mark = {"timestamp": datetime.fromtimestamp(now).astimezone().isoformat(), "level": "warning"}
        mark.update(event=RESTART_MARK, previous_pid=str(old.process.pid), reason=reason)
        with contextlib.suppress(OSError), open(old.log_path, "a") as f:
            f.write(json.dumps(mark) + "\n")
        if old.role == "sinks":  # a killed sink leaves its sink.json behind: nobody must query a dead port
            self._forget(self.run_dir / "sink.json", old.process.pid)
        elif old.role == "dashboard":
            self._forget(self.run_dir / "dashboard.json", None)
        new = self._popen(old.role, old.index, old.log_path)
        self.children[self.children.index(old)] = new
        self.restarts[old.role] = self.restarts.get(old.role, 0) + 1
        self.write_state()
        return new

    @staticmethod
    def _forget(path: Path, pid: int | None) -> None:
        with contextlib.suppress(OSError, ValueError):
            if pid is None or json.loads(path.read_text()).get("pid") == pid:
                path.unlink()

    def write_state(self) -> None:
        """Write ``stack.json``: who drives the stack, the broker and every child, with their start times."""
        state: dict[str, Any] = {
            "society": self.society,
            "bootstrap": self.bootstrap,
            "started_at": self.started_at,
            "driver": {"pid": self.driver_pid, "start": process_start_time(self.driver_pid)},
            "processes": [
                {
                    "role": c.role,
                    "pid": c.process.pid,
                    "start": c.start_time,
                    "log": str(c.log_path),
                    "index": c.index,
                }
                for c in self.children
            ],
            "restarts": self.restarts,
        }
        if self.broker is not None:
            state["broker"] = {"pid": self.broker.pid, "start": process_start_time(self.broker.pid)}
        if self.model_server is not None:
            state["model_server"] = {"url": self.model_server.base_url, "pid": self.model_server.pid}
        path = self.state_path
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(".json.tmp")
        tmp.write_text(json.dumps(state, indent=2))
        tmp.replace(path)

    def heartbeat(self) -> None:
        """Touch ``stack.json``: its modification time is the driver's last sign of life."""
        with contextlib.suppress(OSError):
            os.utime(self.state_path)

    def current_sink_url(self) -> str | None:
        """The URL in ``sink.json`` if the running sink process wrote it (no waiting, no request)."""
        try:
            doc = json.loads((self.run_dir / "sink.json").read_text())
            url, pid = str(doc["url"]), doc.get("pid")
        except (OSError, ValueError, KeyError, TypeError):
            return None
        sinks = [c for c in self.children if c.role == "sinks"]
        if (
            sinks
            and pid is not None
            and all(c.process.pid != pid or c.process.poll() is not None for c in sinks)
        ):
            return None  # written by a sink that has died since
        return url

    def _sink_exited(self) -> Child | None:
        sink = next((c for c in self.children if c.role == "sinks"), None)
        if sink is not None and sink.process.poll() is not None and not self.supervised:
            return sink
        return None

    def _sink_url_now(self) -> str | None:
        """The sink's URL if it is up, None while it is starting; raises if it exited unsupervised."""
        url = self.current_sink_url()
        if url is None and (sink := self._sink_exited()) is not None:
            raise RuntimeError(f"the sink exited with code {sink.process.returncode}; see {sink.log_path}")
        return url

    def sink_url(self, timeout: float = 60.0) -> str:
        """The sink's query URL, once it is up (an exited sink is an error unless a Supervisor runs)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            url = self._sink_url_now()
            if url is not None:
                return url
            time.sleep(0.1)
        raise TimeoutError(f"the sink did not come up within {timeout:.0f} s")

    async def wait_sink_url(self, timeout: float = 60.0) -> str:
        """``sink_url`` without blocking the event loop."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            url = self._sink_url_now()
            if url is not None:
                return url
            await asyncio.sleep(0.1)
        raise TimeoutError(f"the sink did not come up within {timeout:.0f} s")

    def dashboard_url(self, timeout: float = 30.0) -> str | None:
        """The dashboard's URL once it listens (None if the stack has no dashboard or it failed)."""
        child = next((c for c in self.children if c.role == "dashboard"), None)
        if child is None:
            return None
        path = self.run_dir / "dashboard.json"
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if path.exists():
                with contextlib.suppress(ValueError, KeyError, OSError):
                    return str(json.loads(path.read_text())["url"])
            if child.process.poll() is not None:
                return None
            time.sleep(0.1)
        return None

    def dead_children(self) -> list[Child]:
        """Pipeline processes that exited (the dashboard is not one: the society runs on without it)."""
        return [c for c in self.children if c.role != "dashboard" and c.process.poll() is not None]

    def stop_role(self, role: str, timeout: float = 30.0) -> None:
        procs = [c.process for c in self.children if c.role == role and c.process.poll() is None]
        for p in procs:
            p.send_signal(signal.SIGTERM)
            p.send_signal(signal.SIGCONT)  # a stopped (SIGSTOP) process handles its SIGTERM now
        deadline = time.monotonic() + timeout
        for p in procs:
            try:
                p.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                self.journal("stack.killed", role=role, pid=p.pid, after_s=timeout)
                p.kill()
                p.wait()

    def stop_children(self, timeout: float = 30.0, together: bool = True) -> None:
        """Stop every child: SIGTERM (a stopped one also gets SIGCONT), SIGKILL after ``timeout`` s.

        ``together``: all at once (when the broker is gone the order buys nothing, and each would wait for
        it). Else role by role: the dashboard, the agents, the stream workers, then the sink (which flushes
        and commits what the others produced), each with its own ``timeout``."""
        if together:
            running = [c for c in self.children if c.process.poll() is None]
            for child in running:
                child.process.send_signal(signal.SIGTERM)
                child.process.send_signal(signal.SIGCONT)
            deadline = time.monotonic() + timeout
            while time.monotonic() < deadline and any(c.process.poll() is None for c in running):
                time.sleep(0.1)
            for child in running:
                if child.process.poll() is None:
                    self.journal("stack.killed", role=child.role, pid=child.process.pid, after_s=timeout)
                    child.process.kill()
                    child.process.wait()
        for role in ("dashboard", "agents", "streams", "sinks"):
            self.stop_role(role, timeout)
            if role == "agents" and self.model_server is not None:
                self.model_server.stop()
        for child in self.children:  # a killed child leaves its status file behind
            forget_status(self.run_dir, child.role, child.process.pid)

    def stop(self, timeout: float = 30.0, together: bool = False) -> None:
        """Stop the children (``stop_children``), then the broker; removes ``stack.json``."""
        self.stop_children(timeout, together)
        if self.broker is not None:
            self.broker.stop()
        with contextlib.suppress(OSError, ValueError):
            if json.loads(self.state_path.read_text()).get("driver", {}).get("pid") in (
                None,
                self.driver_pid,
            ):
                self.state_path.unlink()
