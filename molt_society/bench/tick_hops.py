"""``python -m molt_society.bench.tick_hops``: where a simulated tick's milliseconds go, from the records.

A tick of the stack is a round trip: the feed of tick ``t - 1`` completes on every partition -> the agent
worker reads it, decides each shard's tick ``t`` and sends its actions and a watermark per shard -> the
stream worker reads them and, once every shard's watermark of ``t`` is in, publishes the feed of ``t``.
Every record carries the time its producer created it (Kafka's ``CreateTime``), so the log itself says
how long each hop took, with no instrumentation in the processes:

- *agent*: from the last partition's feed of ``t - 1`` to the first and the last watermark of ``t``;
- *stream*: from the last watermark of ``t`` to the last partition's feed of ``t``;
- *period*: between the feeds of ``t - 1`` and ``t`` (the tick's whole round trip).

It runs the demo's society (``society run --agents 2000 --tick-seconds 300 --no-dashboard``, trimming
off so the topics keep every record) for ``--ticks`` ticks and, once the journal reaches the last one,
reads the ticks, actions and feeds topics while the broker still runs; the hops are measured over ticks
``--from``..``--to``, past the start-up. Results go to the terminal and to BENCHMARKS.md between the
``tick-hops`` markers (unless ``--no-write``).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import orjson

from molt_society.bench.aging import journal_ticks
from molt_society.bench.machine import machine_line
from molt_society.bench.markdown import markers, md_table, publish
from molt_society.bench.processes import REPO
from molt_society.bench.society_run import run_args, society_command, society_env
from molt_society.runtime import kafka
from molt_society.runtime.broker import read_topic
from molt_society.schemas.topics import Role, topic_name

BEGIN, END = markers("tick-hops")
SOCIETY = "hops"


def hops(
    ticks: list[Any], actions: list[Any], feeds: list[Any], first: int, last: int
) -> dict[str, list[float]]:
    """Per tick of ``first..last``, each hop in milliseconds (module docstring)."""
    feed: dict[int, list[int]] = {}
    wm: dict[int, list[int]] = {}
    published: dict[int, int] = {}
    for r in feeds:
        feed.setdefault(orjson.loads(r.value)["tick"], []).append(r.timestamp)
    for r in actions:
        if kafka.is_watermark(r.headers):
            wm.setdefault(orjson.loads(r.value)["tick"], []).append(r.timestamp)
    for r in ticks:
        t = orjson.loads(r.value)["tick"]
        published[t] = max(published.get(t, 0), r.timestamp)
    out: dict[str, list[float]] = {k: [] for k in ("period", "agent_first", "agent_last", "stream")}
    for t in range(first, last + 1):
        if t in feed and t - 1 in feed and t in wm:
            before, done = max(feed[t - 1]), max(feed[t])
            out["period"].append(done - before)
            out["agent_first"].append(min(wm[t]) - before)
            out["agent_last"].append(max(wm[t]) - before)
            out["stream"].append(done - max(wm[t]))
    return out


def summary(values: list[float]) -> tuple[float, float, float]:
    """Mean, median and 90th percentile."""
    s = sorted(values)
    return statistics.mean(s), statistics.median(s), s[int(len(s) * 0.9)]


def run(work: Path, ticks: int, first: int, last: int) -> dict[str, Any]:
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    env = society_env(work, drop=("KAFKA_BOOTSTRAP",))
    env["SOCIETY_TRIM"] = "false"
    argv = society_command() + run_args(SOCIETY, 2000, ticks, 300, "--no-dashboard")
    journal = work / "state" / SOCIETY / "run.log"
    with (work / "run.out").open("wb") as out:
        proc = subprocess.Popen(argv, env=env, stdout=out, stderr=subprocess.STDOUT)
        try:
            while proc.poll() is None and max(journal_ticks(journal), default=-1) < last + 10:
                time.sleep(0.5)
            if proc.poll() is not None:
                raise RuntimeError(f"society run exited {proc.returncode} before tick {last + 10}")
            bootstrap = json.loads((work / "state" / "stack.json").read_text())["bootstrap"]

            async def read_all() -> list[list[Any]]:
                return [
                    await read_topic(bootstrap, topic_name(SOCIETY, r))
                    for r in (Role.TICKS, Role.ACTIONS, Role.FEEDS)
                ]

            got = asyncio.run(read_all())
        finally:
            code = proc.wait()
    wall = journal_ticks(journal)
    rate = (last - first) / (wall[last] - wall[first]) if first in wall and last in wall else None
    h = hops(got[0], got[1], got[2], first, last)
    return {
        "exit_code": code,
        "ticks_per_s": rate,
        "hops": {k: summary(v) for k, v in h.items() if v},
        "n": len(h["period"]),
    }


LABELS = {
    "period": "the tick's round trip (feed of t-1 to feed of t)",
    "agent_first": "agent worker: feed of t-1 to its first watermark of t",
    "agent_last": "agent worker: feed of t-1 to its last watermark of t",
    "stream": "stream worker: last watermark of t to the feed of t",
}


def markdown(doc: dict[str, Any], command: str, first: int, last: int) -> str:
    rows = [[LABELS[k], *(f"{x:.1f}" for x in v)] for k, v in doc["hops"].items()]
    rate = doc.get("ticks_per_s")
    return "\n".join(
        [
            BEGIN,
            "## Where a simulated tick's milliseconds go (issue 26)",
            "",
            f"Command: `{command}`; {machine_line(python=True)}; {time.strftime('%Y-%m-%d')}. "
            f"The demo's society on the default local broker, ticks {first:,}-{last:,} ({doc['n']:,} ticks"
            + (f", {rate:.1f} ticks/s" if rate else "")
            + "), from the records' own timestamps:",
            "",
            md_table(["hop", "mean ms", "median ms", "p90 ms"], rows),
            END,
        ]
    )


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        prog="python -m molt_society.bench.tick_hops", description=__doc__.split("\n\n")[0]
    )
    ap.add_argument("--ticks", type=int, default=1600)
    ap.add_argument("--from", dest="first", type=int, default=300)
    ap.add_argument("--to", dest="last", type=int, default=1200)
    ap.add_argument("--work", type=Path, default=Path("/tmp/molt-bench-tick-hops"))
    ap.add_argument("--no-write", action="store_true")
    args = ap.parse_args(argv)
    if not 0 < args.first < args.last < args.ticks - 20:
        ap.error("--from < --to must lie within the run, 20 ticks before its end")
    command = "python -m molt_society.bench.tick_hops " + " ".join(sys.argv[1:] if argv is None else argv)
    doc = run(args.work, args.ticks, args.first, args.last)
    (args.work / "hops.json").write_text(json.dumps(doc, indent=1))
    publish(
        markdown(doc, command.strip(), args.first, args.last),
        REPO / "BENCHMARKS.md",
        not args.no_write,
        BEGIN,
        END,
    )
    return 0 if doc["exit_code"] == 0 else 1


if __name__ == "__main__":
    raise SystemExit(main())
