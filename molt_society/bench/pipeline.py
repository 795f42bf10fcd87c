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
import math
import os
import shutil
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import orjson
from aiokafka import TopicPartition
from rich.progress import BarColumn, Progress, SpinnerColumn, TaskID, TextColumn, TimeElapsedColumn

from molt_society.bench import producer
from molt_society.bench.child_logs import flush_span, log_times, sink_flushes
from molt_society.bench.dataset import Dataset, build, write_replay_archive
from molt_society.bench.harness import Harness, err, health, http_json
from molt_society.bench.highwater import HighWatch
from molt_society.bench.machine import machine_info
from molt_society.bench.pipeline_latency import latency_run
from molt_society.bench.pipeline_report import STAGE_NUMBER, fmt_ms, fmt_s, print_table, write_markdown
from molt_society.bench.pipeline_results import (
    TARGET_REPLAY_EVENTS,
    TARGET_REPLAY_S,
    Run,
    Stage,
    code_changes,
    code_state,
    replay_verdict,
)
from molt_society.bench.processes import REPO
from molt_society.bench.profiling import py_spy_argv, summarize_profile
from molt_society.bench.stats import percentile, tenths
from molt_society.runtime import kafka
from molt_society.runtime.broker import ensure_topics
from molt_society.runtime.record_auth import RecordKeys
from molt_society.runtime.settings import get_settings
from molt_society.schemas.topics import Role, topic_name

MIB = 1 << 20
QUERY_EVERY_S = 0.1
QUERY_UNDER_LOAD = "SELECT type, count() AS events, uniqExact(actor) AS agents FROM events GROUP BY type"
"""What the reader of stage 5b asks every 100 ms (the demo's first query, over the whole table)."""


async def dead_letters(url: str) -> str:
    """``; N dead letters`` when the sink at ``url`` stored any, else nothing."""
    doc = await asyncio.to_thread(health, url)
    if doc and int(doc["rows"].get("dead_letters", 0)):
        return f"; {doc['rows']['dead_letters']:,} dead letters"
    return ""


# ----------------------------------------------------------------------------------------------- bench
class Bench(Harness):
    """One run of every stage, on one broker, in one work directory."""

    def __init__(self, args: argparse.Namespace, run: Run) -> None:
        super().__init__(get_settings())
        self.args = args
        self.run_info = run
        self.n: int = args.events
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
    def shows(self, task: TaskID) -> Callable[[float], None]:
        """A callback that sets the progress of ``task``."""
        return lambda done: self.progress.update(task, completed=done)

    def timeout(self) -> float:
        return 180.0 + self.n / 2_000

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
            self.stop_children()
            if "broker" in self.monitor.peak:
                self.run_info.memory.peak["broker"] = self.monitor.peak["broker"]
                self.run_info.memory.final["broker"] = self.monitor.last.get("broker", 0)
            self.close(self.args.keep)

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
        self.start_broker()
        err.print(f"broker {self.bootstrap}; work dir {self.tmp}")
        for soc in (self.soc_a, self.soc_b, self.soc_q, self.soc_c, self.soc_r):
            await ensure_topics(self.bootstrap, soc, self.partitions, self.settings.shards)

    async def run_producer(self, society: str, name: str, mem_key: str) -> dict[str, Any]:
        assert self.ds is not None
        topic = topic_name(society, Role.ACTIONS)
        argv = producer.command(self.bootstrap, topic, self.ds.files[society], self.state_dir)
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
        consumer = kafka.consumer(
            self.bootstrap,
            "reader",
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
        argv = py_spy_argv(pid, self.tmp / "profile.txt")
        if argv is None:
            self.run_info.notes.append("--profile: py-spy not found (pip install py-spy)")
            return None
        return self.children.spawn("py-spy", argv, dict(os.environ))

    def stop_profiler(self, proc: subprocess.Popen[bytes]) -> None:
        self.children.stop(proc, timeout=30, sig=signal.SIGINT)
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
            polled = await self.wait_rows(url, self.ds.events, [proc], self.timeout(), self.shows(task))
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
                self.wait_rows(url, n + 1, [sink, worker], self.timeout(), self.shows(task), 1, samples)
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
                    f"; {qstats['ok']:,} queries answered (p50 {fmt_ms(percentile(ms, 50))},"
                    f" p99 {fmt_ms(percentile(ms, 99))}), {qstats['failed']:,} failed"
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
            st.note += await dead_letters(url)
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
        await latency_run(self, self.ds, url, soc, origin_us, seconds, self.shows(task), res, [sink, worker])
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
                    keys=RecordKeys(self.state_dir),
                )
            )
            rows_task = asyncio.create_task(
                self.wait_rows(url, n + 1, [sink, worker], self.timeout(), self.shows(task), 1)
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
            st.note += await dead_letters(url)
        finally:
            self.children.stop(worker)
            self.children.stop(sink)
            with contextlib.suppress(OSError):
                archive.unlink()
        ok = replay_verdict(st)
        verdict = "n/a" if ok is None else ("met" if ok else "NOT met")
        err.print(f"  replay: {n:,} events in {st.seconds:.1f} s = {st.rate or 0:,.0f} events/s; "
                  f"target {TARGET_REPLAY_EVENTS:,} in < {TARGET_REPLAY_S:.0f} s: {verdict}")  # fmt: skip


# ------------------------------------------------------------------------------------------------ main
def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m molt_society.bench.pipeline", description=__doc__.split("\n\n")[0]
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
    parser.add_argument("--json", type=Path, default=None, help="also write the stages' figures here as JSON")
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
    run.code_changed = code_changes(run.code)
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
    if args.json is not None:
        stages = {
            k: {"events": s.events, "seconds": s.seconds, "rate": s.rate, "error": s.error}
            for k, s in run.stages.items()
        }
        args.json.write_bytes(orjson.dumps({"stages": stages, "memory": run.memory.peak}))
    failed = [s.key for s in run.stages.values() if s.error] + (["latency"] if run.latency.error else [])
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
