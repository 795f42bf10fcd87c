"""``python -m molt_society.bench.archive``: MoltBook archives in the community's layouts, replayed at size.

1. ``bench.archive_gen`` writes one generated society (``--posts``, default 300,000: about 1.3M events)
   in each layout: the observatory SQLite and the posts_full JSON array with nested threads; its
   manifest says how many posts, comments, authors and how deep the deepest comment is.
2. For each layout, ``society replay FILE`` (as a user runs it) into a fresh chDB store and state folder:
   wall time, the import and publish split from its output, and the peak RSS of every process of the
   run (the replay command, the broker, stream workers, sinks), sampled every 0.5 s with psutil.
3. What the store then holds (``society sql``): posts, comments, distinct authors and the deepest comment,
   each against the generator's manifest.
4. After the default path's replay, ``society export NAME --format F`` of the stored society back to the
   same layout (``observatory-sqlite``, or ``moltbook-json`` for posts_full): wall time, peak RSS, and the
   posts and comments it says it wrote, against the manifest.
5. Then ``society report NAME`` of that society (``--report first``, the default: the first layout's;
   ``all``; ``none``), as a user runs it: the embeddings on the report's sample of agents
   (``report.sample``) included; wall time, peak RSS, and each section's time from the report's JSON.

Results go to the terminal and to BENCHMARKS.md between the ``archive`` markers (``--no-write`` skips).
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import subprocess
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import psutil
from rich.console import Console

from molt_society.bench.archive_gen import generate
from molt_society.bench.machine import run_facts
from molt_society.bench.markdown import markers, publish
from molt_society.bench.society_run import society_command, society_env, society_sql

err = Console(stderr=True)
BEGIN, END = markers("archive")
FILES = {"observatory-sqlite": "observatory.sqlite", "posts-full-json": "posts_full.json"}
ROLES = (
    ("kafka.Kafka", "broker (Apache Kafka)"),
    ("tansu", "broker (Tansu)"),
    ("molt_society.streams", "stream worker"),
    ("molt_society.sinks", "sink"),
    ("molt_society.agents", "agent worker"),
    ("molt_society.dashboard", "dashboard"),
    ("society-state", "direct replay: state process"),
    ("society-insert", "direct replay: insert process"),
    ("multiprocessing.resource_tracker", "multiprocessing's resource tracker"),
    ("replay", "society replay (import + publish)"),
    ("export", "society export"),
    ("report", "society report"),
)
SPAWNED = "multiprocessing.spawn"
"""A spawned process before it has named itself (``society.replay_direct``)."""
LIMIT_MIB = 2048


def role_of(cmdline: list[str], name: str = "") -> str:
    text = f"{name} {' '.join(cmdline)}"
    for needle, role in ROLES:
        if needle in text:
            return role
    if SPAWNED in text:
        return SPAWNED
    return cmdline[0] if cmdline else "?"


class PeakRss(threading.Thread):
    """The peak RSS of each process of a tree (by pid, labelled by role), sampled every ``interval`` s."""

    def __init__(self, pid: int, interval: float = 0.5) -> None:
        super().__init__(daemon=True, name="peak-rss")
        self.root = psutil.Process(pid)
        self.interval = interval
        self.peak: dict[int, tuple[str, int]] = {}
        self.halt = threading.Event()

    def run(self) -> None:
        while not self.halt.is_set():
            try:
                procs = [self.root, *self.root.children(recursive=True)]
            except psutil.Error:
                procs = []
            for p in procs:
                try:
                    rss = p.memory_info().rss
                    known = self.peak.get(p.pid, (SPAWNED, 0))[0]
                    role = role_of(p.cmdline(), p.name()) if known == SPAWNED else known
                except psutil.Error:
                    continue
                self.peak[p.pid] = (role, max(rss, self.peak.get(p.pid, ("", 0))[1]))
            self.halt.wait(self.interval)

    def by_role(self) -> dict[str, int]:
        """The largest peak of each role, in bytes."""
        out: dict[str, int] = {}
        for role, rss in self.peak.values():
            out[role] = max(out.get(role, 0), rss)
        return out


STORED_SQL = (
    "SELECT countIf(type = 'post_created'), countIf(type = 'comment_created'), "
    "uniqExactIf(actor, type IN ('post_created', 'comment_created')), "
    "maxIf(depth, type = 'comment_created'), countIf(type = 'agent_registered'), "
    "countIf(type = 'agent_followed'), count() FROM events FINAL WHERE society = '{society}'"
)


def replay_layout(layout: str, path: Path, work: Path, through: str = "auto") -> dict[str, Any]:
    """``society replay`` of one file into a fresh store under ``work``; time, memory, what was stored."""
    env = society_env(work, drop=("KAFKA_BOOTSTRAP",))
    society = layout.replace("-", "_")
    cmd = [*society_command(), "replay", str(path), "--society", society, "--no-dashboard"]
    cmd += ["--through", through]
    err.print(f"[bold]{layout}[/bold]: {' '.join(cmd[-7:])}")
    seconds, rss, out = _timed(cmd, env, work / "replay.log")
    published = re.search(r"replayed ([\d,]+) events .* in ([\d.]+) s", out)
    row = society_sql(env, STORED_SQL.format(society=society))[0]
    keys = ("posts", "comments", "authors", "deepest_comment", "agents", "follows", "events")
    return {
        "seconds": seconds,
        "through": through,
        "direct": "straight into ClickHouse" in out,
        "publish_s": float(published.group(2)) if published else None,
        "stored": {k: int(v) for k, v in zip(keys, row, strict=True)},
        "rss": rss,
    }


EXPORTS = {
    "observatory-sqlite": ("observatory-sqlite", "export.sqlite"),
    "posts-full-json": ("moltbook-json", "export.json"),
}


def _timed(cmd: list[str], env: dict[str, str], log_path: Path) -> tuple[float, dict[str, int], str]:
    """Run ``cmd``: its wall time, peak RSS by process role, output (raises when it fails)."""
    with log_path.open("w") as log:
        began = time.perf_counter()
        proc = subprocess.Popen(cmd, env=env, stdout=log, stderr=subprocess.STDOUT)
        peaks = PeakRss(proc.pid)
        peaks.start()
        rc = proc.wait()
        seconds = time.perf_counter() - began
        peaks.halt.set()
        peaks.join()
    out = log_path.read_text(errors="replace")
    if rc != 0:
        raise RuntimeError(f"{' '.join(cmd[-6:])} exited with {rc}:\n{out[-4000:]}")
    return seconds, peaks.by_role(), out


def export_layout(layout: str, work: Path) -> dict[str, Any]:
    """``society export`` of the society replayed from ``layout`` back to that layout."""
    env = society_env(work, drop=("KAFKA_BOOTSTRAP",))
    fmt, name = EXPORTS[layout]
    cmd = [*society_command(), "export", layout.replace("-", "_"), "--format", fmt, "--out", str(work / name)]
    err.print(f"[bold]{layout}[/bold]: {' '.join(cmd[-6:])}")
    seconds, rss, out = _timed(cmd, env, work / "export.log")
    text = out.replace("\n", " ")  # the summary line may be wrapped
    size = (work / name).stat().st_size
    (work / name).unlink()

    def count(what: str) -> int | None:
        found = re.search(rf"([\d,]+)\s+{what}", text[text.find("wrote ") :])
        return int(found.group(1).replace(",", "")) if found else None

    return {
        "format": fmt,
        "seconds": seconds,
        "bytes": size,
        "posts": count("posts"),
        "comments": count("comments"),
        "rss": rss,
    }


def report_layout(layout: str, work: Path) -> dict[str, Any]:
    """``society report`` of the society replayed from ``layout``: time, memory, each section's time."""
    env = society_env(work, drop=("KAFKA_BOOTSTRAP",))
    html = work / "report.html"
    cmd = [*society_command(), "report", layout.replace("-", "_"), "--out", str(html)]
    err.print(f"[bold]{layout}[/bold]: {' '.join(cmd[-4:])}")
    seconds, rss, _ = _timed(cmd, env, work / "report.log")
    rep = json.loads(html.with_suffix(".json").read_text())["reports"][0]
    settings = rep["settings"]
    return {
        "seconds": seconds,
        "rss": rss,
        "events": rep["events"],
        "sections": [(s["title"], s.get("seconds") or 0.0, s.get("error")) for s in rep["sections"]],
        "embedding_s": settings.get("embedding_seconds"),
        "embedded": settings.get("texts_embedded_now"),
        "sample": settings.get("embeddings_sample"),
        "runtime": settings.get("embeddings_runtime"),
    }


def markdown(res: dict[str, Any]) -> str:
    lines = [
        BEGIN,
        "## MoltBook archives in the community's layouts, replayed at size (issue 30)",
        "",
        f"Run {res['date']} on {res['machine']}: `{res['command'].strip()}`. One generated society "
        f"({res['posts']:,} posts, written by `bench.archive_gen` without project code, in "
        f"{res['gen_s']:.0f} s) in each layout, then `society replay FILE --no-dashboard --through T` "
        "into a fresh chDB store: `auto` (the default: direct above 500,000 events, "
        "`society.replay_direct`) and `stack` (broker, stream worker, aggregator, sink), one after the "
        "other. Replay s = the whole command, import included (in brackets: the time the command prints: "
        "publishing through the stack, or the direct replay after the import). "
        "Stored = `SELECT ... FROM events FINAL` afterwards; manifest = what the generator wrote. Peak RSS "
        "per process sampled every 0.5 s.",
        "",
        "| layout | through | file | events stored | replay s (printed) | posts | comments | authors | "
        "deepest | exact | largest process | peak RSS MiB by process |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|---|---|---|",
    ]
    for key, r in res["layouts"].items():
        layout = key.split(" ")[0]
        through = r["through"] + (" (direct)" if r["through"] == "auto" and r["direct"] else "")
        m, s = r["manifest"], r["stored"]
        exact = all(s[k] == m[k] for k in ("posts", "comments", "authors", "deepest_comment"))
        rss = sorted(r["rss"].items(), key=lambda kv: -kv[1])
        top = rss[0]
        pub = f" ({r['publish_s']:.0f})" if r["publish_s"] is not None else ""
        lines.append(
            f"| {layout} | {through} | {m['bytes'] / 2**20:,.0f} MiB | {s['events']:,} | "
            f"{r['seconds']:.0f}{pub} | "
            f"{s['posts']:,} / {m['posts']:,} | {s['comments']:,} / {m['comments']:,} | "
            f"{s['authors']:,} / {m['authors']:,} | {s['deepest_comment']} / {m['deepest_comment']} | "
            f"{'yes' if exact else '**no**'} | {top[0]} {top[1] / 2**20:,.0f} | "
            + ", ".join(f"{k} {v / 2**20:,.0f}" for k, v in rss)
            + " |"
        )
    default = [r for r in res["layouts"].values() if r["through"] == "auto"] or list(res["layouts"].values())
    worst_s = max(r["seconds"] for r in default)
    worst_mib = max(max(r["rss"].values()) for r in default) / 2**20
    lines += [
        "",
        "Stored / manifest in each cell. Targets (issue 30, at 300,000 posts, on the default path): every "
        "process under "
        f"{LIMIT_MIB:,} MiB: **{'met' if worst_mib < LIMIT_MIB else 'not met'}** (largest "
        f"{worst_mib:,.0f} MiB); at most 300 s per layout: **{'met' if worst_s <= 300 else 'not met'}** "
        f"(slowest {worst_s:.0f} s).",
        "",
        *_export_lines(res),
        *_report_lines(res),
        END,
    ]
    return "\n".join(lines)


def _export_lines(res: dict[str, Any]) -> list[str]:
    rows = [(key.split(" ")[0], r) for key, r in res["layouts"].items() if "export" in r]
    if not rows:
        return []
    lines = [
        "Then `society export NAME --format F` of the society the default path stored, back to its layout "
        "(read from ClickHouse by type in keyset pages, threads grouped through a sort on disk):",
        "",
        "| layout | format | export s | file | posts written | comments written | exact | "
        "peak RSS MiB by process |",
        "|---|---|---:|---:|---:|---:|---|---|",
    ]
    for layout, r in rows:
        e, m = r["export"], r["manifest"]
        exact = e["posts"] == m["posts"] and e["comments"] == m["comments"]
        rss = ", ".join(f"{k} {v / 2**20:,.0f}" for k, v in sorted(e["rss"].items(), key=lambda kv: -kv[1]))
        lines.append(
            f"| {layout} | {e['format']} | {e['seconds']:.0f} | {e['bytes'] / 2**20:,.0f} MiB | "
            f"{e['posts'] or 0:,} / {m['posts']:,} | {e['comments'] or 0:,} / {m['comments']:,} | "
            f"{'yes' if exact else '**no**'} | {rss} |"
        )
    return lines


def _report_lines(res: dict[str, Any]) -> list[str]:
    rows = [(key.split(" ")[0], r["report"]) for key, r in res["layouts"].items() if "report" in r]
    lines: list[str] = []
    for layout, r in rows:
        rss = ", ".join(f"{k} {v / 2**20:,.0f}" for k, v in sorted(r["rss"].items(), key=lambda kv: -kv[1]))
        lines += [
            "",
            f"Then `society report` of the {layout} society ({r['events']:,} events), as a user runs it: "
            f"**{r['seconds']:.0f} s** in all, peak RSS {rss} MiB. Embeddings ({r['runtime']}): "
            f"{r['embedded'] or 0:,} texts in {r['embedding_s'] or 0:.0f} s, on {r['sample']}.",
            "",
            "| section | seconds |",
            "|---|---:|",
            *(
                f"| {title}{' (error: ' + err_ + ')' if err_ else ''} | {sec:,.1f} |"
                for title, sec, err_ in r["sections"]
            ),
        ]
    return lines


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--posts", type=int, default=300_000)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--layout", action="append", choices=sorted(FILES), help="default: both")
    ap.add_argument(
        "--through", action="append", choices=["auto", "stack", "direct"], help="default: auto, then stack"
    )
    ap.add_argument(
        "--report",
        choices=["first", "all", "none"],
        default="first",
        help="society report of the default path's society: the first layout's (default), each, or none",
    )
    ap.add_argument("--work", type=Path, help="work folder (default: a temporary one, removed)")
    ap.add_argument("--out", type=Path, default=Path("BENCHMARKS.md"))
    ap.add_argument("--no-write", action="store_true", help="do not update BENCHMARKS.md")
    args = ap.parse_args(argv)
    layouts = args.layout or sorted(FILES)
    work = args.work or Path(tempfile.mkdtemp(prefix="bench-archive-"))
    try:
        t0 = time.perf_counter()
        manifests = {m["layout"]: m for m in generate(work / "gen", args.posts, args.seed, layouts)}
        gen_s = time.perf_counter() - t0
        res: dict[str, Any] = {
            **run_facts("python -m molt_society.bench.archive", argv),
            "posts": args.posts,
            "gen_s": gen_s,
            "layouts": {},
        }
        for layout in layouts:
            for through in args.through or ["auto", "stack"]:
                sub = work / f"{layout}-{through}"
                sub.mkdir(parents=True, exist_ok=True)
                r = replay_layout(layout, work / "gen" / FILES[layout], sub, through)
                r["manifest"] = manifests[layout]
                res["layouts"][f"{layout} {through}"] = r
                err.print(json.dumps({k: v for k, v in r.items() if k != "manifest"}, default=str))
                if through == "auto":
                    r["export"] = export_layout(layout, sub)
                    err.print(json.dumps(r["export"], default=str))
                    if args.report == "all" or (args.report == "first" and layout == layouts[0]):
                        r["report"] = report_layout(layout, sub)
                        err.print(json.dumps(r["report"], default=str))
                shutil.rmtree(sub / "clickhouse", ignore_errors=True)
        publish(markdown(res), args.out, not args.no_write, BEGIN, END)
    finally:
        if args.work is None:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
