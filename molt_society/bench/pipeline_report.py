"""The results of ``bench.pipeline``: the tables in the terminal, and BENCHMARKS.md, which each run rewrites
(keeping the text between the ``notes`` markers, the history table and every other benchmark's section)."""

from __future__ import annotations

import math
import os
from datetime import UTC, datetime
from pathlib import Path

from rich.console import Console
from rich.table import Table

from molt_society.bench.markdown import block_of, kept_blocks, md_table
from molt_society.bench.pipeline_results import (
    CODE_DIRS,
    TARGET_REPLAY_EVENTS,
    Run,
    code_fingerprint,
    replay_verdict,
)

GIB = 1 << 30
MIB = 1 << 20
TARGET_E2E = 20_000.0
TARGET_QUERY_RATIO = 0.9
TARGET_LATENCY_P99_S = 2.0
TARGET_WORKER_RSS = 1 * GIB
HISTORY_BEGIN = "<!-- history:begin -->"
HISTORY_END = "<!-- history:end -->"


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
        block = block_of(text, HISTORY_BEGIN, HISTORY_END)
        if block is not None:
            old_history = [ln for ln in block.splitlines() if ln.startswith("| 20")]
        notes = block_of(text, NOTES_BEGIN, NOTES_END) or ""
        for begin, end in kept_blocks(text, {NOTES_BEGIN, HISTORY_BEGIN}):
            if (found := block_of(text, begin, end)) is not None:
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
