"""``python -m molt_society.bench.aging``: does a society slow down as it ages?

Three steps, one run each, on the default local broker (Apache Kafka; ``SOCIETY_BROKER`` picks another):

1. **month**: the demo's society (2,000 agents, ticks of 300 s) for a simulated month (8,640 ticks),
   ``society run --no-dashboard``. Every second the newest tick of the run's journal and the CPU seconds
   and resident memory of every process of the stack (``stack.json``); afterwards the events stored per
   tick (ClickHouse, by ``occurred_at``). Per 500-tick slice: ticks/s, events/s, CPU milliseconds per tick
   of each process, RSS at the slice's end.
2. **in-process**: the same society and seed with no broker, ``society calibrate --agents 2000 --ticks
   8640`` (the stochastic brain and the stream processor's state in one process): its ticks/s, the ceiling
   the stack is compared with (the whole command's wall time, start-up included).
3. **million**: 1,000,000 agents for 1,000 ticks (``bench.scale``'s run): actions/s per 100 ticks (actions
   stored per tick over the journal's wall time of those ticks), the last 100 ticks against ticks 100-200,
   and the peak RSS of every process.

The figures go to ``<work>/<step>.json`` as each step ends (a later step failing keeps the earlier ones),
and the tables to BENCHMARKS.md between the ``aging`` markers (unless ``--no-write``; ``--report-only``
rewrites them from the JSON). Seconds on these shared 2-core machines are noisy: read the ratios.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any

from molt_society.bench.brokers import Sample, long_run, slices
from molt_society.bench.machine import machine_line
from molt_society.bench.markdown import markers, md_table, publish, read_doc
from molt_society.bench.processes import REPO
from molt_society.bench.society_run import society_command, society_env, society_sql

BEGIN, END = markers("aging")
STEPS = ("month", "in-process", "million")
AGENTS = 2000
TICK_SECONDS = 300.0
ACTIONS = ("post_created", "comment_created", "vote_cast")


def events_per_tick(
    env: dict[str, str], society: str, tick_seconds: float, types: tuple[str, ...] = ()
) -> dict[int, int]:
    """Events stored per tick of ``society`` (by ``occurred_at``, from its first event), optionally only
    those of ``types``."""
    q = society.replace("'", "")
    only = f" AND type IN {types!r}" if types else ""
    rows = society_sql(
        env,
        "SELECT intDiv(toUnixTimestamp64Micro(occurred_at) - "
        f"(SELECT min(toUnixTimestamp64Micro(occurred_at)) FROM events WHERE society = '{q}'), "
        f"{int(tick_seconds * 1_000_000)}) AS tick, count() "
        f"FROM events WHERE society = '{q}'{only} GROUP BY tick ORDER BY tick",
        check=False,
    )
    return {int(t): int(n) for t, n in rows}


def journal_ticks(path: Path) -> dict[int, float]:
    """Wall time of each tick the run's journal names (``clock.tick``: every tenth)."""
    out: dict[int, float] = {}
    try:
        lines = path.read_text().splitlines()
    except OSError:
        return out
    for line in lines:
        if '"clock.tick"' not in line:
            continue
        try:
            d = json.loads(line)
            out[int(d["tick"])] = float(d["ts"])
        except (ValueError, KeyError):
            continue
    return out


def month(work: Path, ticks: int) -> dict[str, Any]:
    res = long_run(None, work, AGENTS, ticks, TICK_SECONDS, society="month")
    doc = asdict(res)
    env = society_env(work, drop=("KAFKA_BOOTSTRAP",))
    per_tick = events_per_tick(env, "month", TICK_SECONDS) if res.exit_code == 0 else {}
    doc["events_per_tick"] = per_tick
    return doc


def in_process(work: Path, ticks: int) -> dict[str, Any]:
    work.mkdir(parents=True, exist_ok=True)
    argv = [*society_command(), "calibrate", "--agents", str(AGENTS), "--ticks", str(ticks)]
    began = time.monotonic()
    with (work / "calibrate.out").open("wb") as out:
        code = subprocess.run(argv, stdout=out, stderr=subprocess.STDOUT, check=False).returncode
    wall = time.monotonic() - began
    return {
        "exit_code": code,
        "ticks": ticks,
        "wall_s": round(wall, 1),
        "ticks_per_s": round(ticks / wall, 1),
    }


def million(work: Path, agents: int, ticks: int) -> dict[str, Any]:
    from molt_society.bench import scale as sc

    shutil.rmtree(work, ignore_errors=True)  # a rerun on the same --work: not the last run's ClickHouse
    r = sc.run_size(agents, ticks, work, 60.0)
    doc: dict[str, Any] = asdict(r)
    if r.exit_code != 0:
        return doc
    society = f"scale{agents}"
    wall = journal_ticks(work / "state" / society / "run.log")
    actions = events_per_tick(society_env(work), society, 60.0, ACTIONS)
    doc["rates"] = rates(wall, actions, ticks)
    return doc


def rates(
    wall: dict[int, float], per_tick: dict[int, int], ticks: int, width: int = 100
) -> list[tuple[int, int, float]]:
    """Per ``width`` ticks ``(a, b, events/s)``: the events of ticks ``a+1..b`` over the wall time between
    the journal's lines of ticks ``a`` and ``b`` (a tick's events are decided once the clock published it,
    after its line). The last span ends at the newest tick the journal names."""
    out: list[tuple[int, int, float]] = []
    newest = max(wall, default=0)
    for a in range(0, ticks, width):
        b = min(a + width, newest)
        if a in wall and b in wall and wall[b] > wall[a]:
            n = sum(per_tick.get(t, 0) for t in range(a + 1, b + 1))
            out.append((a, b, round(n / (wall[b] - wall[a]), 0)))
    return out


def span_rate(samples: list[Sample], a: int, b: int) -> float | None:
    """Ticks/s between the first samples at or past ticks ``a`` and ``b`` (the newest tick seen when the
    run ended before ``b``)."""
    ticked = [s for s in samples if s.tick is not None]
    newest = max((s.tick for s in ticked if s.tick is not None), default=0)
    start = next((s for s in ticked if s.tick is not None and s.tick >= a), None)
    # the first sample that saw tick b, or the newest tick (later samples watch the run drain)
    end = next((s for s in ticked if s.tick is not None and s.tick >= min(b, newest)), None)
    if start is None or end is None or start.tick is None or end.tick is None or end.at <= start.at:
        return None
    return (end.tick - start.tick) / (end.at - start.at)


def _load(work: Path, step: str) -> dict[str, Any] | None:
    return read_doc(work / f"{step}.json")


def markdown(work: Path, command: str) -> str:
    parts = [BEGIN, "## A society as it ages (issue 26)", ""]
    parts.append(
        f"Command: `{command}`; {machine_line(python=True)}; {time.strftime('%Y-%m-%d')}. One run of each."
    )
    m, ip, mil = _load(work, "month"), _load(work, "in-process"), _load(work, "million")
    if m and m.get("samples"):
        sl = [asdict(x) for x in slices([Sample(**x) for x in m["samples"]], m["ticks"])]
        per_tick = {int(k): v for k, v in (m.get("events_per_tick") or {}).items()}
        roles = sorted({r for s in sl for r in s["cpu_share"]})
        rows = []
        for s in sl:
            events = sum(per_tick.get(t, 0) for t in range(s["first"] + 1, s["last"] + 1))
            tps = s["ticks_per_s"]
            rows.append(
                [
                    f"{s['first']:,}-{s['last']:,}",
                    f"{tps:.1f}",
                    f"{events / s['seconds']:,.0f}" if per_tick else "-",
                    *(
                        f"{1000 * s['cpu_share'][r] / tps:.1f}" if r in s["cpu_share"] and tps else "-"
                        for r in roles
                    ),
                    *(f"{s['rss_mib'].get(r, 0):,.0f}" for r in roles),
                ]
            )
        rate = ip["ticks_per_s"] if ip and ip.get("exit_code") == 0 else None
        samples = [Sample(**x) for x in m["samples"]]
        tenth = m["ticks"] - m["ticks"] // 10
        early, late = span_rate(samples, 200, 1000), span_rate(samples, tenth, m["ticks"])
        parts += [
            "",
            f"The demo's society ({AGENTS:,} agents, ticks of {TICK_SECONDS:.0f} s) for "
            f"{m['ticks']:,} ticks: exit {m['exit_code']}, {m['wall_s']:,.0f} s in all, "
            f"{m.get('events') or 0:,} events stored. CPU: milliseconds of each process per tick over "
            "the slice; RSS: MiB at the slice's end.",
            "",
            md_table(
                [
                    "ticks",
                    "ticks/s",
                    "events/s",
                    *(f"CPU ms/tick {r}" for r in roles),
                    *(f"RSS {r}" for r in roles),
                ],
                rows,
            ),
            "",
            f"- ticks {tenth:,}-{m['ticks']:,} (the last tenth) against ticks 200-1,000: "
            f"{late:.1f} / {early:.1f} ticks/s = {late / early:.2f}x"
            if early and late
            else "- too few samples for the last tenth against ticks 200-1,000",
        ]
        if rate and ip:
            whole = m["ticks"] / m["wall_s"]
            parts.append(
                f"- in one process (`society calibrate --agents {AGENTS} --ticks {ip['ticks']}`, same seed): "
                f"{ip['wall_s']:,.0f} s, {rate:.0f} ticks/s. The stack over the whole run: "
                f"{whole:.1f} ticks/s, {whole / rate:.2f}x; its best slice "
                f"{max(s['ticks_per_s'] for s in sl) / rate:.2f}x"
            )
    if mil:
        rates = mil.get("rates") or []
        peak = mil.get("peak_rss") or {}
        parts += ["", f"{mil['agents']:,} agents for {mil['ticks']:,} ticks: exit {mil['exit_code']}, "
                  f"{mil['wall_s']:,.0f} s, {mil.get('actions', 0):,} actions stored."]  # fmt: skip
        if rates:
            parts += [
                "",
                md_table(["ticks", "actions/s"], [[f"{a:,}-{b:,}", f"{r:,.0f}"] for a, b, r in rates]),
            ]
            base = next((r for a, _, r in rates if a == 100), None)
            if base:
                parts.append(f"\n- last 100 ticks against ticks 100-200: {rates[-1][2] / base:.2f}x")
        if peak:
            top = max(peak.items(), key=lambda kv: kv[1])
            parts.append(f"- largest process: {top[0]}, peak RSS {top[1] / 2**20:,.0f} MiB")
    parts.append(END)
    return "\n".join(parts)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        prog="python -m molt_society.bench.aging", description=__doc__.split("\n\n")[0]
    )
    ap.add_argument("--steps", nargs="+", choices=STEPS, default=list(STEPS))
    ap.add_argument("--ticks", type=int, default=8640, help="ticks of the month and the in-process run")
    ap.add_argument("--agents", type=int, default=1_000_000, help="agents of the million step")
    ap.add_argument("--million-ticks", type=int, default=1000)
    ap.add_argument("--work", type=Path, default=Path("/tmp/molt-bench-aging"))
    ap.add_argument("--report-only", action="store_true", help="write the tables from an earlier run's JSON")
    ap.add_argument("--no-write", action="store_true")
    ap.add_argument("--command", default=None, help="the command shown in the report (with --report-only)")
    args = ap.parse_args(argv)
    command = args.command or "python -m molt_society.bench.aging " + " ".join(
        sys.argv[1:] if argv is None else argv
    )
    args.work.mkdir(parents=True, exist_ok=True)
    if not args.report_only:
        for step in args.steps:
            print(f"[aging] {step} ...", file=sys.stderr, flush=True)
            began = time.monotonic()
            if step == "month":
                doc = month(args.work / "month", args.ticks)
            elif step == "in-process":
                doc = in_process(args.work / "in-process", args.ticks)
            else:
                doc = million(args.work / "million", args.agents, args.million_ticks)
            (args.work / f"{step}.json").write_text(json.dumps(doc, indent=1, default=str))
            print(f"[aging] {step} done in {time.monotonic() - began:.0f} s", file=sys.stderr, flush=True)
    publish(markdown(args.work, command.strip()), REPO / "BENCHMARKS.md", not args.no_write, BEGIN, END)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
