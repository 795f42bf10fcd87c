"""``python -m molt_society.bench.startup``: seconds from ``society run`` to the first stored event, at the
demo's size.

Runs ``society run --agents 2000 --ticks 30 --tick-seconds 300`` once (``make demo``'s society, fewer ticks:
the start does not depend on them), with the dashboard as ``make demo`` has it (``--no-dashboard`` leaves
it out), on a fresh chDB directory and state directory, and prints where the start-up time goes: a
timeline in seconds since ``society run`` was spawned, from

- the run's journal (``<run>/run.log``: broker started, topics created, each child spawned, the clock's
  first tick published, tick 0 complete on every partition);
- the children's structured logs (imports done, ClickHouse open, consumer group joined, partitions
  rebuilt);
- a reader of its own on the actions and events topics (explicit assignment, no consumer group, so it
  waits for nobody): the first record of each, timed by the record's own timestamp (set by its
  producer when it was sent);
- the sink's log: the first insert of events into ClickHouse that returned (``sink.flushed``).

The figure of the benchmark is the last: seconds from ``society run`` to the first event stored in
ClickHouse. The timeline goes to the terminal and, unless ``--no-write``, to BENCHMARKS.md between the
``startup`` markers. One run, no assertion: a benchmark, not a test.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from aiokafka import TopicPartition

from molt_society.bench.child_logs import json_records, record_time
from molt_society.bench.machine import machine_line
from molt_society.bench.markdown import markers, write_section
from molt_society.bench.society_run import run_args, society_command, society_env
from molt_society.runtime import kafka
from molt_society.runtime.broker import partition_count
from molt_society.schemas.topics import Role, topic_name

BEGIN, END = markers("startup")
GOAL_S = 10.0
"""The issue's goal: the first event of ``make demo`` stored within this many seconds of ``society run``."""


@dataclass
class Seen:
    """What the bench's own reader saw on the topics: epoch seconds of the first records."""

    first: dict[str, float] = field(default_factory=dict)  # step label -> record timestamp (s)


def _bootstrap(state_dir: Path) -> str | None:
    with contextlib.suppress(OSError, ValueError):
        doc = json.loads((state_dir / "stack.json").read_text())
        value = doc.get("bootstrap") if isinstance(doc, dict) else None
        return str(value) if value else None
    return None


async def watch_topics(state_dir: Path, society: str, proc: subprocess.Popen[bytes], seen: Seen) -> None:
    """Read the actions and events topics from their start (no group) until their first records came."""
    bootstrap = None
    while proc.poll() is None and bootstrap is None:
        bootstrap = _bootstrap(state_dir)
        await asyncio.sleep(0.02)
    if bootstrap is None:
        return
    topics = {topic_name(society, Role.ACTIONS): "actions", topic_name(society, Role.EVENTS): "events"}
    consumer = kafka.consumer(bootstrap, "reader", auto_offset_reset="latest")
    await consumer.start()
    try:
        # list every topic (a metadata request that names none cannot create one) until ours exist
        while proc.poll() is None and not set(topics) <= await consumer.topics():
            await asyncio.sleep(0.05)
        # partitions from DescribeTopics: a Kafka consumer's metadata lists only the topics it reads
        tps = [TopicPartition(t, p) for t in topics for p in range(await partition_count(bootstrap, t))]
        consumer.assign(tps)
        await consumer.seek_to_beginning(*tps)
        wanted = {f"first {kind} {what}" for kind in topics.values() for what in ("record", "non-watermark")}
        while proc.poll() is None and not wanted <= set(seen.first):
            batch = await consumer.getmany(timeout_ms=100)
            for tp, records in batch.items():
                kind = topics[tp.topic]
                for rec in records:
                    at = rec.timestamp / 1000.0
                    for what, counts in (
                        ("record", True),
                        ("non-watermark", not kafka.is_watermark(rec.headers)),
                    ):
                        label = f"first {kind} {what}"
                        if counts and at < seen.first.get(label, float("inf")):
                            seen.first[label] = at
    finally:
        await consumer.stop()


def timeline(run_dir: Path, partitions: int, seen: Seen) -> list[tuple[str, float]]:
    """(step, epoch seconds) of every start-up step found, in time order."""
    steps: list[tuple[str, float]] = []

    def first(docs: list[dict[str, Any]], label: str, event: str, **match: Any) -> None:
        for d in docs:
            if d.get("event") == event and all(d.get(k) == v for k, v in match.items()):
                steps.append((label, record_time(d)))
                return

    journal = json_records(run_dir / "run.log")
    first(journal, "driver: broker started", "stack.broker_started")
    first(journal, "driver: topics created", "stack.topics_created")
    for role in ("sinks", "streams", "agents", "dashboard"):
        first(journal, f"driver: {role} spawned", "stack.spawned", role=role)
    first(journal, "driver: clock publishes tick 0", "clock.starting")
    first(journal, "driver: tick 0 complete on every partition", "clock.tick", tick=0)

    sink = json_records(run_dir / "sinks-0.log")
    first(sink, "sink: imports done", "sink.settings")
    first(sink, "sink: ClickHouse open, schema ready", "sink.clickhouse_ready")
    first(sink, "sink: group joined", "sink.started")
    for d in sink:
        if d.get("event") == "sink.flushed" and d.get("table") == "events" and int(d.get("rows") or 0) > 0:
            steps.append(("FIRST EVENT STORED in ClickHouse (sink insert returned)", record_time(d)))
            break

    streams = json_records(run_dir / "streams-0.log")
    first(streams, "stream worker: imports done", "streams.starting")
    first(streams, "stream worker: action processor started (joins its group)", "processor.started")
    rebuilt = [d for d in streams if d.get("event") == "processor.rebuilt"]
    if rebuilt:
        steps.append(("stream worker: group joined, first partition rebuilt", record_time(rebuilt[0])))
        if len(rebuilt) >= partitions:
            last = record_time(rebuilt[partitions - 1])
            steps.append((f"stream worker: all {partitions} partitions rebuilt", last))

    agents = json_records(run_dir / "agents-0.log")
    first(agents, "agent worker: imports done", "agents.starting")
    first(agents, "agent worker: group joined, ready", "agents.started")

    first(json_records(run_dir / "dashboard-0.log"), "dashboard: serving", "dashboard.started")

    for label, at in seen.first.items():
        steps.append((f"topic: {label}", at))
    return sorted(steps, key=lambda s: s[1])


def run_once(args: argparse.Namespace, work: Path) -> tuple[list[tuple[str, float]], float, str, int]:
    """Run ``society run`` once; (timeline relative to its spawn, total seconds, command, exit code)."""
    society = args.society
    state_dir = work / "state"
    env = society_env(work, drop=("KAFKA_BOOTSTRAP",))  # the local broker, as `make demo` has it
    argv = society_command()  # the console script, as a user runs it
    argv += run_args(society, args.agents, args.ticks, "300", *([] if args.dashboard else ["--no-dashboard"]))
    command = " ".join(["society", *argv[argv.index("run") :]])
    seen = Seen()
    began = time.time()
    with open(work / "society-run.out", "wb") as out:
        proc = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, env=env)
        try:
            asyncio.run(watch_topics(state_dir, society, proc, seen))
            proc.wait(timeout=args.timeout)
        finally:
            if proc.poll() is None:
                proc.terminate()
                proc.wait()
    total = time.time() - began
    partitions = int(env.get("SOCIETY_PARTITIONS", "4"))
    steps = [(label, at - began) for label, at in timeline(state_dir / society, partitions, seen)]
    return steps, total, command, proc.returncode or 0


def markdown(steps: list[tuple[str, float]], total: float, command: str, machine: str) -> str:
    stored = next((s for label, s in steps if label.startswith("FIRST EVENT STORED")), None)
    when = datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
    lines = [
        BEGIN,
        "## Start-up: seconds from `society run` to the first stored event (issue 15)",
        "",
        f"Run {when} on {machine}: `python -m molt_society.bench.startup` runs `{command}` once (fresh chDB "
        "and state directory, local Tansu broker) and reads the run's journal, the children's logs, "
        "the first records of the actions and events topics (their producer timestamps) "
        "and the sink's first insert.",
        "",
        f"**First event stored in ClickHouse: {stored:.1f} s after `society run`** (goal: {GOAL_S:.0f} s); "
        f"the whole run of {command.split('--ticks ')[1].split()[0]} ticks took {total:.1f} s."
        if stored is not None
        else f"**No event was stored** (the run took {total:.1f} s).",
        "",
        "| step | s since `society run` |",
        "|---|---:|",
        *(f"| {label} | {s:.2f} |" for label, s in steps),
        END,
    ]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m molt_society.bench.startup", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("--agents", type=int, default=2000)
    parser.add_argument("--ticks", type=int, default=30)
    parser.add_argument("--society", default="startup")
    parser.add_argument(
        "--dashboard", action=argparse.BooleanOptionalAction, default=True, help="as `make demo` (default)"
    )
    parser.add_argument("--timeout", type=float, default=300.0, help="seconds the run may take")
    parser.add_argument("--out", type=Path, default=Path("BENCHMARKS.md"))
    parser.add_argument("--no-write", action="store_true")
    parser.add_argument("--keep", action="store_true", help="keep the work dir (logs, chDB) for inspection")
    args = parser.parse_args(argv)
    work = Path(tempfile.mkdtemp(prefix="society-bench-startup-"))
    try:
        steps, total, command, code = run_once(args, work)
        block = markdown(steps, total, command, machine_line(python=True))
        print(block)
        if code != 0:
            print(f"society run exited with {code}; its output: {work / 'society-run.out'}", file=sys.stderr)
            return 1
        if not args.no_write:
            write_section(args.out, block, BEGIN, END)
            print(f"wrote {args.out}", file=sys.stderr)
        return 0
    finally:
        if args.keep:
            print(f"work dir kept: {work}", file=sys.stderr)
        else:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    raise SystemExit(main())
