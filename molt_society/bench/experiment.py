"""``python -m molt_society.bench.experiment``: the wall time of ``society experiment`` against one
``society run`` of the same size, in one run.

Issue 17's benchmark: an experiment of 2 arms x 5 seeds x 2,000 agents x 300 ticks from one fork point.
In a fresh chDB directory and state directory, as a user would:

1. ``society run`` of the base society (2,000 agents, ``--base-ticks`` ticks, 300 s per tick);
2. ``society run`` of another society of 2,000 agents for 300 ticks: the reference "one run of the same
   size" (a fresh society, with its genesis, not a fork);
3. ``society experiment`` of a spec forking the base at tick ``--fork-at`` into a control arm (hot feed)
   and a random-feed arm, 5 seeds each, 300 ticks each.

It reports the wall time of each command, the experiment's time per arm x seed (its wall time over the
pairs, and each pair's own ``wall_seconds`` from the ``experiments`` table) and the ratio to the one run,
and writes the table to BENCHMARKS.md between the ``experiment`` markers unless ``--no-write``. One run,
no assertion: a benchmark, not a test.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

from molt_society.bench.machine import run_facts
from molt_society.bench.markdown import err, markers, md_table, publish
from molt_society.bench.society_run import run_args, society_command, society_env
from molt_society.warehouse.client import connect

BEGIN, END = markers("experiment")
GOAL_S = 300.0
"""The issue's goal: the whole experiment in under 5 minutes on this machine."""

SPEC = """name = "bench"
description = "bench.experiment: hot (control) against a random feed"
base = {{ society = "base", at = {fork_at} }}
ticks = {ticks}
seeds = {seeds}

[[arms]]
name = "control"
control = true

[[arms]]
name = "random-feed"
[[arms.interventions]]
kind = "feed_policy"
policy = "random"
"""


def timed(argv: list[str], env: dict[str, str], log: Path) -> float:
    """Run ``argv`` to the end (output to ``log``); its wall time in seconds. Raises on a non-zero exit."""
    began = time.monotonic()
    with open(log, "wb") as out:
        code = subprocess.call(argv, env=env, stdout=out, stderr=subprocess.STDOUT)
    took = time.monotonic() - began
    if code != 0:
        tail = log.read_text(errors="replace")[-3000:]
        raise SystemExit(f"{' '.join(argv)} exited with {code}:\n{tail}")
    return took


def pair_seconds(work: Path, experiment: str) -> list[float]:
    """Each arm x seed's own wall time, as the runner recorded it in the ``experiments`` table."""
    client = connect(f"chdb://{work / 'clickhouse'}")
    try:
        result = client.query(
            "SELECT wall_seconds FROM experiments FINAL WHERE experiment = {e:String} AND status = 'done' "
            "ORDER BY arm, seed",
            parameters={"e": experiment},
        )
        return [float(r[0]) for r in result.result_rows]
    finally:
        client.close()


def run(args: argparse.Namespace, work: Path) -> dict[str, float]:
    env = society_env(work, drop=("KAFKA_BOOTSTRAP",))
    cmd = society_command()
    figures: dict[str, float] = {}
    err.print(f"base: {args.agents:,} agents x {args.base_ticks} ticks")
    figures["base"] = timed(
        [*cmd, *run_args("base", args.agents, args.base_ticks, 300, "--no-dashboard")], env, work / "base.log"
    )
    err.print(f"one society run: {args.agents:,} agents x {args.ticks} ticks")
    figures["single"] = timed(
        [*cmd, *run_args("single", args.agents, args.ticks, 300, "--no-dashboard")], env, work / "single.log"
    )
    spec = work / "bench.toml"
    spec.write_text(SPEC.format(fork_at=args.fork_at, ticks=args.ticks, seeds=args.seeds))
    err.print(f"experiment: 2 arms x {args.seeds} seeds x {args.ticks} ticks")
    figures["experiment"] = timed([*cmd, "experiment", str(spec)], env, work / "experiment.log")
    pairs = pair_seconds(work, "bench")
    figures["pairs"] = float(len(pairs))
    figures["pair_mean"] = statistics.fmean(pairs) if pairs else float("nan")
    figures["pair_max"] = max(pairs) if pairs else float("nan")
    return figures


def markdown(args: argparse.Namespace, f: dict[str, float], argv: list[str] | None) -> str:
    facts = run_facts("python -m molt_society.bench.experiment", argv)
    n = int(f["pairs"])
    per_pair = f["experiment"] / max(n, 1)
    a, met = f"{args.agents:,} agents", "met" if f["experiment"] < GOAL_S else "NOT met"
    rows = [
        ["base society (`society run`)", f"{a} x {args.base_ticks} ticks", f"{f['base']:.1f} s"],
        ["one `society run` of the same size", f"{a} x {args.ticks} ticks", f"{f['single']:.1f} s"],
        ["`society experiment` (whole)", f"2 arms x {args.seeds} seeds x {args.ticks} ticks",
         f"{f['experiment']:.1f} s"],
        ["experiment wall time / arm x seed", f"{n} pairs", f"{per_pair:.1f} s"],
        ["a pair's own time (mean / max, `experiments.wall_seconds`)", "fork, copy, run, drain, verify",
         f"{f['pair_mean']:.1f} s / {f['pair_max']:.1f} s"],
        ["experiment time per pair / one run", "", f"{per_pair / f['single']:.2f}"],
        ["goal: whole experiment under", "", f"{GOAL_S:.0f} s ({met})"],
    ]  # fmt: skip
    return "\n".join(
        [
            BEGIN,
            "## Experiments (issue 17): `society experiment` against one `society run`",
            "",
            f"Command: `{facts['command']}`; machine: {facts['machine']}; {facts['date']}. One run of each, "
            "on a fresh chDB and state directory, the embedded broker; the spec forks the base at tick "
            f"{args.fork_at} into a control (hot feed) and a random-feed arm.",
            "",
            md_table(["what", "size", "wall time"], rows),
            END,
            "",
        ]
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m molt_society.bench.experiment", description=__doc__)
    parser.add_argument("--agents", type=int, default=2000)
    parser.add_argument("--ticks", type=int, default=300, help="ticks of every arm x seed and of the one run")
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument("--base-ticks", type=int, default=60)
    parser.add_argument("--fork-at", type=int, default=50, help="the fork tick in the base")
    parser.add_argument("--out", type=Path, default=Path("BENCHMARKS.md"))
    parser.add_argument("--no-write", action="store_true")
    parser.add_argument("--keep", action="store_true", help="keep the work directory")
    args = parser.parse_args(argv)
    work = Path(tempfile.mkdtemp(prefix="bench-experiment-"))
    try:
        figures = run(args, work)
        publish(markdown(args, figures, argv), args.out, not args.no_write, BEGIN, END)
    finally:
        if args.keep:
            err.print(f"kept {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
