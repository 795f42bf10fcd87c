"""The local stack: broker, stream workers, sink and agent workers as child processes of one command.

``LocalStack.start`` starts the embedded Tansu broker unless ``KAFKA_BOOTSTRAP`` names a cluster, creates
the society's topics, then starts the sink, the stream workers and the agent workers, each a separate
Python process configured through the same environment variables as ``Settings``. A society with LLM
agents and no ``SOCIETY_LLM_BASE_URL`` also gets the local model server (``society.model_server``). It writes
``<state_dir>/stack.json`` so ``society sql`` and ``society status`` can find the running stack.
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
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from society.broker import LocalBroker, ensure_topics, lower_priority
from society.logs import get_logger
from society.model_server import LocalModelServer
from society.settings import Settings

log = get_logger(__name__)

PIPELINE_NICE = 10
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


def read_state(settings: Settings) -> dict[str, Any]:
    """The running stack's ``<state_dir>/stack.json`` (see ``LocalStack.write_state``); {} without one."""
    path = settings.state_dir / "stack.json"
    try:
        state = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    return state if isinstance(state, dict) else {}


@dataclass
class Child:
    role: str
    process: subprocess.Popen[bytes]
    argv: list[str]
    log_path: Path


@dataclass
class LocalStack:
    settings: Settings
    society: str
    stream_workers: int = 1
    agent_workers: int = 1
    broker: LocalBroker | None = None
    bootstrap: str = ""
    children: list[Child] = field(default_factory=list)
    model_server: LocalModelServer | None = None
    nice: int = 0  # CPU niceness of the broker and the pipeline's processes (see start)

    @property
    def run_dir(self) -> Path:
        return self.settings.state_dir / self.society

    def start(self, *, agents: bool = True, dashboard: bool = False) -> None:
        """Start everything. With a local model server on the same cores (LLM agents and no
        ``SOCIETY_LLM_BASE_URL``), the model server starts first and the broker and the pipeline's
        processes run at nice +10, so that they do not preempt its compute threads (BENCHMARKS.md)."""
        self.run_dir.mkdir(parents=True, exist_ok=True)
        if agents and self.settings.llm_agents and not self.settings.llm_base_url:
            log_file = self.run_dir / "model-server.log"
            self.model_server = LocalModelServer.from_settings(self.settings, log_file).start()
            self.nice = max(self.nice, PIPELINE_NICE)
        if self.settings.kafka_bootstrap:
            self.bootstrap = self.settings.kafka_bootstrap
        else:
            self.broker = LocalBroker.start(log_file=self.run_dir / "broker.log", nice=self.nice)
            self.bootstrap = self.broker.bootstrap
        asyncio.run(
            ensure_topics(self.bootstrap, self.society, self.settings.partitions, self.settings.shards)
        )
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

    def spawn(self, role: str) -> Child:
        """Start one more process of ``role`` (sinks, streams, agents or dashboard)."""
        n = sum(1 for c in self.children if c.role == role)
        log_path = self.run_dir / f"{role}-{n}.log"
        argv = [sys.executable, "-m", role, "--society", self.society, "--bootstrap", self.bootstrap]
        extra: dict[str, Any] = {}
        if self.model_server is not None:
            extra["llm_base_url"] = self.model_server.base_url
        env = settings_env(self.settings, state_dir=self.settings.state_dir.resolve(), log_json=True, **extra)
        with open(log_path, "ab") as out:
            proc = subprocess.Popen(
                argv, stdout=out, stderr=subprocess.STDOUT, env=env, preexec_fn=lower_priority(self.nice)
            )
        child = Child(role, proc, argv, log_path)
        self.children.append(child)
        log.info("stack.spawned", role=role, pid=proc.pid, log=str(log_path))
        return child

    def write_state(self) -> None:
        state = {
            "society": self.society,
            "bootstrap": self.bootstrap,
            "started_at": time.time(),
            "processes": [
                {"role": c.role, "pid": c.process.pid, "log": str(c.log_path)} for c in self.children
            ],
        }
        if self.model_server is not None:
            state["model_server"] = {"url": self.model_server.base_url, "pid": self.model_server.pid}
        path = self.settings.state_dir / "stack.json"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(state, indent=2))

    def sink_url(self, timeout: float = 60.0) -> str:
        """The sink's query URL, once it is up."""
        path = self.run_dir / "sink.json"
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if path.exists():
                try:
                    return str(json.loads(path.read_text())["url"])
                except (ValueError, KeyError):
                    pass
            sink = next((c for c in self.children if c.role == "sinks"), None)
            if sink is not None and sink.process.poll() is not None:
                raise RuntimeError(
                    f"the sink exited with code {sink.process.returncode}; see {sink.log_path}"
                )
            time.sleep(0.1)
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
        deadline = time.monotonic() + timeout
        for p in procs:
            try:
                p.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()

    def stop(self) -> None:
        """Stop the dashboard, agents, stream workers, the sink (which flushes), then the broker."""
        for role in ("dashboard", "agents", "streams", "sinks"):
            self.stop_role(role)
            if role == "agents" and self.model_server is not None:
                self.model_server.stop()
        if self.broker is not None:
            self.broker.stop()
        state = self.settings.state_dir / "stack.json"
        if state.exists():
            state.unlink()
