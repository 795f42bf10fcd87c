"""``python -m molt_society.bench.pipeline [--events N] [--quick]``: measure the pipeline on this machine,
in one run.

Stages (all in one run, on one broker, so their ratios compare like with like):

1. raw consume ceiling: aiokafka ``getmany`` + ``orjson.loads`` over the pre-produced actions topic;
2. producer: the ``bench.producer`` child (acks=all, linger 5 ms) writes N events + watermarks;
3. stream processor: one ``python -m molt_society.streams`` worker on that backlog, from the first record in
   the events topic until the events and marks topics (high watermarks read by a fetch) hold every event
   and mark;
4. sink: ``python -m molt_society.sinks`` on the events topic of stage 3, from its first insert until
   ``rows.events``;
5. end to end: fresh society, sink + worker running and warm, N events produced at full speed, from the
   first send until ``/health`` reports N rows in ClickHouse; peak RSS of worker, sink and producer;
5b. end to end again (another fresh society), while a reader sends ``QUERY_UNDER_LOAD`` to the sink's
   ``/query`` every 100 ms: user queries run on their own read-only session and must not slow the inserts
   (target: at least 0.9 of stage 5's rate, both measured in this run);
6. latency at 1,000 events/s with 1-s windows: window end -> ``events_total`` row in ClickHouse;
7. replay: the N events, sorted by event time, written once to a ``.jsonl.gz`` archive (not timed); a fresh
   society's sink + worker running and warm as in 5; then ``society replay``'s path, the archive read
   (``replay.archive.read_jsonl_docs``, streaming; the stream worker validates) and
   ``replay.publisher.publish`` at full speed, from the start of reading until ``/health`` reports N rows
   in ClickHouse.

Results are printed as a table and written to BENCHMARKS.md (``--output``). Progress goes to stderr.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import gc
import hashlib
import math
import os
import platform
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
import uuid
from collections import Counter
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import aiohttp
import orjson
import psutil
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from rich.console import Console
from rich.progress import BarColumn, Progress, SpinnerColumn, TaskID, TextColumn, TimeElapsedColumn
from rich.table import Table

from molt_society.bench.dataset import (
    Dataset,
    build,
    copy_mask,
    iso_us,
    key_of,
    remapped,
    write_replay_archive,
)
from molt_society.runtime.broker import LocalBroker, ensure_topics
from molt_society.runtime.settings import Settings, get_settings
from molt_society.schemas import control
from molt_society.schemas.events import AgentRegistered, AgentRegisteredBody, partition_key
from molt_society.schemas.ids import uuid7
from molt_society.schemas.topics import HEADER_KIND, KIND_WATERMARK, Role, topic_name
from molt_society.schemas.wire import encode_event
from molt_society.society.stack import settings_env

REPO = Path(__file__).resolve().parents[1]
GIB = 1 << 30
MIB = 1 << 20
TARGET_E2E = 20_000.0
TARGET_QUERY_RATIO = 0.9
QUERY_EVERY_S = 0.1
QUERY_UNDER_LOAD = "SELECT type, count() AS events, uniqExact(actor) AS agents FROM events GROUP BY type"
"""What the reader of stage 5b asks every 100 ms (the demo's first query, over the whole table)."""
TARGET_LATENCY_P99_S = 2.0
TARGET_WORKER_RSS = 1 * GIB
TARGET_REPLAY_EVENTS = 1_000_000
TARGET_REPLAY_S = 60.0
LATENCY_RATE = 1_000
HISTORY_BEGIN = "<!-- history:begin -->"
HISTORY_END = "<!-- history:end -->"

FATAL_MARKERS = (b'"event": "processor.stopped"', b"Traceback (most recent call last)")
"""Log lines after which a child that is still running no longer does its job."""

err = Console(stderr=True)


# --------------------------------------------------------------------------------------------- results
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
        for path in sorted((REPO / d).rglob("*")):
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


# ------------------------------------------------------------------------------------------- machinery
class Children:
    """Child processes of the benchmark; stopped with SIGTERM, then SIGKILL."""

    def __init__(self, logs: Path) -> None:
        self.logs = logs
        self.procs: list[tuple[str, subprocess.Popen[bytes]]] = []
        self.scanned: dict[str, int] = {}

    def spawn(
        self, name: str, argv: list[str], env: dict[str, str], *, stdout_pipe: bool = False
    ) -> subprocess.Popen[bytes]:
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

    def stop(self, proc: subprocess.Popen[bytes], timeout: float = 30.0) -> None:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        self.procs = [(n, p) for n, p in self.procs if p is not proc]

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


class HighWatch:
    """Sums of partition high watermarks of some topics, read from real fetch responses.

    ``end_offsets`` is wrong on Tansu (``society.status``), so a group-less consumer fetches at the last
    high watermark it saw: the broker answers with the new high watermark and at most one small batch.
    """

    def __init__(self, bootstrap: str, topics: list[str]) -> None:
        self.bootstrap = bootstrap
        self.topics = topics
        self.consumer = AIOKafkaConsumer(
            bootstrap_servers=bootstrap,
            group_id=None,
            enable_auto_commit=False,
            fetch_max_wait_ms=50,
            max_partition_fetch_bytes=1024,
        )
        self.tps: list[TopicPartition] = []
        self.sought: dict[TopicPartition, int] = {}

    async def start(self) -> None:
        await self.consumer.start()
        for _ in range(50):
            self.tps = [
                TopicPartition(t, p)
                for t in self.topics
                for p in sorted(self.consumer.partitions_for_topic(t) or ())
            ]
            if {tp.topic for tp in self.tps} == set(self.topics):
                break
            await self.consumer.force_metadata_update()
            await asyncio.sleep(0.1)
        self.consumer.assign(self.tps)
        for tp in self.tps:
            self.consumer.seek(tp, 0)
            self.sought[tp] = 0

    async def totals(self) -> dict[str, int]:
        await self.consumer.getmany(timeout_ms=60, max_records=1)
        out = dict.fromkeys(self.topics, 0)
        for tp in self.tps:
            hw = self.consumer.highwater(tp)
            if hw is None:
                continue
            out[tp.topic] += hw
            if hw != self.sought[tp]:
                self.consumer.seek(tp, hw)
                self.sought[tp] = hw
        return out

    async def stop(self) -> None:
        await self.consumer.stop()


def http_json(url: str, body: dict[str, Any] | None = None, timeout: float = 10.0) -> Any:
    data = orjson.dumps(body) if body is not None else None
    req = urllib.request.Request(url, data=data, headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=timeout) as resp:
        return orjson.loads(resp.read())


def health(url: str) -> dict[str, Any] | None:
    try:
        doc = http_json(f"{url}/health", timeout=5.0)
    except (OSError, ValueError):
        return None
    return doc if isinstance(doc, dict) else None


def parse_ts(value: str) -> float:
    return datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()


def percentile(values: list[float], q: float) -> float | None:
    """Nearest-rank percentile."""
    if not values:
        return None
    ordered = sorted(values)
    rank = max(1, math.ceil(q / 100 * len(ordered)))
    return ordered[min(len(ordered), rank) - 1]


def machine_info() -> dict[str, str]:
    model = "unknown"
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    nproc = subprocess.run(["nproc"], capture_output=True, text=True, check=False).stdout.strip()
    import aiokafka

    return {
        "nproc": nproc or str(os.cpu_count()),
        "ram": f"{psutil.virtual_memory().total / GIB:.1f} GiB",
        "cpu": model,
        "python": platform.python_version(),
        "os": f"{platform.system()} {platform.release()}",
        "aiokafka": str(aiokafka.__version__),
    }


# ----------------------------------------------------------------------------------------------- bench
class Bench:
    def __init__(self, args: argparse.Namespace, run: Run) -> None:
        self.args = args
        self.run_info = run
        self.n: int = args.events
        self.settings: Settings = get_settings()
        self.partitions = self.settings.partitions
        self.tmp = Path(tempfile.mkdtemp(prefix="society-bench-"))
        self.state_dir = self.tmp / "state"
        self.children = Children(self.tmp)
        self.monitor = RssMonitor()
        self.broker: LocalBroker | None = None
        self.bootstrap = ""
        tag = uuid.uuid4().hex[:6]
        self.soc_a = f"bench{tag}a"  # producer, ceiling, processor, sink
        self.soc_b = f"bench{tag}e"  # end to end
        self.soc_q = f"bench{tag}q"  # end to end with user queries
        self.soc_c = f"bench{tag}l"  # latency
        self.soc_r = f"bench{tag}r"  # replay
        self.ds: Dataset | None = None
        self.progress = Progress(
            SpinnerColumn(),
            TextColumn("[bold]{task.description}"),
            BarColumn(),
            TextColumn("{task.completed:,.0f}/{task.total:,.0f}"),
            TimeElapsedColumn(),
            console=err,
            transient=False,
        )

    # --- helpers -----------------------------------------------------------------------------------
    def env(self, **overrides: Any) -> dict[str, str]:
        env = settings_env(self.settings, state_dir=self.state_dir, log_json=True, **overrides)
        env["PYTHONDONTWRITEBYTECODE"] = "1"
        # Temporary files of the children (the stream worker's Faust data dir) go to the work dir.
        child_tmp = self.tmp / "tmp"
        child_tmp.mkdir(exist_ok=True)
        env["TMPDIR"] = str(child_tmp)
        return env

    def spawn_role(self, role: str, society: str, name: str, **overrides: Any) -> subprocess.Popen[bytes]:
        argv = [
            sys.executable,
            "-m",
            f"molt_society.{role}",
            "--society",
            society,
            "--bootstrap",
            self.bootstrap,
        ]
        return self.children.spawn(name, argv, self.env(**overrides))

    def spawn_sink(self, society: str, name: str, **overrides: Any) -> subprocess.Popen[bytes]:
        ch = self.tmp / f"clickhouse-{name}"
        return self.spawn_role("sinks", society, name, clickhouse_url=f"chdb://{ch}", **overrides)

    async def wait_sink(self, society: str, proc: subprocess.Popen[bytes], timeout: float = 120.0) -> str:
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
        task: TaskID | None = None,
        offset: int = 0,
        samples: list[tuple[float, int]] | None = None,
    ) -> float:
        """Poll ``/health`` every 0.1 s until ``rows.events >= want``; return the wall time it did."""
        deadline = time.monotonic() + timeout
        while True:
            doc = await asyncio.to_thread(health, url)
            now = time.time()
            rows = int(doc["rows"]["events"]) if doc else 0
            if samples is not None and doc:
                samples.append((now, rows - offset))
            if task is not None:
                self.progress.update(task, completed=max(0, rows - offset))
            if rows >= want:
                return now
            for p in procs:
                self.children.check(p)
            if time.monotonic() > deadline:
                raise TimeoutError(f"{rows:,} of {want:,} rows after {timeout:.0f} s")
            await asyncio.sleep(0.1)

    def timeout(self) -> float:
        return 180.0 + self.n / 2_000

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
        producer = AIOKafkaProducer(bootstrap_servers=self.bootstrap, acks="all")
        await producer.start()
        try:
            await producer.send_and_wait(
                topic_name(society, Role.ACTIONS), encode_event(ev), key=partition_key(ev).encode()
            )
        finally:
            await producer.stop()

    def stage(self, key: str, label: str) -> Stage:
        st = Stage(key, label)
        self.run_info.stages[key] = st
        self.run_info.stage_started[key] = time.time()
        return st

    # --- run -----------------------------------------------------------------------------------------
    async def main(self) -> None:
        self.monitor.start()
        try:
            await self.prepare()
            steps: list[tuple[str, Callable[[], Awaitable[None]]]] = [
                ("producer", self.stage_producer),
                ("ceiling", self.stage_ceiling),
                ("processor", self.stage_processor),
                ("sink", self.stage_sink),
                ("e2e", self.stage_e2e),
                ("e2e_queries", self.stage_e2e_queries),
                ("latency", self.stage_latency),
                ("replay", self.stage_replay),
            ]
            with self.progress:
                for name, step in steps:
                    if name in self.args.skip:
                        continue
                    try:
                        await step()
                    except Exception as exc:
                        err.print(f"[red]{name} failed:[/red] {exc!r}")
                        if name in self.run_info.stages:
                            self.run_info.stages[name].error = f"{type(exc).__name__}: {exc}"[:300]
                        elif name == "latency":
                            self.run_info.latency.error = f"{type(exc).__name__}: {exc}"[:300]
                    finally:
                        self.children.stop_all()
        finally:
            self.children.stop_all()
            self.monitor.halt.set()
            if "broker" in self.monitor.peak:
                self.run_info.memory.peak["broker"] = self.monitor.peak["broker"]
                self.run_info.memory.final["broker"] = self.monitor.last.get("broker", 0)
            if self.broker is not None:
                self.broker.stop()
            if self.args.keep:
                err.print(f"kept {self.tmp}")
            else:
                shutil.rmtree(self.tmp, ignore_errors=True)

    async def prepare(self) -> None:
        files = {
            self.soc_a: self.tmp / "a.records",
            self.soc_b: self.tmp / "e.records",
            self.soc_q: self.tmp / "q.records",
        }
        err.print(f"generating {self.n:,} events (agents.offline.simulate, tiled) ...")
        self.ds = await asyncio.to_thread(build, self.n, partitions=self.partitions, societies=files)
        self.run_info.dataset = self.ds
        gc.collect()
        gc.freeze()
        ds = self.ds
        err.print(
            f"  {ds.events:,} events + {ds.marks:,} watermark records, mean {ds.mean_bytes:.0f} B, "
            f"{ds.agents:,} agents, base {ds.base_ticks:,} ticks x {ds.copies} copies, {ds.seconds:.1f} s"
        )
        if self.settings.kafka_bootstrap:
            self.bootstrap = self.settings.kafka_bootstrap
        else:
            self.broker = LocalBroker.start(log_file=self.tmp / "broker.log")
            self.bootstrap = self.broker.bootstrap
            self.monitor.track("broker", self.broker.process.pid)
        err.print(f"broker {self.bootstrap}; work dir {self.tmp}")
        for soc in (self.soc_a, self.soc_b, self.soc_q, self.soc_c, self.soc_r):
            await ensure_topics(self.bootstrap, soc, self.partitions, self.settings.shards)

    async def run_producer(self, society: str, name: str, mem_key: str) -> dict[str, Any]:
        assert self.ds is not None
        argv = [
            sys.executable, "-m", "molt_society.bench.producer", "--bootstrap", self.bootstrap,
            "--topic", topic_name(society, Role.ACTIONS), "--file", str(self.ds.files[society]),
        ]  # fmt: skip
        proc = self.children.spawn(name, argv, self.env(), stdout_pipe=True)
        self.monitor.track(mem_key, proc.pid)
        stdout = b""
        try:
            deadline = time.monotonic() + self.timeout()
            while proc.poll() is None:
                if time.monotonic() > deadline:
                    raise TimeoutError("the producer did not finish")
                await asyncio.sleep(0.1)
            assert proc.stdout is not None
            stdout = proc.stdout.read()
        finally:
            self.monitor.untrack(mem_key)
        if proc.returncode != 0:
            raise RuntimeError(f"producer exited with {proc.returncode}: {self.children.tail(name)}")
        doc: dict[str, Any] = orjson.loads(stdout.strip().splitlines()[-1])
        return doc

    # --- 2. producer ---------------------------------------------------------------------------------
    async def stage_producer(self) -> None:
        st = self.stage("producer", "producer (aiokafka, acks=all, linger 5 ms) -> actions topic")
        assert self.ds is not None
        task = self.progress.add_task("2 producer", total=self.ds.events)
        doc = await self.run_producer(self.soc_a, "producer", "producer stage: producer")
        self.progress.update(task, total=doc["events"], completed=doc["events"])
        st.events = int(doc["events"])
        st.seconds = float(doc["last_ack"]) - float(doc["first_send"])
        st.note = f"+{doc['marks']:,} watermark records; first send to last ack"
        err.print(f"  producer: {st.rate or 0:,.0f} events/s")

    # --- 1. raw ceiling ----------------------------------------------------------------------------
    async def stage_ceiling(self) -> None:
        assert self.ds is not None
        st = self.stage("ceiling", "raw consume ceiling (aiokafka getmany + orjson.loads)")
        topic = topic_name(self.soc_a, Role.ACTIONS)
        expected = self.ds.events + self.ds.marks
        task = self.progress.add_task("1 raw ceiling", total=expected)
        consumer = AIOKafkaConsumer(
            bootstrap_servers=self.bootstrap,
            group_id=None,
            enable_auto_commit=False,
            auto_offset_reset="earliest",
            fetch_max_wait_ms=20,
            max_poll_records=10_000,
            max_partition_fetch_bytes=8 << 20,
        )
        await consumer.start()
        try:
            tps = [TopicPartition(topic, p) for p in range(self.partitions)]
            consumer.assign(tps)
            await consumer.seek_to_beginning(*tps)
            loads = orjson.loads
            n = 0
            nbytes = 0
            began = time.perf_counter()
            deadline = time.monotonic() + self.timeout()
            while n < expected:
                batch = await consumer.getmany(timeout_ms=1000)
                for records in batch.values():
                    for rec in records:
                        loads(rec.value)
                        nbytes += len(rec.value)
                    n += len(records)
                self.progress.update(task, completed=n)
                if time.monotonic() > deadline:
                    raise TimeoutError(f"consumed {n:,} of {expected:,}")
            st.seconds = time.perf_counter() - began
            st.events = n
            st.note = (
                f"{self.partitions} partitions, {nbytes / max(1, n):.0f} B/record, records incl. watermarks"
            )
        finally:
            await consumer.stop()
        err.print(f"  ceiling: {st.rate or 0:,.0f} records/s")

    # --- 3. stream processor -------------------------------------------------------------------------
    async def stage_processor(self) -> None:
        assert self.ds is not None
        st = self.stage("processor", "stream processor (1 worker, backlog in actions)")
        t_events = topic_name(self.soc_a, Role.EVENTS)
        t_dlq = topic_name(self.soc_a, Role.DEADLETTER)
        t_marks = topic_name(self.soc_a, Role.MARKS)  # watermarks are recorded there, not on events
        target = self.ds.events + self.ds.marks
        task = self.progress.add_task("3 stream processor", total=target)
        watch = HighWatch(self.bootstrap, [t_events, t_marks, t_dlq])
        await watch.start()
        profiler: subprocess.Popen[bytes] | None = None
        first: float | None = None
        mem_key = "processor stage: stream worker"
        proc: subprocess.Popen[bytes] | None = None
        samples: list[tuple[float, int]] = []
        try:
            proc = self.spawn_role("streams", self.soc_a, "stream worker processor stage")
            self.monitor.track(mem_key, proc.pid)
            deadline = time.monotonic() + self.timeout()
            while True:
                tot = await watch.totals()
                now = time.time()
                done = tot[t_events] + tot[t_marks] + tot[t_dlq]
                samples.append((now, done))
                if first is None and done > 0:
                    first = now
                    profiler = self.start_profiler(proc.pid)
                self.progress.update(task, completed=min(done, target))
                if done >= target:
                    break
                self.children.check(proc)
                if time.monotonic() > deadline:
                    raise TimeoutError(f"{done:,} of {target:,} records in the events topic")
                await asyncio.sleep(0.05)
            assert first is not None
            st.events = self.ds.events
            st.seconds = now - first
            st.note = "first record in events topic -> all accepted events there, all marks in marks"
            st.note += "; " + tenths(samples, first, target)
            if tot[t_dlq]:
                st.note += f"; {tot[t_dlq]:,} dead letters"
            # The aggregator (same process) may still be computing window metrics: wait for it, report it.
            windows = math.ceil((self.ds.end_us - self.ds.origin_us) / (self.settings.window_seconds * 1e6))
            log_path = self.children.log_path("stream worker processor stage")
            limit = time.monotonic() + 300
            computed: list[float] = []
            while time.monotonic() < limit:
                computed = log_times(log_path, "window.computed")
                if len(computed) >= windows:
                    break
                self.children.check(proc)
                await asyncio.sleep(0.2)
            if len(computed) >= windows:
                lag = max(0.0, computed[-1] - now)
                st.note += f"; the aggregator finished the metrics of all {windows} windows {lag:.1f} s later"
            else:
                st.note += f"; the aggregator computed {len(computed)} of {windows} windows within 300 s"
        finally:
            if profiler is not None:
                self.stop_profiler(profiler)
            self.monitor.untrack(mem_key)
            await watch.stop()
            if proc is not None:
                self.children.stop(proc)
        err.print(f"  processor: {st.rate or 0:,.0f} events/s")

    def start_profiler(self, pid: int) -> subprocess.Popen[bytes] | None:
        if not self.args.profile:
            return None
        spy = shutil.which(
            "py-spy", path=f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"
        )
        if spy is None:
            self.run_info.notes.append("--profile: py-spy not found (pip install py-spy)")
            return None
        out = self.tmp / "profile.txt"
        argv = [spy, "record", "--pid", str(pid), "--rate", "100", "--gil", "--nonblocking"]
        argv += ["--format", "raw", "--output", str(out)]
        return self.children.spawn("py-spy", argv, dict(os.environ))

    def stop_profiler(self, proc: subprocess.Popen[bytes]) -> None:
        if proc.poll() is None:
            proc.send_signal(signal.SIGINT)
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
        self.children.procs = [(n, p) for n, p in self.children.procs if p is not proc]
        out = self.tmp / "profile.txt"
        if out.exists():
            self.run_info.profile, self.run_info.profile_inclusive = summarize_profile(out.read_text())
            if self.args.keep or self.args.profile_out:
                dest = Path(self.args.profile_out or self.tmp / "profile.txt")
                if dest != out:
                    shutil.copy(out, dest)
        else:
            self.run_info.notes.append(f"py-spy wrote no profile: {self.children.tail('py-spy')}")

    # --- 4. sink ---------------------------------------------------------------------------------------
    async def stage_sink(self) -> None:
        assert self.ds is not None
        st = self.stage("sink", "sink -> ClickHouse (chDB), backlog in events")
        task = self.progress.add_task("4 sink", total=self.ds.events)
        proc = self.spawn_sink(self.soc_a, "sink sink stage")
        mem_key = "sink stage: sink"
        self.monitor.track(mem_key, proc.pid)
        try:
            url = await self.wait_sink(self.soc_a, proc)
            polled = await self.wait_rows(url, self.ds.events, [proc], self.timeout(), task)
            await asyncio.sleep(0.3)  # let the last flush line reach the log
            flushes = sink_flushes(self.children.log_path("sink sink stage"))
            start, done = flush_span(flushes, self.ds.events)
            if start is None:
                raise RuntimeError("no sink.flushed line in the sink log")
            st.events = self.ds.events
            st.seconds = (done or polled) - start
            doc = await asyncio.to_thread(health, url)
            batches = sum(1 for f in flushes if f[2] > 0)
            st.note = f"first insert start -> rows.events = N ({batches} inserts"
            if doc and doc.get("p99_insert_ms") is not None:
                st.note += f", p99 insert {doc['p99_insert_ms']:.0f} ms"
            st.note += ")"
        finally:
            self.monitor.untrack(mem_key)
            self.children.stop(proc)
        err.print(f"  sink: {st.rate or 0:,.0f} rows/s")

    # --- 5. end to end + memory -------------------------------------------------------------------------
    async def stage_e2e(self) -> None:
        await self._e2e("e2e", self.soc_b, "end to end: produce -> validate -> events -> ClickHouse")

    async def stage_e2e_queries(self) -> None:
        """Stage 5 again, with a reader's query sent to the sink every 100 ms (``QUERY_UNDER_LOAD``)."""
        await self._e2e(
            "e2e_queries",
            self.soc_q,
            "end to end with a user query every 100 ms",
            queries=True,
        )

    async def _queries(self, url: str, stats: dict[str, Any]) -> None:
        """A reader asking every ``QUERY_EVERY_S`` while the stage runs; counts answers and their times."""
        body = {"sql": QUERY_UNDER_LOAD}
        while True:
            began = time.perf_counter()
            try:
                await asyncio.to_thread(http_json, f"{url}/query", body, 30.0)
                stats["ok"] += 1
                stats["ms"].append((time.perf_counter() - began) * 1000)
            except Exception as exc:
                stats["failed"] += 1
                stats["error"] = repr(exc)[:200]
            await asyncio.sleep(max(0.0, QUERY_EVERY_S - (time.perf_counter() - began)))

    async def _e2e(self, key: str, society: str, label: str, queries: bool = False) -> None:
        assert self.ds is not None
        st = self.stage(key, label)
        n = self.ds.events
        sink = self.spawn_sink(society, f"sink {key}")
        worker = self.spawn_role("streams", society, f"stream worker {key}")
        keys = {"sink": f"{key}: sink", "worker": f"{key}: stream worker", "producer": f"{key}: producer"}
        self.monitor.track(keys["sink"], sink.pid)
        self.monitor.track(keys["worker"], worker.pid)
        try:
            url = await self.wait_sink(society, sink)
            await self.probe(society, self.ds.origin_us)
            await self.wait_rows(url, 1, [sink, worker], 180.0)
            err.print(f"  {key}: sink and stream worker up (probe event stored)")
            task = self.progress.add_task(f"{STAGE_NUMBER[key]} {label}", total=n)
            self.monitor.sample()
            roles = {"worker": keys["worker"], "sink": keys["sink"], "producer": keys["producer"]}
            if "broker" in self.monitor.tracked:
                roles["broker"] = "broker"
            cpu0 = {role: self.monitor.cpu.get(key, 0.0) for role, key in roles.items()}
            cpu0["producer"] = 0.0
            bench_cpu0 = time.process_time()
            samples: list[tuple[float, int]] = []
            producer = asyncio.create_task(self.run_producer(society, f"producer {key}", keys["producer"]))
            rows_task = asyncio.create_task(
                self.wait_rows(url, n + 1, [sink, worker], self.timeout(), task, 1, samples)
            )
            qstats: dict[str, Any] = {"ok": 0, "failed": 0, "ms": [], "error": None}
            asker = asyncio.create_task(self._queries(url, qstats)) if queries else None
            try:
                done_at = await rows_task
                doc = await producer
            finally:
                for t in (rows_task, producer, *([asker] if asker else [])):
                    if not t.done():
                        t.cancel()
                        with contextlib.suppress(BaseException):
                            await t
            st.events = n
            st.seconds = done_at - float(doc["first_send"])
            produce_s = float(doc["last_ack"]) - float(doc["first_send"])
            st.note = f"first send -> N rows in ClickHouse; producer alone took {produce_s:.1f} s"
            st.note += "; " + tenths(samples, float(doc["first_send"]), n)
            if queries:
                ms = qstats["ms"]
                st.note += (
                    f"; {qstats['ok']:,} queries answered (p50 {fmt_ms(percentile(ms, 0.5))},"
                    f" p99 {fmt_ms(percentile(ms, 0.99))}), {qstats['failed']:,} failed"
                    + (f" ({qstats['error']})" if qstats["error"] else "")
                )
                self.monitor.sample()
                return
            self.monitor.sample()
            mem = self.run_info.memory
            for role, key in keys.items():
                mem.peak[role] = self.monitor.peak.get(key, 0)
                mem.final[role] = self.monitor.last.get(key, 0)
            for role, key in roles.items():
                mem.cpu[role] = self.monitor.cpu.get(key, 0.0) - cpu0[role]
            mem.cpu["benchmark"] = time.process_time() - bench_cpu0
            mem.e2e_seconds = st.seconds
            health_doc = await asyncio.to_thread(health, url)
            if health_doc and int(health_doc["rows"].get("dead_letters", 0)):
                st.note += f"; {health_doc['rows']['dead_letters']:,} dead letters"
        finally:
            for key in keys.values():
                self.monitor.untrack(key)
            self.children.stop(worker)
            self.children.stop(sink)
        err.print(f"  {key}: {st.rate or 0:,.0f} events/s")

    # --- 7. latency --------------------------------------------------------------------------------
    async def stage_latency(self) -> None:
        assert self.ds is not None
        res = self.run_info.latency
        self.run_info.stage_started["latency"] = time.time()
        soc = self.soc_c
        sink = self.spawn_sink(soc, "sink latency")
        worker = self.spawn_role("streams", soc, "stream worker latency", window_seconds=1.0)
        url = await self.wait_sink(soc, sink)
        origin_us = int(time.time()) * 1_000_000
        await self.probe(soc, origin_us)
        await self.wait_rows(url, 1, [sink, worker], 180.0)
        err.print("  latency: sink and stream worker up (probe event stored)")
        seconds = float(self.args.latency_seconds)
        task = self.progress.add_task("6 latency (1,000 events/s)", total=seconds)
        await latency_run(self, url, soc, origin_us, seconds, task, res, [sink, worker])
        self.children.stop(worker)
        self.children.stop(sink)
        err.print(f"  latency: p50 {fmt_s(res.p50)} s, p99 {fmt_s(res.p99)} s over {res.windows} windows")

    # --- 7. replay ----------------------------------------------------------------------------------
    async def stage_replay(self) -> None:
        from molt_society.replay.archive import read_jsonl_docs
        from molt_society.replay.publisher import PublishStats, publish

        assert self.ds is not None
        st = self.stage("replay", "replay: read .jsonl.gz archive -> publish -> validate -> ClickHouse")
        soc = self.soc_r
        n = self.ds.events
        window_us = int(self.settings.window_seconds * 1_000_000)
        archive = self.tmp / "replay.jsonl.gz"
        began = time.perf_counter()
        types = await asyncio.to_thread(
            write_replay_archive,
            self.ds.files[self.soc_a],
            archive,
            society=self.soc_a,
            origin_us=self.ds.origin_us - self.ds.origin_us % window_us,
            last_window_us=(self.ds.end_us - 1) - (self.ds.end_us - 1) % window_us,
            window_seconds=self.settings.window_seconds,
        )
        mix = ", ".join(f"{t} {c / max(1, n):.1%}" for t, c in types.most_common())
        size = archive.stat().st_size
        err.print(f"  replay: archive of {n:,} events, {size / MIB:,.0f} MiB, written in "
                  f"{time.perf_counter() - began:.1f} s; mix {mix}")  # fmt: skip
        sink = self.spawn_sink(soc, "sink replay")
        worker = self.spawn_role("streams", soc, "stream worker replay")
        try:
            url = await self.wait_sink(soc, sink)
            await self.probe(soc, self.ds.origin_us)
            await self.wait_rows(url, 1, [sink, worker], 180.0)
            err.print("  replay: sink and stream worker up (probe event stored)")
            task = self.progress.add_task("7 replay", total=n)
            gc.collect()
            started = time.time()
            header, events = read_jsonl_docs(archive)
            assert header is not None
            publish_task = asyncio.create_task(
                publish(
                    events,
                    bootstrap=self.bootstrap,
                    society=soc,
                    partitions=self.partitions,
                    window_seconds=header.window_seconds or self.settings.window_seconds,
                    origin_us=header.origin_us,
                    last_window_us=header.last_window_us,
                    speed=None,
                    on_progress=lambda s: None,
                )
            )
            rows_task = asyncio.create_task(
                self.wait_rows(url, n + 1, [sink, worker], self.timeout(), task, 1)
            )
            try:
                stats: PublishStats = await publish_task
                published_at = time.time()
                done_at = await rows_task
            finally:
                for t in (rows_task, publish_task):
                    if not t.done():
                        t.cancel()
                        with contextlib.suppress(BaseException):
                            await t
            if stats.events != n:
                raise RuntimeError(f"published {stats.events:,} of {n:,} events")
            st.events = n
            st.seconds = done_at - started
            pub_s = published_at - started
            st.note = (
                f"start of reading the archive ({size / MIB:,.0f} MiB, streamed) -> N rows in ClickHouse; "
                f"publisher alone (read + validate + send, acks=all) {pub_s:.1f} s = "
                f"{stats.events / max(pub_s, 1e-9):,.0f} events/s, {stats.marks:,} marks; mix {mix}"
            )
            health_doc = await asyncio.to_thread(health, url)
            if health_doc and int(health_doc["rows"].get("dead_letters", 0)):
                st.note += f"; {health_doc['rows']['dead_letters']:,} dead letters"
        finally:
            self.children.stop(worker)
            self.children.stop(sink)
            with contextlib.suppress(OSError):
                archive.unlink()
        ok = replay_verdict(st)
        verdict = "n/a" if ok is None else ("met" if ok else "NOT met")
        err.print(f"  replay: {n:,} events in {st.seconds:.1f} s = {st.rate or 0:,.0f} events/s; "
                  f"target {TARGET_REPLAY_EVENTS:,} in < {TARGET_REPLAY_S:.0f} s: {verdict}")  # fmt: skip


def replay_verdict(st: Stage | None) -> bool | None:
    """Whether the replay stage met 1,000,000 events in < 60 s (at its rate, when N is not 1,000,000)."""
    if st is None or st.rate is None:
        return None
    return st.rate * TARGET_REPLAY_S > TARGET_REPLAY_EVENTS


# --------------------------------------------------------------------------------------------- latency
def latency_events(ds: Dataset, society: str) -> Iterator[tuple[dict[str, Any], int]]:
    """Endless thread-shaped events (templates remapped per cycle) with their copy mask."""
    cycle = 0
    while True:
        mask = copy_mask(1_000_003 + cycle)
        for item in ds.steady:
            yield item.doc, mask
        cycle += 1


async def latency_run(
    bench: Bench,
    url: str,
    society: str,
    origin_us: int,
    seconds: float,
    task: TaskID,
    res: LatencyResult,
    procs: list[subprocess.Popen[bytes]],
) -> None:
    """Produce ``LATENCY_RATE`` events/s with wall-clock event times and a mark every 100 ms; measure."""
    topic = topic_name(society, Role.ACTIONS)
    producer = AIOKafkaProducer(
        bootstrap_servers=bench.bootstrap, acks="all", linger_ms=5, max_batch_size=1 << 20
    )
    await producer.start()
    headers = [(HEADER_KIND, KIND_WATERMARK)]
    source = latency_events(bench.ds, society) if bench.ds else iter(())
    last_sent: dict[int, float] = {}  # window start (us) -> wall time its last event was sent
    inserted: dict[int, float] = {}  # window start (us) -> min(_inserted_at) (epoch s)
    seen: dict[int, float] = {}  # window start (us) -> wall time the poll first saw it
    sql = (
        f"SELECT window_start, min(_inserted_at) FROM metrics WHERE society = '{society}' "
        "AND metric = 'events_total' GROUP BY window_start"
    )
    stop_polling = asyncio.Event()

    async def poll() -> None:
        async with aiohttp.ClientSession() as session:
            while not stop_polling.is_set():
                try:
                    async with session.post(f"{url}/query", json={"sql": sql}) as resp:
                        doc = await resp.json(loads=orjson.loads)
                    now = time.time()
                    for start, ins in doc.get("rows", []):
                        w = control.to_us(datetime.fromisoformat(start.replace("Z", "+00:00")))
                        if w not in seen:
                            seen[w] = now
                        inserted[w] = parse_ts(ins)
                except (aiohttp.ClientError, ValueError, KeyError):
                    pass
                await asyncio.sleep(0.05)

    mark_tick = 0

    async def send_marks(pending: list[Awaitable[Any]]) -> None:
        nonlocal mark_tick
        now_us = int(time.time() * 1_000_000)
        tick = (now_us - origin_us) // 1_000_000
        mark_tick = max(mark_tick, tick)
        name = control.REPLAY_PRODUCER  # a producer every society registers
        raw = control.dumps(control.watermark(name, [name], now_us, mark_tick, origin_us))
        for q in range(bench.partitions):
            pending.append(await producer.send(topic, raw, partition=q, headers=headers))

    poller = asyncio.create_task(poll())
    pending: list[Awaitable[Any]] = []
    sent = 0
    try:
        began = time.time()
        end = began + seconds
        next_mark = began
        while True:
            now = time.time()
            if now >= end:
                break
            due = int((now - began) * LATENCY_RATE)
            while sent < due:
                doc, mask = next(source)
                occurred_us = int(time.time() * 1_000_000)
                ev = remapped(doc, mask, iso_us(occurred_us), society)
                pending.append(await producer.send(topic, orjson.dumps(ev), key=key_of(ev)))
                last_sent[occurred_us - occurred_us % 1_000_000] = time.time()
                sent += 1
            if now >= next_mark:
                await send_marks(pending)
                next_mark += 0.1
            if len(pending) > 2_000:
                await asyncio.gather(*pending)
                pending = []
            bench.progress.update(task, completed=min(seconds, now - began))
            for p in procs:
                bench.children.check(p)
            await asyncio.sleep(0.002)
        res.produced = sent
        res.seconds = time.time() - began
        # The full windows: those that started after the first event and ended before the last one.
        full = [w for w in sorted(last_sent) if w >= began * 1e6 and w + 1_000_000 <= end * 1e6]
        deadline = time.time() + 30
        while time.time() < deadline and not all(w in inserted for w in full):
            if time.time() >= next_mark:
                await send_marks(pending)  # a producer keeps marking time while idle
                next_mark += 0.1
            await asyncio.sleep(0.02)
        await asyncio.gather(*pending)
    finally:
        stop_polling.set()
        with contextlib.suppress(Exception):
            await poller
        await producer.stop()
    lat = [inserted[w] - (w + 1_000_000) / 1e6 for w in full if w in inserted]
    vis = [seen[w] - (w + 1_000_000) / 1e6 for w in full if w in seen]
    vs_last = [inserted[w] - last_sent[w] for w in full if w in inserted]
    res.windows = len(lat)
    res.p50, res.p99, res.max = percentile(lat, 50), percentile(lat, 99), max(lat, default=None)
    res.seen_p50, res.seen_p99, res.seen_max = (
        percentile(vis, 50),
        percentile(vis, 99),
        max(vis, default=None),
    )
    res.vs_last_p50, res.vs_last_p99 = percentile(vs_last, 50), percentile(vs_last, 99)
    missing = len(full) - len(lat)
    if missing:
        res.error = f"{missing} of {len(full)} windows never reached ClickHouse within 30 s"


# ------------------------------------------------------------------------------------------ log parsing
def sink_flushes(path: Path) -> list[tuple[float, float, int]]:
    """``(timestamp, latency_s, rows)`` of every events-table ``sink.flushed`` line of a sink log."""
    out: list[tuple[float, float, int]] = []
    if not path.exists():
        return out
    for line in path.read_text(errors="replace").splitlines():
        if '"sink.flushed"' not in line:
            continue
        try:
            doc = orjson.loads(line)
        except orjson.JSONDecodeError:
            continue
        if doc.get("table") != "events":
            continue
        out.append((parse_ts(doc["timestamp"]), float(doc["latency_ms"]) / 1000, int(doc["rows"])))
    return out


def tenths(samples: list[tuple[float, int]], t0: float, total: int) -> str:
    """Rate over the first and the last tenth of ``total`` from ``(time, count)`` samples."""
    if not samples or total <= 0:
        return "no samples"

    def when(count: float) -> float | None:
        return next((t for t, c in samples if c >= count), None)

    t1, t9, t10 = when(total * 0.1), when(total * 0.9), when(total)
    if t1 is None or t9 is None or t10 is None or t1 <= t0 or t10 <= t9:
        return "rate by tenth: n/a"
    first = total * 0.1 / (t1 - t0)
    last = total * 0.1 / (t10 - t9)
    return f"first tenth of the events at {first:,.0f}/s, last tenth at {last:,.0f}/s"


def log_times(path: Path, event: str) -> list[float]:
    """Timestamps of the JSON log lines of ``event`` in a child's log."""
    needle = f'"event": "{event}"'
    out: list[float] = []
    if not path.exists():
        return out
    for line in path.read_text(errors="replace").splitlines():
        if needle in line:
            with contextlib.suppress(orjson.JSONDecodeError, KeyError, ValueError):
                out.append(parse_ts(orjson.loads(line)["timestamp"]))
    return out


def flush_span(flushes: list[tuple[float, float, int]], want: int) -> tuple[float | None, float | None]:
    """Start of the first insert and end of the insert that brought the rows to ``want``."""
    inserts = [f for f in flushes if f[2] > 0]
    if not inserts:
        return None, None
    start = inserts[0][0] - inserts[0][1]
    total = 0
    for ts, _, rows in inserts:
        total += rows
        if total >= want:
            return start, ts
    return start, None


def summarize_profile(text: str, top: int = 15) -> tuple[list[tuple[str, float]], list[tuple[str, float]]]:
    """Self and inclusive shares of functions in py-spy ``--format raw`` (collapsed stacks) output."""
    selfc: Counter[str] = Counter()
    incl: Counter[str] = Counter()
    total = 0
    for line in text.splitlines():
        stack, _, count_s = line.rpartition(" ")
        if not stack or not count_s.isdigit():
            continue
        count = int(count_s)
        frames = [re.sub(r":\d+\)$", ")", f) for f in stack.split(";")]
        frames = [f for f in frames if "(" in f]  # drop process/thread labels
        if not frames:
            continue
        total += count
        selfc[frames[-1]] += count
        for f in set(frames):
            incl[f] += count
    if not total:
        return [], []

    def short(name: str) -> str:
        return re.sub(r"\(/.*?/(site-packages|main)/", "(", name)

    return (
        [(short(f), c / total) for f, c in selfc.most_common(top)],
        [(short(f), c / total) for f, c in incl.most_common(top * 2)],
    )


# ------------------------------------------------------------------------------------------- reporting
def fmt_rate(v: float | None) -> str:
    return "-" if v is None else f"{v:,.0f}"


def fmt_ms(v: float | None) -> str:
    return "-" if v is None else f"{v:,.0f} ms"


def fmt_s(v: float | None) -> str:
    return "-" if v is None else f"{v:.2f}"


def fmt_mib(v: int | None) -> str:
    return "-" if not v else f"{v / MIB:,.0f} MiB"


STAGE_ORDER = ("ceiling", "producer", "processor", "sink", "e2e", "e2e_queries", "replay")
STAGE_NUMBER = {
    "ceiling": "1",
    "producer": "2",
    "processor": "3",
    "sink": "4",
    "e2e": "5",
    "e2e_queries": "5b",
    "replay": "7",
}
MEMORY_ROLES = ("worker", "sink", "producer", "broker")


def results_rows(run: Run) -> list[list[str]]:
    ceiling = run.stages.get("ceiling")
    c_rate = ceiling.rate if ceiling else None
    rows = []
    for key in STAGE_ORDER:
        i = STAGE_NUMBER[key]
        st = run.stages.get(key)
        if st is None:
            continue
        ratio = f"{st.rate / c_rate:.2f}" if st.rate and c_rate else "-"
        if st.error:
            rows.append([str(i), st.label, "-", "-", "failed", "-", st.error])
        else:
            rows.append(
                [str(i), st.label, f"{st.events:,}", f"{st.seconds:.2f}", fmt_rate(st.rate), ratio, st.note]
            )
    return rows


def targets(run: Run) -> list[list[str]]:
    e2e = run.stages.get("e2e")
    e2e_rate = e2e.rate if e2e else None
    lat = run.latency
    worker = run.memory.peak.get("worker")
    n = run.events

    def verdict(ok: bool | None) -> str:
        return "n/a" if ok is None else ("**met**" if ok else "**not met**")

    replay = run.stages.get("replay")
    replay_ok = replay_verdict(replay)
    replay_measured = "-"
    if replay is not None and replay.rate is not None:
        replay_measured = (
            f"{replay.events:,} events in {replay.seconds:.1f} s ({fmt_rate(replay.rate)} events/s)"
        )
        if replay.events != TARGET_REPLAY_EVENTS:
            replay_measured += f"; at that rate 1,000,000 in {TARGET_REPLAY_EVENTS / replay.rate:.1f} s"
    rss_note = ""
    if n < 1_000_000:
        rss_note = f" (measured after {n:,} events, not 1,000,000{'; --quick' if run.quick else ''})"
    with_queries = run.stages.get("e2e_queries")
    q_ratio = with_queries.rate / e2e_rate if with_queries and with_queries.rate and e2e_rate else None
    return [
        [
            "end-to-end with a user query every 100 ms >= 0.9 of end-to-end without",
            "-"
            if q_ratio is None
            else f"{q_ratio:.2f} ({fmt_rate(with_queries.rate if with_queries else None)}"
            f" vs {fmt_rate(e2e_rate)} events/s)",
            verdict(None if q_ratio is None else q_ratio >= TARGET_QUERY_RATIO),
        ],
        [
            "end-to-end >= 20,000 events/s",
            f"{fmt_rate(e2e_rate)} events/s",
            verdict(None if e2e_rate is None else e2e_rate >= TARGET_E2E),
        ],
        [
            "metric values in ClickHouse within 2 s (p99) at 1,000 events/s",
            f"p99 {fmt_s(lat.p99)} s (p50 {fmt_s(lat.p50)} s, max {fmt_s(lat.max)} s, {lat.windows} windows)",
            verdict(None if lat.p99 is None else lat.p99 <= TARGET_LATENCY_P99_S and not lat.error),
        ],
        [
            "stream worker peak RSS < 1 GiB after 1,000,000 events",
            f"{fmt_mib(worker)}{rss_note}",
            verdict(None if not worker else worker < TARGET_WORKER_RSS)
            + (" (not at 1M)" if n < 1_000_000 and worker else ""),
        ],
        [
            "replay 1,000,000 events end to end < 60 s",
            replay_measured,
            verdict(replay_ok)
            + (" (not at 1M)" if replay is not None and replay.events != TARGET_REPLAY_EVENTS else ""),
        ],
    ]


def print_table(run: Run) -> None:
    out = Console()
    t = Table(title=f"pipeline benchmark, {run.events:,} events", header_style="bold")
    for col in ("#", "stage", "events", "s", "events/s", "x ceiling"):
        t.add_column(col, justify="right" if col not in ("stage",) else "left")
    for row in results_rows(run):
        t.add_row(*row[:6])
    out.print(t)
    lat = run.latency
    lt = Table(
        title="latency at 1,000 events/s, 1-s windows (window end -> events_total row)", header_style="bold"
    )
    for col in ("measure", "p50 s", "p99 s", "max s"):
        lt.add_column(col)
    lt.add_row("_inserted_at - window end", fmt_s(lat.p50), fmt_s(lat.p99), fmt_s(lat.max))
    lt.add_row(
        "first seen by a 50-ms poll - window end",
        fmt_s(lat.seen_p50),
        fmt_s(lat.seen_p99),
        fmt_s(lat.seen_max),
    )
    out.print(lt)
    mt = Table(title=f"peak RSS during the end-to-end run ({run.events:,} events)", header_style="bold")
    mt.add_column("process")
    mt.add_column("peak")
    mt.add_column("at the end")
    for role in MEMORY_ROLES:
        mt.add_row(role, fmt_mib(run.memory.peak.get(role)), fmt_mib(run.memory.final.get(role)))
    out.print(mt)
    ct = Table(title="CPU during the end-to-end stage", header_style="bold")
    for col in ("process", "CPU s", "cores (average)"):
        ct.add_column(col)
    for row in cpu_rows(run):
        ct.add_row(*row)
    out.print(ct)
    tt = Table(title="targets", header_style="bold")
    for col in ("target", "measured", "verdict"):
        tt.add_column(col)
    for row in targets(run):
        tt.add_row(*(c.replace("**", "") for c in row))
    out.print(tt)


CPU_ROLES = ("worker", "sink", "producer", "broker", "benchmark")


def cpu_rows(run: Run) -> list[list[str]]:
    mem = run.memory
    if not mem.cpu or mem.e2e_seconds <= 0:
        return []
    rows = [
        [role, f"{mem.cpu[role]:.1f}", f"{mem.cpu[role] / mem.e2e_seconds:.2f}"]
        for role in CPU_ROLES
        if role in mem.cpu
    ]
    total = sum(mem.cpu.values())
    rows.append(["all", f"{total:.1f}", f"{total / mem.e2e_seconds:.2f} of {run.machine['nproc']}"])
    return rows


def md_table(header: list[str], rows: list[list[str]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    lines += ["| " + " | ".join(c.replace("|", "\\|") for c in r) + " |" for r in rows]
    return "\n".join(lines)


def history_line(run: Run) -> str:
    def rate(key: str) -> str:
        st = run.stages.get(key)
        return fmt_rate(st.rate if st else None)

    return (
        f"| {run.started:%Y-%m-%d %H:%M} UTC, code `{code_fingerprint(run.code)}`"
        f"{' (changed during the run)' if run.code_changed else ''} | {run.events:,} | "
        f"{rate('ceiling')} | {rate('producer')} | "
        f"{rate('processor')} | {rate('sink')} | {rate('e2e')} | {fmt_s(run.latency.p99)} | "
        f"{fmt_mib(run.memory.peak.get('worker'))} | {run.load_before[0]:.2f} | {rate('replay')} |"
    )


INTRO = """\
Measured by `bench/pipeline.py` (`make bench`): every figure below comes from **one run on one
machine**, so the ratios to the raw consume ceiling compare like with like. Rerun it on your machine;
do not compare absolute numbers across machines. This file is rewritten by each run; the text between
the `notes` markers and the history table are kept.
"""

CEILING_TEXT = """\
The raw consume ceiling ({rate} records/s) is what one Python process reads and parses from this
broker with aiokafka and orjson, doing nothing else; every other stage is shown as a fraction of it.
"""

LATENCY_TEXT = """\
{windows} full windows, {produced:,} events in {seconds:.1f} s.{error}

What is measured: a fresh society with the sink and one stream worker running
(`SOCIETY_WINDOW_SECONDS=1`, everything else default); one producer (in the benchmark process) sends
thread-shaped events whose `occurred_at` is the wall clock at sending, 1,000 per second, and a watermark
(`watermark_us` = now) to every partition every 100 ms. A window `[t, t+1 s)` ends at wall time
`t+1 s`; its last event is sent just before. The latency of a window is the time ClickHouse stored the
window's `events_total` metric row (`min(_inserted_at)`, the sink's `now64(3)`, same clock) minus the
window end. It covers the watermark delay (up to 100 ms), validation, the window partials on the
partials topic, the Faust aggregator computing all the window's metrics, the metrics topic, and the
sink's batching (`SOCIETY_SINK_BATCH_SECONDS`, 0.5 s by default). The `/query` endpoint was polled every
50 ms for the row; the second line is when the poll first saw it. Only windows that started after the
first event and ended before the last one count; with ~30 windows, p99 is the maximum.
"""

MEMORY_TEXT = """\
Peak RSS (psutil, process + children, sampled every 0.5 s) during the end-to-end run of {events:,}
events{quick}. The producer is `bench/producer.py`, which streams its input file in 4 MiB chunks, so
its RSS is the client's own (aiokafka buffers and up to 100,000 in-flight send futures). The broker
line is the Tansu process over the whole run, for context: it keeps every topic in memory.
"""

CPU_TEXT = """\
User + system CPU time (psutil, process + children) used from the start of the producer until N rows
were in ClickHouse ({seconds:.1f} s), and the average number of cores that is; the benchmark line is
this process (polling `/health`). When "all" is close to {nproc}, the machine is saturated and the
end-to-end rate is bounded by the sum of the processes' work, not by the slowest stage alone.
"""

DATA_TEXT = """\
{events:,} valid events, mean {mean:.0f} B of JSON. A society of {agents:,} agents simulated by
`agents.offline.simulate` (the calibrated MoltBook-shaped model) for {ticks:,} ticks of 60 s; its posts,
comments and votes tiled {copies}x forward in time with remapped ids (every comment and vote references a
post or comment of its own copy, so nothing is dead-lettered; agents are the same in every copy). Mix:
{mix}. Keyed by thread (`partition_key`) over {partitions} partitions. {marks:,} watermark records: one
producer, a mark on every partition every ~1,000 events per partition, plus a final mark; with the
default 1-hour windows the stream worker closes {windows:,} windows whose metrics the aggregator computes.
Event times end about two hours before the run.
"""

METHOD_TEXT = """\
- One broker for the whole run (a local Tansu unless `KAFKA_BOOTSTRAP` is set), fresh society names, a
  temporary directory for chDB and state. Workers and sinks are the real `python -m molt_society.streams` and
  `python -m molt_society.sinks` processes with default settings, started like `society run` starts them.
- 1 raw ceiling: after stage 2, one aiokafka consumer (no group, `max_poll_records=10000`,
  `fetch_max_wait_ms=20`, 8 MiB per partition, uvloop) reads the actions topic from the beginning and
  `orjson.loads` every value: records (events + watermarks) / seconds.
- 2 producer: `bench/producer.py` (aiokafka, `acks=all`, `linger_ms=5`, 1 MiB batches, uvloop) sends the
  N pre-encoded events (keyed) and the watermarks: N / (last ack - first send).
- 3 stream processor: one `python -m molt_society.streams` worker started on the filled actions topic:
  N / (time the events and marks topics hold all N events and marks - time its first record appeared),
  read from fetch high watermarks every ~0.1 s (`end_offsets` is wrong on Tansu). The Faust aggregator
  runs in the same process and competes with the processor for it; when it finishes the metrics of the
  last window is reported in the note (it may lag behind the events).
- 4 sink: `python -m molt_society.sinks` started on the events topic of stage 3: N / (end of the insert that
  completed N rows - start of its first insert), from its `sink.flushed` log lines (and `/health`).
- 5 end to end: fresh society; sink and stream worker started and warm (a probe event went all the way to
  ClickHouse); then the producer child sends N events (+ marks) at full speed:
  N / (time `/health` first shows N rows - first send).
- 7 replay: the same N events sorted by `(occurred_at, event_id)` and written once (not timed) to a
  `.jsonl.gz` archive in `replay.archive`'s format; fresh society, sink and stream worker warm as in 5;
  then, in the benchmark process, `replay.archive.read_jsonl_docs` streams the archive (gunzip, JSON;
  events are validated by the stream worker, as in `society replay`) into
  `replay.publisher.publish(speed=None)` (the code `society replay` runs; it
  re-addresses every event to the new society, sends it keyed by thread with `acks=all` and emits its own
  watermarks): N / (time `/health` first shows N rows - start of reading). `society replay` itself first
  loads and sorts the whole archive in memory; here it is streamed, already sorted.
"""

NOISE_TEXT = """\
The machine has {nproc} cores and was shared with other work during the run (load average before the
run {before}, after {after}). The broker, the stream worker, the sink, the producer and the benchmark
itself share those cores: each stage competes with whatever else runs, and in the end-to-end stage with
all the pipeline's processes at once. Expect +-10-20% between runs; ratios to the ceiling, measured
minutes apart in the same run, are steadier than absolute figures.
"""

NOTES_BEGIN = "<!-- notes:begin -->"
NOTES_END = "<!-- notes:end -->"


DASHBOARD_BEGIN, DASHBOARD_END = "<!-- dashboard:begin -->", "<!-- dashboard:end -->"
REPORT_BEGIN, REPORT_END = "<!-- report:begin -->", "<!-- report:end -->"
LLM_BEGIN, LLM_END = "<!-- llm:begin -->", "<!-- llm:end -->"
KEPT_BLOCKS = [
    (DASHBOARD_BEGIN, DASHBOARD_END),
    (REPORT_BEGIN, REPORT_END),
    (LLM_BEGIN, LLM_END),
]  # written by other benchmarks


def kept_blocks(text: str) -> list[tuple[str, str]]:
    """Every ``<!-- name:begin -->`` ... ``<!-- name:end -->`` block of another benchmark, in file order
    (``KEPT_BLOCKS`` and any other: a benchmark that writes BENCHMARKS.md marks its section this way)."""
    own = {NOTES_BEGIN, HISTORY_BEGIN}
    found = [m.group(0) for m in re.finditer(r"<!-- [a-z0-9-]+:begin -->", text)]
    names = [*found, *(b for b, _ in KEPT_BLOCKS if b not in found)]
    return [(b, b.replace(":begin", ":end")) for b in names if b not in own]


def _block(text: str, begin: str, end: str) -> str | None:
    if begin in text and end in text:
        return text.split(begin, 1)[1].split(end, 1)[0].strip("\n")
    return None


def code_warning(run: Run) -> str:
    """A warning naming the source files that changed while the benchmark ran, and when."""
    starts = ", ".join(
        f"{key} {datetime.fromtimestamp(t, UTC):%H:%M:%S}" for key, t in run.stage_started.items()
    )
    files = ", ".join(
        f"`{p}` ({datetime.fromtimestamp(t, UTC):%H:%M:%S})" if t else f"`{p}` (deleted)"
        for p, t in run.code_changed
    )
    return (
        f"**Warning: source files changed while this run was going on** (other work on the repository): "
        f"{files}. A child process runs the code as it was when the process started; stages started "
        f"(UTC) at: {starts}. Figures of stages started before and after a change measure different "
        "code.\n"
    )


def write_markdown(run: Run, path: Path) -> None:
    old_history: list[str] = []
    notes = ""
    kept: dict[str, str] = {}  # blocks written by bench.dashboard and bench.report; kept as they are
    if path.exists():
        text = path.read_text()
        block = _block(text, HISTORY_BEGIN, HISTORY_END)
        if block is not None:
            old_history = [ln for ln in block.splitlines() if ln.startswith("| 20")]
        notes = _block(text, NOTES_BEGIN, NOTES_END) or ""
        for begin, end in kept_blocks(text):
            if (found := _block(text, begin, end)) is not None:
                kept[begin] = found
    m = run.machine
    ds = run.dataset
    lat = run.latency
    ceiling = run.stages.get("ceiling")

    def loads(v: tuple[float, float, float] | None) -> str:
        return "-" if v is None else " / ".join(f"{x:.2f}" for x in v)

    broker = "KAFKA_BOOTSTRAP" if os.environ.get("KAFKA_BOOTSTRAP") else "local Tansu 0.6.0 (memory storage)"
    parts: list[str] = ["# Benchmarks\n", INTRO, "## Run\n"]
    run_rows = [
        ["date", f"{run.started:%Y-%m-%d %H:%M} UTC"],
        ["command", f"`{run.command}`"],
        ["machine", f"nproc {m['nproc']}, {m['cpu']}, {m['ram']} RAM, {m['os']}"],
        ["software", f"Python {m['python']}, aiokafka {m['aiokafka']}, {broker}, chDB (embedded ClickHouse)"],
        ["events per stage", f"{run.events:,}" + (" (`--quick`)" if run.quick else "")],
        ["code", f"`{code_fingerprint(run.code)}` (sha256 of {', '.join(CODE_DIRS)} sources at the start)"],
        ["load average (1/5/15 min)", f"before {loads(run.load_before)}; after {loads(run.load_after)}"],
    ]
    parts.append(md_table(["", ""], run_rows) + "\n")
    if run.code_changed:
        parts.append(code_warning(run))
    parts.append("## Throughput\n")
    header = ["#", "stage", "events", "seconds", "events/s", "x raw ceiling", "what exactly"]
    parts.append(md_table(header, results_rows(run)) + "\n")
    if ceiling and ceiling.rate:
        parts.append(CEILING_TEXT.format(rate=fmt_rate(ceiling.rate)))
    parts.append("## Latency\n")
    lat_rows = [
        ["`events_total` row stored (`_inserted_at`) - window end", lat.p50, lat.p99, lat.max],
        ["first seen by the 50-ms `/query` poll - window end", lat.seen_p50, lat.seen_p99, lat.seen_max],
        ["`_inserted_at` - when the window's last event was sent", lat.vs_last_p50, lat.vs_last_p99, None],
    ]
    parts.append(
        md_table(
            ["1,000 events/s, 1-s windows, marks every 100 ms", "p50 s", "p99 s", "max s"],
            [[str(r[0]), *(fmt_s(v) if isinstance(v, float) else "-" for v in r[1:])] for r in lat_rows],
        )
    )
    parts.append("")
    parts.append(
        LATENCY_TEXT.format(
            windows=lat.windows,
            produced=lat.produced,
            seconds=lat.seconds,
            error=f" **{lat.error}**" if lat.error else "",
        )
    )
    parts.append("## Memory\n")
    mem_rows = [
        [role, fmt_mib(run.memory.peak.get(role)), fmt_mib(run.memory.final.get(role))]
        for role in MEMORY_ROLES
    ]
    parts.append(md_table(["process", "peak RSS", "RSS at the end"], mem_rows) + "\n")
    quick = " (`--quick`: 200,000, not 1,000,000)" if run.quick else ""
    parts.append(MEMORY_TEXT.format(events=run.events, quick=quick))
    if cpu_rows(run):
        parts.append("## CPU during the end-to-end stage\n")
        parts.append(md_table(["process", "CPU seconds", "cores (average)"], cpu_rows(run)) + "\n")
        parts.append(CPU_TEXT.format(seconds=run.memory.e2e_seconds, nproc=run.machine["nproc"]))
    parts.append("## Targets\n")
    parts.append(md_table(["target (from the issue)", "measured", "verdict"], targets(run)) + "\n")
    if notes.strip():
        parts.append(NOTES_BEGIN + "\n" + notes + "\n" + NOTES_END + "\n")
    else:
        parts.append(NOTES_BEGIN + "\n" + NOTES_END + "\n")
    if run.profile:
        parts.append("## Profile of the stream worker (this run)\n")
        parts.append(
            "py-spy on the stream worker during stage 3 (`--profile`: 100 Hz, `--gil`: only the thread "
            "holding the GIL, i.e. where the process's one Python core goes; `--nonblocking`, because "
            "stopping the process for each sample both slows it and biases the samples towards "
            "system calls). Shares of samples.\n"
        )
        prof = [[f"`{f}`", f"{s:.1%}"] for f, s in run.profile]
        parts.append(md_table(["function (file), self time", "share of samples"], prof) + "\n")
        incl = [[f"`{f}`", f"{s:.1%}"] for f, s in run.profile_inclusive]
        parts.append(md_table(["function (file), inclusive", "share of samples"], incl) + "\n")
    parts.append("## Data\n")
    if ds is not None:
        parts.append(
            DATA_TEXT.format(
                events=ds.events,
                mean=ds.mean_bytes,
                agents=ds.agents,
                ticks=ds.base_ticks,
                copies=ds.copies,
                mix=", ".join(f"{t} {c / ds.events:.1%}" for t, c in ds.types.most_common()),
                partitions=m.get("partitions", "4"),
                marks=ds.marks,
                windows=math.ceil((ds.end_us - ds.origin_us) / 3.6e9),
            )
        )
    parts.append("## Method\n")
    parts.append(METHOD_TEXT)
    parts.append("## Noise\n")
    parts.append(
        NOISE_TEXT.format(nproc=m["nproc"], before=loads(run.load_before), after=loads(run.load_after))
    )
    if run.notes:
        parts.append("Notes of this run: " + "; ".join(run.notes) + "\n")
    history = [*old_history, history_line(run)][-20:]
    hist_header = [
        "date", "events", "ceiling/s", "producer/s", "processor/s", "sink/s", "e2e/s", "latency p99 s",
        "worker peak RSS", "load 1 min", "replay/s",
    ]  # fmt: skip
    for begin in kept:
        parts.append(begin + "\n" + kept[begin] + "\n" + begin.replace(":begin", ":end") + "\n")
    parts.append("## History\n")
    parts.append("One line per run that wrote this file, newest last.\n")
    parts.append(
        HISTORY_BEGIN
        + "\n"
        + md_table(hist_header, [])
        + "\n"
        + "\n".join(history)
        + "\n"
        + HISTORY_END
        + "\n"
    )
    path.write_text("\n".join(parts))


# ------------------------------------------------------------------------------------------------ main
def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m molt_society.bench.pipeline", description=__doc__.splitlines()[0]
    )
    parser.add_argument("--events", type=int, default=None, help="events per stage (default 1,000,000)")
    parser.add_argument("--quick", action="store_true", help="200,000 events instead of 1,000,000")
    parser.add_argument("--latency-seconds", type=float, default=30.0, help="length of the latency run")
    parser.add_argument(
        "--output",
        type=Path,
        default=None,
        help="Markdown report to write (default BENCHMARKS.md; not written by default with --skip)",
    )
    parser.add_argument("--no-write", action="store_true", help="print only, do not write the report")
    parser.add_argument("--profile", action="store_true", help="py-spy the stream worker during stage 3")
    parser.add_argument("--profile-out", type=Path, default=None, help="keep the raw py-spy profile here")
    parser.add_argument("--keep", action="store_true", help="keep the work directory (logs, data)")
    parser.add_argument(
        "--skip",
        nargs="*",
        default=[],
        choices=["producer", "ceiling", "processor", "sink", "e2e", "e2e_queries", "latency", "replay"],
    )
    args = parser.parse_args(argv)
    if args.events is None:
        args.events = 200_000 if args.quick else 1_000_000
    if args.events < 1_000:
        parser.error("--events must be at least 1,000")
    return args


def main(argv: list[str] | None = None) -> int:
    raw = sys.argv[1:] if argv is None else argv
    args = parse_args(raw)
    exe = (
        os.path.relpath(sys.executable, Path.cwd())
        if sys.executable.startswith(str(Path.cwd()))
        else sys.executable
    )
    run = Run(
        started=datetime.now(UTC),
        command=" ".join([exe, "-m", "molt_society.bench.pipeline", *raw]),
        events=args.events,
        quick=args.quick,
        machine=machine_info(),
        load_before=os.getloadavg(),
        code=code_state(),
    )
    bench = Bench(args, run)
    run.machine["partitions"] = str(bench.partitions)
    import uvloop

    try:
        with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
            runner.run(bench.main())
    except KeyboardInterrupt:
        err.print("interrupted")
        return 130
    run.load_after = os.getloadavg()
    end_state = code_state()
    run.code_changed = sorted(
        (path, mtime)
        for path, (digest, mtime) in end_state.items()
        if run.code.get(path, ("", 0.0))[0] != digest
    )
    run.code_changed += [(path, 0.0) for path in sorted(set(run.code) - set(end_state))]
    if run.code_changed:
        err.print(
            "[yellow]warning:[/yellow] source files changed during the run: "
            + ", ".join(p for p, _ in run.code_changed)
        )
    print_table(run)
    if args.output is None and args.skip:
        err.print("--skip: BENCHMARKS.md left as it is (give --output to write a partial report)")
    elif not args.no_write:
        output = args.output or REPO / "BENCHMARKS.md"
        write_markdown(run, output)
        err.print(f"wrote {output}")
    failed = [s.key for s in run.stages.values() if s.error] + (["latency"] if run.latency.error else [])
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
