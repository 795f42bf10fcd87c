"""Societies of MoltBook's size: ``society run`` with a million agents and more, measured from outside.

For each size, one ``society run --agents N --ticks T --no-dashboard`` on the embedded stack (fresh state
and ClickHouse directories), while a sampler reads every process of the stack (``stack.json``) every half
second: resident memory now and its peak (``VmHWM``). After the run, ClickHouse says when each event was
stored (``_inserted_at``), which gives:

- **first event**: seconds from the command's start to the first stored event;
- **genesis**: seconds from the first to the last stored ``agents_joined`` (every agent registered);
- **live actions/s**: posts, comments and votes stored per second between the first and the last one;
- **broker memory at the end**: the broker's resident memory at the last sample before the last action was
  stored (the local broker never frees a record during a run: see README, Broker memory).

The same invocation also measures the end-to-end ceiling of the pipeline (``bench.pipeline``'s stage 5,
produce -> validate -> events -> ClickHouse, with no agents and no tick barrier), so the live rate is
quoted against a ceiling measured on the same machine in the same run.

``python -m molt_society.bench.scale`` (1,000,000 and 2,600,000 agents, 100 ticks); results go to
BENCHMARKS.md between
the ``scale`` markers.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

from molt_society.bench.machine import machine_info
from molt_society.bench.markdown import markers, publish
from molt_society.bench.processes import REPO, cpu_seconds, status_kib
from molt_society.bench.society_run import (
    run_args,
    society_command,
    society_env,
    society_sql,
    stack_processes,
)

BEGIN, END = markers("scale")
ACTIONS = ("post_created", "comment_created", "vote_cast")


@dataclass
class Sizes:
    """What one run measured."""

    agents: int
    ticks: int
    wall_s: float = 0.0
    exit_code: int = 0
    first_event_s: float | None = None
    genesis_s: float | None = None
    actions: int = 0
    live_s: float | None = None
    events: int = 0
    peak_rss: dict[str, int] = field(default_factory=dict)
    cpu_s: dict[str, float] = field(default_factory=dict)
    broker_end_rss: int | None = None
    error: str | None = None

    @property
    def live_rate(self) -> float | None:
        return self.actions / self.live_s if self.live_s else None


class Sampler(threading.Thread):
    """Peak and last resident memory of every process of the stack, read from ``stack.json``."""

    def __init__(self, state_dir: Path) -> None:
        super().__init__(daemon=True, name="scale-sampler")
        self.path = state_dir / "stack.json"
        self.peak: dict[str, int] = {}
        self.last: dict[str, int] = {}
        self.cpu: dict[str, float] = {}  # CPU seconds of each process at its last sample
        self.broker: list[tuple[float, int]] = []  # (wall time, broker RSS) of every sample
        self.halt = threading.Event()

    def run(self) -> None:
        while not self.halt.wait(0.5):
            for role, pid in stack_processes(self.path).items():
                hwm, rss = status_kib(pid, "VmHWM"), status_kib(pid, "VmRSS")
                cpu = cpu_seconds(pid)
                if cpu is not None:
                    self.cpu[role] = max(self.cpu.get(role, 0.0), cpu)
                if hwm is not None:
                    self.peak[role] = max(self.peak.get(role, 0), hwm * 1024)
                if rss is not None:
                    self.last[role] = rss * 1024
                    if role == "broker":
                        self.broker.append((time.time(), rss * 1024))


def run_size(agents: int, ticks: int, work: Path, tick_seconds: float, agent_workers: int = 1) -> Sizes:
    res = Sizes(agents, ticks)
    work.mkdir(parents=True, exist_ok=True)
    env = society_env(work)
    society = f"scale{agents}"
    cmd = society_command()
    cmd += run_args(
        society, agents, ticks, tick_seconds, "--agent-workers", str(agent_workers), "--no-dashboard"
    )
    sampler = Sampler(work / "state")
    sampler.start()
    began_wall = time.time()
    began = time.monotonic()
    with (work / "run.log").open("w") as log:
        proc = subprocess.run(cmd, env=env, stdout=log, stderr=subprocess.STDOUT, check=False)
    res.wall_s = time.monotonic() - began
    res.exit_code = proc.returncode
    sampler.halt.set()
    sampler.join()
    res.peak_rss = dict(sorted(sampler.peak.items()))
    res.cpu_s = dict(sorted(sampler.cpu.items()))
    if proc.returncode != 0:
        res.error = f"society run exited {proc.returncode} (log: {work / 'run.log'})"
        return res
    q = society.replace("'", "")
    rows = society_sql(
        env,
        "SELECT min(toUnixTimestamp64Milli(_inserted_at)), "
        "minIf(toUnixTimestamp64Milli(_inserted_at), type = 'agents_joined'), "
        "maxIf(toUnixTimestamp64Milli(_inserted_at), type = 'agents_joined'), "
        f"minIf(toUnixTimestamp64Milli(_inserted_at), type IN {ACTIONS!r}), "
        f"maxIf(toUnixTimestamp64Milli(_inserted_at), type IN {ACTIONS!r}), "
        f"countIf(type IN {ACTIONS!r}), count() "
        f"FROM events WHERE society = '{q}'",
    )
    first, g0, g1, a0, a1, n_actions, n_events = (int(v) for v in rows[0])
    res.first_event_s = first / 1000 - began_wall
    res.genesis_s = (g1 - g0) / 1000
    res.actions = n_actions
    res.events = n_events
    res.live_s = (a1 - a0) / 1000 if a1 > a0 else None
    # the broker's memory when the last action was stored (later samples may catch its shutdown)
    before = [rss for at, rss in sampler.broker if at <= a1 / 1000]
    res.broker_end_rss = before[-1] if before else None
    return res


def ceiling(events: int) -> float | None:
    """bench.pipeline's end-to-end stage alone, on this machine, now."""
    from molt_society.bench import pipeline
    from molt_society.bench.pipeline_results import Run

    args = pipeline.parse_args(
        [
            "--events",
            str(events),
            "--no-write",
            "--skip",
            "producer",
            "ceiling",
            "processor",
            "sink",
            "e2e_queries",
            "latency",
            "replay",
        ]
    )
    run = Run(
        started=datetime.now(UTC),
        command="",
        events=events,
        quick=False,
        machine=machine_info(),
        load_before=os.getloadavg(),
    )
    import asyncio

    asyncio.run(pipeline.Bench(args, run).main())
    stage = run.stages.get("e2e")
    return stage.rate if stage else None


def _cpu(r: Sizes, role: str) -> str:
    if role not in r.cpu_s or not r.wall_s:
        return "-"
    return f"{r.cpu_s[role]:,.0f} s ({r.cpu_s[role] / r.wall_s:.0%})"


def _mib(v: int | None) -> str:
    return "-" if v is None else f"{v / 2**20:,.0f} MiB"


def _s(v: float | None) -> str:
    return "-" if v is None else f"{v:,.1f} s"


def markdown(results: list[Sizes], ceiling_rate: float | None, command: str) -> str:
    m = machine_info()
    lines = [
        BEGIN,
        "## Societies of MoltBook's size (`bench.scale`)",
        "",
        f"Command: `{command}`; machine: {m.get('cpu', '?')}, {m.get('nproc', '?')} cores, "
        f"{m.get('ram', '?')}; "
        f"{datetime.now(UTC):%Y-%m-%d}. One run each, on the embedded stack (Tansu, one stream worker, one "
        "agent worker, chDB). Times are from the command's start; rates from the times ClickHouse stored "
        "the rows (`_inserted_at`).",
        "",
        "| figure | " + " | ".join(f"{r.agents:,} agents" for r in results) + " |",
        "|---|" + "---:|" * len(results),
    ]

    def row(label: str, cells: list[str]) -> None:
        lines.append(f"| {label} | " + " | ".join(cells) + " |")

    row("ticks", [f"{r.ticks}" for r in results])
    row("exit", ["ok" if r.error is None else r.error for r in results])
    row("wall time of `society run`", [_s(r.wall_s) for r in results])
    row("first event stored", [_s(r.first_event_s) for r in results])
    row("genesis (first to last `agents_joined` stored)", [_s(r.genesis_s) for r in results])
    row("actions (posts, comments, votes)", [f"{r.actions:,}" for r in results])
    row(
        "live actions/s (first to last action stored)",
        ["-" if r.live_rate is None else f"{r.live_rate:,.0f}" for r in results],
    )
    if ceiling_rate:
        row(
            "live rate / end-to-end ceiling",
            ["-" if r.live_rate is None else f"{r.live_rate / ceiling_rate:.2f}" for r in results],
        )
    roles = sorted({k for r in results for k in r.peak_rss})
    for role in roles:
        row(f"peak RSS: {role}", [_mib(r.peak_rss.get(role)) for r in results])
    for role in sorted({k for r in results for k in r.cpu_s}):
        row(
            f"CPU: {role} (seconds, share of the run's wall time)",
            [_cpu(r, role) for r in results],
        )
    row("broker RSS when the last action was stored", [_mib(r.broker_end_rss) for r in results])
    lines += [
        "",
        "End-to-end ceiling of the same invocation (`bench.pipeline` stage 5: produce -> validate -> events"
        " -> ClickHouse, no agents, no tick barrier): "
        + ("-" if ceiling_rate is None else f"{ceiling_rate:,.0f} events/s")
        + ".",
        END,
    ]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m molt_society.bench.scale", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("--agents", type=int, nargs="+", default=[1_000_000, 2_600_000])
    parser.add_argument("--ticks", type=int, default=100)
    parser.add_argument("--tick-seconds", type=float, default=60.0)
    parser.add_argument("--agent-workers", type=int, default=1)
    parser.add_argument("--ceiling-events", type=int, default=300_000, help="0: skip the ceiling run")
    parser.add_argument("--work", type=Path, default=Path("/tmp/molt-bench-scale"))
    parser.add_argument("--no-write", action="store_true")
    args = parser.parse_args(argv)
    command = "python -m molt_society.bench.scale " + " ".join(sys.argv[1:] if argv is None else argv)
    results = []
    for n in args.agents:
        print(f"society run --agents {n:,} --ticks {args.ticks} ...", flush=True)
        r = run_size(n, args.ticks, args.work / str(n), args.tick_seconds, args.agent_workers)
        print(r, flush=True)
        results.append(r)
    rate = ceiling(args.ceiling_events) if args.ceiling_events else None
    text = markdown(results, rate, command.strip())
    publish(text, REPO / "BENCHMARKS.md", not args.no_write, BEGIN, END)
    return 0 if all(r.error is None for r in results) else 1


if __name__ == "__main__":
    raise SystemExit(main())
