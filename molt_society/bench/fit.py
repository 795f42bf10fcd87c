"""``python -m molt_society.bench.fit``: fitting the MoltBook model to the shared crawl half, and how well
the fit holds at other sizes and seeds.

1. The fit, timed as ``society calibrate --fit`` does it: read the dump (``crawl-2026-01-31``, 8,438 posts
   with their nested comments, unpacked to a temporary folder), fit the text model, fit the behaviour.
2. Every moment (``calibration.moments``) of the dump beside the fitted society at the fitted population
   (the fit's own check, seed 1).
3. The fitted behaviour run offline (``agents.offline``: the brokered run's brain, partition state and
   feeds) at 0.5x, 1x and 10x the fitted population, 3 seeds each: per moment, the mean over seeds and the
   range, and how many moments lie in their band at each size.

Results go to the terminal and BENCHMARKS.md between the ``fit`` markers (``--no-write`` skips). One run,
no assertion: a benchmark, not a test.
"""

from __future__ import annotations

import argparse
import shutil
import tarfile
import tempfile
import time
from pathlib import Path
from typing import Any

from molt_society.agents.text_model import TextModel
from molt_society.bench.machine import run_facts
from molt_society.bench.markdown import err, markers, md_table, publish
from molt_society.calibration.dump import read_dump
from molt_society.calibration.fit import fit
from molt_society.calibration.fitted_file import fit_record, write_fitted
from molt_society.calibration.moments import MOMENTS, distance
from molt_society.calibration.simulated import society_moments

CRAWL = Path(__file__).resolve().parents[3] / "shared" / "data" / "moltbook" / "crawl-2026-01-31"
BEGIN, END = markers("fit")
GOAL_S = 20 * 60.0


def unpack(archive: Path, into: Path) -> Path:
    with tarfile.open(archive) as tar:
        tar.extractall(into, filter="data")
    return into / "posts"


def _f(v: float | None) -> str:
    return "-" if v is None else f"{v:,.4g}"


def run(args: argparse.Namespace, work: Path) -> dict[str, Any]:
    began = time.perf_counter()
    dump = read_dump(unpack(args.crawl / "posts-0-7.tar.gz", work))
    read_s = time.perf_counter() - began
    err.print(
        f"dump: {dump.posts:,} posts, {dump.comments:,} comments, {dump.agents:,} authors ({read_s:.0f} s)"
    )
    text = TextModel.fit(dump.texts)
    text.save(work / "fitted.text.npz")
    text_s = time.perf_counter() - began - read_s
    result = fit(dump, seed=1, progress=lambda m: err.print(m) if "evaluation" not in m else None)
    write_fitted(work / "fitted.toml", result.behaviour, fit_record(dump, result), work / "fitted.text.npz")
    total_s = time.perf_counter() - began
    pop = result.behaviour.population
    assert pop is not None
    runs: dict[float, list[dict[str, float | None]]] = {}
    run_s: dict[float, float] = {}
    for scale in args.scales:
        runs[scale] = []
        t0 = time.perf_counter()
        for seed in args.seeds:
            agents = max(50, round(pop.agents * scale))
            err.print(f"offline run: {agents:,} agents, seed {seed}")
            sim, _totals = society_moments(result.behaviour, seed=seed, agents=agents)
            runs[scale].append(sim)
        run_s[scale] = (time.perf_counter() - t0) / len(args.seeds)
    return {
        "dump": dump, "result": result, "read_s": read_s, "text_s": text_s, "total_s": total_s,
        "runs": runs, "run_s": run_s,
    }  # fmt: skip


def markdown(args: argparse.Namespace, r: dict[str, Any], argv: list[str] | None) -> str:
    facts = run_facts("python -m molt_society.bench.fit", argv)
    dump, result = r["dump"], r["result"]
    pop = result.behaviour.population
    header = ["moment", "band", "crawl half", "fitted (1x, seed 1)"]
    header += [f"{s:g}x: mean [min, max] over seeds" for s in args.scales]
    rows = []
    inside = {s: 0 for s in args.scales}
    for m in MOMENTS:
        real = dump.moments.get(m.key)
        row = [("**" + m.label + "**") if m.core else m.label, m.band.describe(), _f(real)]
        d = distance(m.key, result.simulated.get(m.key), real)
        row.append(f"{_f(result.simulated.get(m.key))} ({'in' if d is not None and d <= 1 else 'out'})")
        for s in args.scales:
            vals = [v for v in (sim.get(m.key) for sim in r["runs"][s]) if v is not None]
            if not vals:
                row.append("-")
                continue
            mean = sum(vals) / len(vals)
            dm = distance(m.key, mean, real)
            ok = dm is not None and dm <= 1
            inside[s] += ok
            row.append(f"{_f(mean)} [{_f(min(vals))}, {_f(max(vals))}] {'in' if ok else 'out'}")
        rows.append(row)
    met = "met" if r["total_s"] < GOAL_S else "NOT met"
    time_rows = [
        ["read the dump (import, moments)", f"{r['read_s']:.0f}"],
        ["fit the text model and save it", f"{r['text_s']:.0f}"],
        [f"the whole fit (goal {GOAL_S / 60:.0f} min: {met})", f"{r['total_s']:.0f}"],
    ]
    for s in args.scales:
        agents = max(50, round(pop.agents * s))
        time_rows.append([f"one offline run at {s:g}x ({agents:,} agents)", f"{r['run_s'][s]:.0f}"])
    times = md_table(["step", "seconds"], time_rows)
    counts = ", ".join(f"{s:g}x: {inside[s]} of {len(MOMENTS)}" for s in args.scales)
    return "\n".join(
        [
            BEGIN,
            "## Fitting the MoltBook model to a real crawl (issue 24)",
            "",
            f"Command: `{facts['command']}`; machine: {facts['machine']}; {facts['date']}. One run. "
            f"The dump: the shared crawl half (`crawl-2026-01-31/posts-0-7.tar.gz`), {dump.posts:,} posts, "
            f"{dump.comments:,} comments, {dump.agents:,} authors over {dump.hours:g} hours. Fitted "
            f"population {pop.agents:,} agents, {pop.tick_seconds:g} s ticks. Bold: the nine headline "
            "moments. 'in': within the moment's band (`calibration/moments.py`).",
            "",
            times,
            "",
            f"Moments whose mean over seeds lies in its band: {counts}.",
            "",
            md_table(header, rows),
            END,
            "",
        ]
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m molt_society.bench.fit", description=__doc__)
    parser.add_argument("--crawl", type=Path, default=CRAWL, help="folder with posts-0-7.tar.gz")
    parser.add_argument("--scales", type=float, nargs="+", default=[0.5, 1.0, 10.0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[1, 2, 3])
    parser.add_argument("--out", type=Path, default=Path("BENCHMARKS.md"))
    parser.add_argument("--no-write", action="store_true")
    parser.add_argument("--keep", action="store_true", help="keep the work directory (fitted.toml)")
    args = parser.parse_args(argv)
    work = Path(tempfile.mkdtemp(prefix="bench-fit-"))
    try:
        publish(markdown(args, run(args, work), argv), args.out, not args.no_write, BEGIN, END)
    finally:
        if args.keep:
            err.print(f"kept {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
