"""What a benchmark of the pipeline runs on: a work directory, one broker, and the stack's own processes.

``Harness`` starts the broker (the local one of ``SOCIETY_BROKER`` unless ``KAFKA_BOOTSTRAP`` names one),
starts the sink and the stream workers as ``society run`` starts them (``python -m molt_society.<role>``,
configured by the environment that ``society.stack.settings_env`` writes) with their logs and temporary
files in the work directory, waits for them to work (a probe event all the way into ClickHouse), follows
the stored rows through the sink's ``/health``, and stops everything and removes the work directory at the
end. Peak RSS and CPU of the processes it is told to track are sampled throughout (``RssMonitor``).
"""

from __future__ import annotations

import asyncio
import contextlib
import shutil
import subprocess
import tempfile
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson
from rich.console import Console

from molt_society.bench.processes import Children, RssMonitor
from molt_society.runtime import kafka
from molt_society.runtime.brokers import Broker, start_broker
from molt_society.runtime.record_auth import RecordKeys
from molt_society.runtime.settings import Settings
from molt_society.schemas import control
from molt_society.schemas.events import AgentRegistered, AgentRegisteredBody, partition_key
from molt_society.schemas.ids import uuid7
from molt_society.schemas.topics import Role, topic_name
from molt_society.schemas.wire import encode_event
from molt_society.society.stack import role_argv, settings_env

err = Console(stderr=True)


def http_json(url: str, body: dict[str, Any] | None = None, timeout: float = 10.0) -> Any:
    """GET ``url`` (POST ``body`` as JSON if given) and decode the JSON answer."""
    data = orjson.dumps(body) if body is not None else None
    req = urllib.request.Request(url, data=data, headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=timeout) as resp:
        return orjson.loads(resp.read())


def health(url: str) -> dict[str, Any] | None:
    """The sink's ``/health`` document (None while it does not answer)."""
    try:
        doc = http_json(f"{url}/health", timeout=5.0)
    except (OSError, ValueError):
        return None
    return doc if isinstance(doc, dict) else None


class Harness:
    """A work directory, one broker and the stack's processes of one benchmark run."""

    def __init__(self, settings: Settings, prefix: str = "society-bench-") -> None:
        self.settings = settings
        self.partitions = settings.partitions
        self.tmp = Path(tempfile.mkdtemp(prefix=prefix))
        self.state_dir = self.tmp / "state"
        self.children = Children(self.tmp)
        self.monitor = RssMonitor()
        self.broker: Broker | None = None
        self.bootstrap = ""

    def start_broker(self) -> str:
        """The broker of ``KAFKA_BOOTSTRAP``, else the local broker of ``SOCIETY_BROKER`` (Tansu or Apache
        Kafka, its memory tracked as ``broker``)."""
        if self.settings.kafka_bootstrap:
            self.bootstrap = self.settings.kafka_bootstrap
        else:
            self.broker = start_broker(self.settings, self.tmp)
            self.bootstrap = self.broker.bootstrap
            self.monitor.track("broker", self.broker.pid)
        return self.bootstrap

    def env(self, **overrides: Any) -> dict[str, str]:
        """The environment of a child: the settings (and ``overrides``), JSON logs, state in the work dir."""
        env = settings_env(self.settings, state_dir=self.state_dir, log_json=True, **overrides)
        env["PYTHONDONTWRITEBYTECODE"] = "1"
        # Temporary files of the children (the stream worker's Faust data dir) go to the work dir.
        child_tmp = self.tmp / "tmp"
        child_tmp.mkdir(exist_ok=True)
        env["TMPDIR"] = str(child_tmp)
        return env

    def spawn_role(self, role: str, society: str, name: str, **overrides: Any) -> subprocess.Popen[bytes]:
        """Start one of the stack's processes (``sinks``, ``streams``) for ``society``, logged as ``name``."""
        return self.children.spawn(name, role_argv(role, society, self.bootstrap), self.env(**overrides))

    def spawn_sink(self, society: str, name: str, **overrides: Any) -> subprocess.Popen[bytes]:
        """Start a sink on a chDB of its own in the work dir."""
        ch = self.tmp / f"clickhouse-{name}"
        return self.spawn_role("sinks", society, name, clickhouse_url=f"chdb://{ch}", **overrides)

    async def wait_sink(self, society: str, proc: subprocess.Popen[bytes], timeout: float = 120.0) -> str:
        """The URL of ``society``'s sink once it answers ``/health``."""
        path = self.state_dir / society / "sink.json"
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            self.children.check(proc)
            if path.exists():
                with contextlib.suppress(ValueError, KeyError, OSError):
                    url = str(orjson.loads(path.read_bytes())["url"])
                    if await asyncio.to_thread(health, url) is not None:
                        return url
            await asyncio.sleep(0.1)
        raise TimeoutError(f"the sink of {society} did not come up in {timeout:.0f} s")

    async def wait_rows(
        self,
        url: str,
        want: int,
        procs: list[subprocess.Popen[bytes]],
        timeout: float,
        on_rows: Callable[[int], None] | None = None,
        offset: int = 0,
        samples: list[tuple[float, int]] | None = None,
    ) -> float:
        """Poll ``/health`` every 0.1 s until ``rows.events >= want``; return the wall time it did.
        ``on_rows`` is told the rows beyond ``offset`` at every poll; ``samples`` gets (time, those rows)."""
        deadline = time.monotonic() + timeout
        while True:
            doc = await asyncio.to_thread(health, url)
            now = time.time()
            rows = int(doc["rows"]["events"]) if doc else 0
            if samples is not None and doc:
                samples.append((now, rows - offset))
            if on_rows is not None:
                on_rows(max(0, rows - offset))
            if rows >= want:
                return now
            for p in procs:
                self.children.check(p)
            if time.monotonic() > deadline:
                raise TimeoutError(f"{rows:,} of {want:,} rows after {timeout:.0f} s")
            await asyncio.sleep(0.1)

    async def probe(self, society: str, occurred_us: int) -> None:
        """One valid event into the actions topic (to check the pipeline is up and warm)."""
        at = control.from_us(occurred_us)
        ev = AgentRegistered(
            event_id=uuid7(at),
            society=society,
            actor="bench-probe",
            occurred_at=at,
            body=AgentRegisteredBody(name="bench probe"),
        )
        producer = kafka.producer(self.bootstrap, "control", keys=RecordKeys(self.state_dir))
        await producer.start()
        try:
            await producer.send_and_wait(
                topic_name(society, Role.ACTIONS), encode_event(ev), key=partition_key(ev).encode()
            )
        finally:
            await producer.stop()

    def stop_children(self) -> None:
        """Stop every child and the memory sampling."""
        self.children.stop_all()
        self.monitor.halt.set()

    def close(self, keep: bool) -> None:
        """Stop everything; keep the work directory (say where) or remove it."""
        self.stop_children()
        if self.broker is not None:
            self.broker.stop()
        if keep:
            err.print(f"kept {self.tmp}")
        else:
            shutil.rmtree(self.tmp, ignore_errors=True)
