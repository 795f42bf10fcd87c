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
  SIGKILLed driver leaves no orphan; ``clear_stale_stack`` finds a ``stack.json`` whose driver is dead,
  stops any survivor and removes the stale state (``society status``, ``society run``, ``society stop``).
- ``Supervisor`` (run by ``society run``) watches the children and the broker: a pipeline child that exits
  is reported (role, pid, exit code or signal, the last error line of its log) and restarted with backoff,
  until one role restarts ``restart_limit`` times within ``restart_window_seconds``; a broker that does not
  answer is reported while it lasts; a local broker whose process exited is lost with its in-memory topics
  (``BrokerLost``; ``society.run.run_society`` takes an ``on_broker_lost`` hook to rebuild it instead).
  What the supervision sees and does goes to ``<run>/run.log`` (``Journal``).
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
import urllib.request
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from molt_society.runtime.apache_kafka import KafkaBroker
from molt_society.runtime.broker import broker_silence, child_preexec, ensure_topics
from molt_society.runtime.brokers import Broker, start_broker
from molt_society.runtime.logs import get_logger
from molt_society.runtime.pids import pid_alive, process_start_time
from molt_society.runtime.settings import Settings
from molt_society.runtime.stack_state import read_state as read_state
from molt_society.runtime.stack_state import state_path
from molt_society.runtime.tasks import cancel_and_wait
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
READY_EVENTS = {"agents": "agents.started", "streams": "processor.rebuilt"}  # log events of a working child
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


@dataclass
class _Down:
    child: Child
    code: int
    exited_at: float  # wall time it was noticed
    restart_at: float  # monotonic
    attempt: int


@dataclass
class _Recovering:
    child: Child
    exited_at: float
    restarted_at: float
    log_offset: int
    ready: bool = False


class Supervisor:
    """Keeps a running stack's pipeline going (see the module docstring).

    ``run`` returns only by raising ``StackFailed`` (``BrokerLost`` for a lost local broker); cancel it to
    stop supervising, before ``LocalStack.stop``. ``conditions`` holds what is wrong right now (for the
    live display); ``say(level, message)`` is told every event once. Spawns happen on the event loop's
    thread, which must be the main thread (see ``runtime.broker.child_preexec``)."""

    POLL_S = 0.5
    PROBE_S = 1.0
    PROBE_TIMEOUT_S = 2.0
    HEARTBEAT_S = 2.0
    MAX_BACKOFF_S = 10.0
    RENEW_KILL_S = 15.0  # a process told to renew its clients that has not exited by then is killed

    def __init__(self, stack: LocalStack, say: Callable[[str, str], None] | None = None) -> None:
        s = stack.settings
        self.stack = stack
        self.say = say or (lambda level, message: None)
        self.limit = s.restart_limit
        self.window = s.restart_window_seconds
        self.stall_after = s.broker_stall_seconds
        self.conditions: dict[str, str] = {}
        self.history: dict[str, deque[float]] = {}
        self.down: dict[int, _Down] = {}  # by the pid of the process that exited
        self.recovering: dict[int, _Recovering] = {}  # by the pid of the new process, until it is ready
        self.awaiting_tick: list[tuple[str, float]] = []  # (what, since when) to be resolved by a tick
        self.broker_silent_since: float | None = None
        self._stall_said = False
        self._renew_after: float | None = None  # a restarted Kafka: renew the clients once it answers
        self._renewing: dict[int, float] = {}  # pid -> when it is killed if it has not exited

    async def run(self) -> None:
        self.stack.supervised = True
        prober = asyncio.create_task(self._watch_broker())
        beat = 0.0
        try:
            while True:
                self._check_broker_process()
                self._check_children()
                self._restart_due()
                await self._check_ready()
                if time.monotonic() - beat >= self.HEARTBEAT_S:
                    self.stack.heartbeat()
                    beat = time.monotonic()
                if prober.done():
                    prober.result()
                await asyncio.sleep(self.POLL_S)
        finally:
            await cancel_and_wait(prober)  # a cancel the probe's wait_for swallowed left it looping for ever
            self.stack.supervised = False

    # ----------------------------------------------------------------------------------- the broker
    def _check_broker_process(self) -> None:
        broker = self.stack.broker
        if broker is None or (code := broker.exited()) is None:
            return
        if isinstance(broker, KafkaBroker) and self._restart_kafka(broker, code):
            return
        lost = BrokerLost(self.stack.bootstrap, broker.pid, code, time.time(), self.stack.settings.broker)
        self.stack.journal(
            "broker.lost", level="error", bootstrap=lost.bootstrap, pid=lost.pid, status=describe_exit(code)
        )
        self.say("error", str(lost))
        raise lost

    def _restart_kafka(self, broker: KafkaBroker, code: int) -> bool:
        """Start a local Apache Kafka that exited again, on its own log and ports: its topics and every
        record it acknowledged are on disk, the children's clients reconnect to the same address, and the
        society goes on from the log (nothing regenerated). False once it exited ``restart_limit`` times
        within the restart window: it is then lost like Tansu."""
        mono = time.monotonic()
        history = self.history.setdefault("broker", deque())
        while history and mono - history[0] > self.window:
            history.popleft()
        status = describe_exit(code)
        if len(history) >= self.limit:
            self.stack.journal(
                "broker.gave_up", level="error", pid=broker.pid, status=status, restarts=len(history)
            )
            return False
        history.append(mono)
        new = broker.respawn()
        self.stack.broker = new
        self.stack.write_state()
        self.stack.journal(
            "broker.restarted",
            level="warning",
            previous_pid=broker.pid,
            pid=new.pid,
            status=status,
            attempt=len(history),
        )
        self.say(
            "warning",
            f"the broker at {new.bootstrap} (Apache Kafka, pid {broker.pid}) {status}; restarted it on its "
            f"log as pid {new.pid}: the topics are kept and the society goes on from them",
        )
        self.conditions["broker"] = f"the broker (Apache Kafka) {status}; restarted as pid {new.pid}"
        self.awaiting_tick.append(("broker restart", time.time()))
        self._renew_after = time.time()
        return True

    def _renew_clients(self) -> None:
        """Stop (SIGTERM) every pipeline process whose Kafka clients lived through the broker's restart;
        the supervision restarts each, and it rebuilds its state from the topics as after any restart. An
        agent worker's clients could otherwise hang on a connection the old broker left half-open, its tick
        never coming (seen with aiokafka 0.14 and Kafka 4.1)."""
        renewed = []
        for child in self.stack.children:
            if child.role in ("sinks", "streams", "agents") and child.process.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    child.process.terminate()
                self._renewing[child.process.pid] = time.monotonic() + self.RENEW_KILL_S
                renewed.append(f"{child.label} (pid {child.process.pid})")
        self.stack.journal("broker.clients_renewed", processes=renewed)
        if renewed:
            self.say("info", "the restarted broker answers: restarting " + ", ".join(renewed) + " on it")

    async def _watch_broker(self) -> None:
        while True:
            bootstrap = self.stack.bootstrap
            began = time.time()
            error = await broker_silence(bootstrap, self.PROBE_TIMEOUT_S)
            now = time.time()
            if error is None:
                if self._renew_after is not None and began > self._renew_after:
                    self._renew_after = None
                    self._renew_clients()
                if self._stall_said and self.broker_silent_since is not None:
                    after = now - self.broker_silent_since
                    self.stack.journal("broker.answering_again", bootstrap=bootstrap, after_s=round(after, 1))
                    self.say(
                        "info", f"the broker at {bootstrap} answers again, after {after:.0f} s of silence"
                    )
                    self.awaiting_tick.append(("broker stall", self.broker_silent_since))
                self.broker_silent_since, self._stall_said = None, False
                self.conditions.pop("broker", None)
            else:
                if self.broker_silent_since is None:
                    self.broker_silent_since = began
                silent = now - self.broker_silent_since
                if silent >= self.stall_after:
                    message = f"the broker at {bootstrap} has not answered for {silent:.0f} s ({error})"
                    self.conditions["broker"] = message
                    if not self._stall_said:
                        self._stall_said = True
                        self.stack.journal(
                            "broker.not_answering",
                            level="warning",
                            bootstrap=bootstrap,
                            since=round(self.broker_silent_since, 3),
                            error=error,
                        )
                        self.say("warning", message)
            await asyncio.sleep(max(0.0, self.PROBE_S - (time.time() - began)))

    # ---------------------------------------------------------------------------------- the children
    def _check_children(self) -> None:
        self._kill_stuck_renewals()
        for child in list(self.stack.children):
            if child.role not in SUPERVISED or child.process.pid in self.down:
                continue
            code = child.process.poll()
            if code is not None:
                self._on_exit(child, code)

    def _kill_stuck_renewals(self) -> None:
        """SIGKILL a process told to renew its clients (``_renew_clients``) that is still stopping after
        ``RENEW_KILL_S``: its stop can wait for ever on a group coordinator of the old broker (seen: a
        stream worker in aiokafka's ``GroupCoordinator.close`` for 4 minutes, the barrier waiting on it)."""
        if not self._renewing:
            return
        now = time.monotonic()
        for child in self.stack.children:
            pid = child.process.pid
            deadline = self._renewing.get(pid)
            if deadline is None:
                continue
            if child.process.poll() is not None:
                self._renewing.pop(pid)
            elif now > deadline:
                self._renewing.pop(pid)
                with contextlib.suppress(ProcessLookupError):
                    child.process.kill()
                self.stack.journal("broker.renew_killed", level="warning", role=child.role, pid=pid)
                self.say(
                    "warning",
                    f"{child.label} (pid {pid}) did not stop within {self.RENEW_KILL_S:.0f} s; killed",
                )
        live = {c.process.pid for c in self.stack.children}
        for pid in [p for p in self._renewing if p not in live]:
            self._renewing.pop(pid)

    def window_for(self, role: str) -> float:
        """The window of ``restart_limit``. A sink whose inserts fail exits after ``sink_fail_seconds``
        each time: its window stretches so that a ClickHouse that stays broken still stops the run."""
        if role == "sinks":
            return max(self.window, self.limit * (self.stack.settings.sink_fail_seconds + 10))
        return self.window

    def _on_exit(self, child: Child, code: int) -> None:
        now, mono = time.time(), time.monotonic()
        pid = child.process.pid
        window = self.window_for(child.role)
        history = self.history.setdefault(child.role, deque())
        while history and mono - history[0] > window:
            history.popleft()
        self.recovering.pop(pid, None)
        error = last_error_line(child.log_path)
        status = describe_exit(code)
        said_error = f"; its last error: {error}" if error else ""
        facts = {"role": child.role, "pid": pid, "status": status, "error": error, "log": str(child.log_path)}
        if len(history) >= self.limit:
            restarts = len(history)
            self.stack.journal("stack.gave_up", level="error", **facts, restarts=restarts, window_s=window)
            raise StackFailed(
                f"{child.label} (pid {pid}) {status}{said_error}. It was restarted {len(history)} times "
                f"within {window:.0f} s, so the run stops. Its log: {child.log_path}"
            )
        history.append(mono)
        backoff = min(self.MAX_BACKOFF_S, 0.5 * 2 ** (len(history) - 1))
        more = {"exit_code": code, "restart_in_s": backoff, "attempt": len(history)}
        self.stack.journal("stack.child_exited", level="warning", **facts, **more)
        self.say(
            "warning",
            f"{child.label} (pid {pid}) {status}{said_error}; restarting it in {backoff:.1f} s "
            f"(restart {len(history)} of at most {self.limit} in {window:.0f} s; log {child.log_path})",
        )
        self.conditions[f"child:{child.role}:{child.index}"] = (
            f"{child.label} (pid {pid}) {status}; restarting it"
        )
        self.down[pid] = _Down(child, code, now, mono + backoff, len(history))

    def _restart_due(self) -> None:
        for pid, down in list(self.down.items()):
            if time.monotonic() < down.restart_at:
                continue
            del self.down[pid]
            old = down.child
            offset = old.log_path.stat().st_size if old.log_path.exists() else 0
            new = self.stack.respawn(old, reason=describe_exit(down.code))
            now = time.time()
            self.stack.journal(
                "stack.child_restarted",
                role=new.role,
                previous_pid=pid,
                pid=new.process.pid,
                attempt=down.attempt,
                after_exit_s=round(now - down.exited_at, 2),
            )
            self.say("info", f"restarted {new.label} as pid {new.process.pid}")
            self.conditions[f"child:{new.role}:{new.index}"] = (
                f"{new.label} restarted as pid {new.process.pid}; waiting for it to work"
            )
            rec = _Recovering(new, down.exited_at, now, offset)
            self.recovering[new.process.pid] = rec
            self.awaiting_tick.append((new.role, down.exited_at))

    async def _check_ready(self) -> None:
        for pid, rec in list(self.recovering.items()):
            if rec.child.process.poll() is not None:
                del self.recovering[pid]  # died again: _check_children reports it
                continue
            where = await asyncio.to_thread(self._is_ready, rec)
            if where is not None:
                del self.recovering[pid]
                rec.ready = True
                now = time.time()
                self.stack.journal(
                    "stack.child_ready",
                    role=rec.child.role,
                    pid=pid,
                    after_exit_s=round(now - rec.exited_at, 2),
                    after_restart_s=round(now - rec.restarted_at, 2),
                )
                self.say(
                    "info",
                    f"{rec.child.label} (pid {pid}) works again, {now - rec.exited_at:.1f} s after it "
                    f"died{where}",
                )
                self.conditions.pop(f"child:{rec.child.role}:{rec.child.index}", None)

    def _is_ready(self, rec: _Recovering) -> str | None:
        """None while the restarted child does not work yet; else what to add to "works again"."""
        role, pid = rec.child.role, rec.child.process.pid
        if role in ("sinks", "dashboard"):
            name = "sink.json" if role == "sinks" else "dashboard.json"
            try:
                doc = json.loads((self.stack.run_dir / name).read_text())
                url = str(doc["url"])
                if role == "sinks" and doc.get("pid") != pid:
                    return None
                with urllib.request.urlopen(f"{url}/health" if role == "sinks" else url, timeout=2):
                    return f" ({url})" if role == "dashboard" else ""
            except (OSError, ValueError, KeyError, TypeError):
                return None
        marker = READY_EVENTS.get(role)
        if marker is None:
            return ""
        try:
            with open(rec.child.log_path, "rb") as f:
                f.seek(rec.log_offset)
                return "" if f'"{marker}"'.encode() in f.read() else None
        except OSError:
            return None

    def note_tick(self, tick: int) -> None:
        """The clock completed ``tick``: the society runs again after the restarts or broker stall since
        the previous tick (journaled as ``society.resumed``, with the seconds since the first of them)."""
        if not self.awaiting_tick:
            return
        now = time.time()
        self.stack.journal(
            "society.resumed",
            tick=tick,
            after=sorted({what for what, _ in self.awaiting_tick}),
            after_s=round(now - min(since for _, since in self.awaiting_tick), 2),
        )
        self.awaiting_tick.clear()


# --------------------------------------------------------------------------------- stale and stopping
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
