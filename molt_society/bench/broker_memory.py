"""Broker memory over a long ``society run``: the local broker's resident memory (VmRSS), sampled.

    python -m molt_society.bench.broker_memory --agents 2000 --ticks 3000 --tick-seconds 300 [--no-trim]
    [--every 2]

Runs ``society run`` in a fresh state directory and ClickHouse (under ``.society/bench-broker-memory``),
reads the broker's pid from ``stack.json``, samples ``/proc/PID/status`` VmRSS every ``--every`` seconds
together with the newest tick of the run's journal, and prints the samples, the growth per tick and the
extrapolation to a simulated month (8,640 ticks of 300 s) as JSON (BENCHMARKS.md, Broker memory).
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import time
from pathlib import Path
from typing import Any

from molt_society.bench.processes import status_kib
from molt_society.bench.society_run import run_args, society_command, society_env

MONTH_TICKS = 8640  # 30 days of 300 s ticks


def _rss_mb(pid: int) -> float | None:
    kib = status_kib(pid, "VmRSS")
    return None if kib is None else kib / 1024


def _newest_tick(journal: Path) -> int | None:
    try:
        lines = journal.read_text().splitlines()
    except OSError:
        return None
    for line in reversed(lines):
        if '"clock.tick"' in line:
            return int(json.loads(line)["tick"])
    return None


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--agents", type=int, default=2000)
    ap.add_argument("--ticks", type=int, default=3000)
    ap.add_argument("--tick-seconds", type=float, default=300.0)
    ap.add_argument("--every", type=float, default=2.0)
    ap.add_argument("--no-trim", action="store_true", help="SOCIETY_TRIM=false")
    ap.add_argument("--root", type=Path, default=Path(".society/bench-broker-memory"))
    args = ap.parse_args()
    root = args.root.resolve()
    shutil.rmtree(root, ignore_errors=True)
    root.mkdir(parents=True)
    society = f"mem{int(time.time())}"
    env = society_env(root, drop=("SOCIETY_", "KAFKA_", "CLICKHOUSE_"))
    env["SOCIETY_TRIM"] = "false" if args.no_trim else "true"
    argv = society_command(script=False)
    argv += run_args(society, args.agents, args.ticks, args.tick_seconds, "--no-dashboard")
    began = time.monotonic()
    with open(root / "run.out", "wb") as out:
        proc = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, env=env)
    samples: list[dict[str, Any]] = []
    pid: int | None = None
    journal = root / "state" / society / "run.log"
    while proc.poll() is None:
        if pid is None:
            try:
                pid = int(json.loads((root / "state" / "stack.json").read_text())["broker"]["pid"])
            except (OSError, ValueError, KeyError, TypeError):
                pid = None
        if pid is not None and (rss := _rss_mb(pid)) is not None:
            samples.append(
                {"s": round(time.monotonic() - began, 1), "tick": _newest_tick(journal), "rss_mb": rss}
            )
        time.sleep(args.every)
    ticked = [x for x in samples if x["tick"] is not None]
    summary: dict[str, Any] = {
        "command": " ".join(argv[2:]),
        "trim": not args.no_trim,
        "exit": proc.returncode,
    }
    if len(ticked) >= 2:
        first, last = ticked[0], max(ticked, key=lambda x: x["rss_mb"])
        per_tick = (last["rss_mb"] - first["rss_mb"]) / max(1, last["tick"] - first["tick"])
        summary.update(
            seconds=round(time.monotonic() - began, 1),
            rss_first_tick_mb=round(first["rss_mb"], 1),
            rss_peak_mb=round(last["rss_mb"], 1),
            ticks_seen=last["tick"],
            mb_per_tick=round(per_tick, 4),
            month_ticks=MONTH_TICKS,
            month_rss_mb=round(first["rss_mb"] + per_tick * MONTH_TICKS, 0),
        )
    print(json.dumps({"summary": summary, "samples": samples[:: max(1, len(samples) // 60)]}, indent=1))


if __name__ == "__main__":
    main()
