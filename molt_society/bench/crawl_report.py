"""``python -m molt_society.bench.crawl_report``: the full ``society report`` of the real MoltBook crawl in
``../shared/``.

1. ``society replay`` of ``crawl-2026-01-31/`` (8,438 posts with their nested comments) into a fresh
   society on a fresh embedded chDB, through the local stack (Tansu, stream processor, sink), as a user
   would run it; timed, with what the importer read and stored.
2. With the stack stopped, ``build_report`` on the stored society in this process, as ``society report``
   does: embeddings of every distinct text (timed), then each section, timed.
3. Every scalar that has a published value, ours beside it with its source, and the labelled variants.

Results go to the terminal and to BENCHMARKS.md between the ``crawl-report`` markers (``--no-write``
skips). The crawl's own licence and source are in its ``SOURCE.md``.
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import tarfile
import tempfile
import time
from pathlib import Path
from typing import Any

from rich.console import Console

from molt_society.bench.loading import keep_or_remove
from molt_society.bench.machine import run_facts
from molt_society.bench.markdown import markers, publish
from molt_society.bench.report_steps import section_rows, timed_report
from molt_society.bench.society_run import society_command, society_env
from molt_society.report.model import Report, Scalar
from molt_society.report.warehouse_source import ClientWarehouse
from molt_society.report.write import write_report

err = Console(stderr=True)
CRAWL = Path(__file__).resolve().parents[3] / "shared" / "data" / "moltbook" / "crawl-2026-01-31"
BEGIN, END = markers("crawl-report")
SOCIETY = "crawl"


def unpack(source: Path, into: Path) -> Path:
    """The crawl ships as ``.tar.gz`` archives of post files: unpack them (data only, no links or devices
    outside ``into``) so that ``society replay`` reads the folder; a folder without archives is used as is."""
    archives = sorted(source.glob("*.tar.gz")) if source.is_dir() else []
    if not archives:
        return source
    into.mkdir(parents=True)
    for archive in archives:
        with tarfile.open(archive) as tar:
            tar.extractall(into, filter="data")
    return into


def replay(source: Path, tmp: Path) -> dict[str, Any]:
    """``society replay SOURCE`` into ``SOCIETY`` on a chDB in ``tmp``; its wall time and last lines."""
    env = society_env(tmp, drop=("KAFKA_BOOTSTRAP",))
    cmd = [*society_command(), "replay", str(source), "--society", SOCIETY, "--no-dashboard"]
    err.print(f"replaying {source} ...")
    began = time.perf_counter()
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, check=False)
    seconds = time.perf_counter() - began
    if proc.returncode != 0:
        raise RuntimeError(f"society replay exited with {proc.returncode}:\n{proc.stderr[-4000:]}")
    tail = [line for line in (proc.stdout + proc.stderr).splitlines() if line.strip()][-12:]
    return {"replay_s": seconds, "replay_tail": tail}


def counts(wh: ClientWarehouse) -> dict[str, int]:
    """What the society holds, by event type, and its distinct authors and submolts."""
    rows = wh.query(
        f"SELECT type, count() FROM events FINAL WHERE society = '{SOCIETY}' GROUP BY type ORDER BY type"
    ).rows
    out = {str(t): int(n) for t, n in rows}
    auth = wh.query(
        f"SELECT uniqExact(actor) FROM events FINAL WHERE society = '{SOCIETY}' "
        "AND type IN ('post_created', 'comment_created')"
    ).rows
    out["authors"] = int(auth[0][0])
    return out


def _fmt(v: float | int | None) -> str:
    if v is None:
        return "-"
    if isinstance(v, int) or (float(v).is_integer() and abs(v) >= 100):
        return f"{v:,.0f}"
    return f"{v:.4g}"


def markdown(res: dict[str, Any], rep: Report) -> str:
    s = rep.settings
    c = res["counts"]
    lines = [
        BEGIN,
        "## The full report on the real MoltBook crawl (issue 14)",
        "",
        f"Run {res['date']} on {res['machine']}: `{res['command']}`. `society replay` of "
        "`../shared/data/moltbook/crawl-2026-01-31/` into a fresh society through the local stack "
        f"took {res['replay_s']:.0f} s and stored {c.get('post_created', 0):,} posts, "
        f"{c.get('comment_created', 0):,} comments, {c.get('vote_tallied', 0):,} vote tallies "
        f"({c['authors']:,} authors); then `build_report` on the stored society in this process (stack "
        f"stopped): whole report {res['total_s']:.0f} s, HTML {res['html_kb']:,.0f} KB.",
        "",
        "| step | seconds |",
        "|---|---:|",
        f"| embeddings: {s.get('texts_embedded_now', 0):,} distinct texts embedded and stored | "
        f"{s.get('embedding_seconds', 0):.1f} |",
    ]
    lines += section_rows(rep, 120)
    lines += [
        "",
        "Every published figure with its verdict (`report.comparisons`; the crawl is one 8,438-post "
        "snapshot, not the studies' populations): the study's method on this crawl with its 95% CI, the "
        "range across the definitions the report computes, the null where one is computed:",
        "",
        "| published figure | published | this crawl (study's method) | multiverse | null | verdict | why |",
        "|---|---:|---:|---|---|---|---|",
    ]
    for c in rep.comparisons:
        study = c.study
        ours = "-" if study is None or study.value is None else _fmt(study.value)
        if study is not None and study.ci is not None:
            ours += f" [{_fmt(study.ci[0])}, {_fmt(study.ci[1])}]"
        span = f"{_fmt(c.spread[0])} - {_fmt(c.spread[1])} ({len(c.readings)})" if c.spread else ""
        null = "" if c.null is None else _fmt(c.null.value) + (f" ({c.null_flag})" if c.null_flag else "")
        pub = _fmt(c.published) + (
            f" [{c.published_ci[0]:g}, {c.published_ci[1]:g}]" if c.published_ci else ""
        )
        lines.append(
            f"| {c.figure} (`{c.key}`) | {pub} | {ours} | {span} | {null} | **{c.verdict}** | {c.why[:160]} |"
        )
    variants: list[str] = []
    for sec in rep.sections:
        for item in sec.items:
            if not isinstance(item, Scalar):
                continue
            if item.published is not None:
                ours = _fmt(item.value) if item.value is not None else f"- ({(item.reason or '')[:90]})"
                lines.append(
                    f"| {item.label} (`{item.key}`) | {ours} | {_fmt(item.published)} | "
                    f"{item.published_source or ''} |"
                )
            elif "variant" in item.key or "variant" in item.label.lower():
                variants.append(f"| {item.label} (`{item.key}`) | {_fmt(item.value)} |")
    if variants:
        lines += ["", "Labelled variants (no published value):", "", "| figure | this crawl |", "|---|---:|"]
        lines += variants
    lines.append(END)
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m molt_society.bench.crawl_report", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("--source", type=Path, default=CRAWL, help="crawl folder or file to replay")
    parser.add_argument("--out", type=Path, default=Path("BENCHMARKS.md"))
    parser.add_argument("--no-write", action="store_true")
    parser.add_argument("--no-embed", action="store_true", help="skip the embedding-based sections")
    parser.add_argument("--keep", action="store_true", help="keep the work dir (chDB, report files)")
    args = parser.parse_args(argv)
    if not args.source.exists():
        err.print(f"[red]no crawl at {args.source}[/red]")
        return 2
    tmp = Path(tempfile.mkdtemp(prefix="society-bench-crawl-"))
    res: dict[str, Any] = run_facts("python -m molt_society.bench.crawl_report", argv)
    try:
        source = unpack(args.source, tmp / "crawl")
        res |= replay(source, tmp)
        rep, facts = timed_report(
            tmp / "clickhouse", SOCIETY, lambda wh: {"counts": counts(wh)}, embed=not args.no_embed
        )
        res |= facts
        html, _ = write_report([rep], tmp / "report.html")
        res["html_kb"] = html.stat().st_size / 1024
        if args.keep:
            shutil.copy(html, Path("crawl-report.html"))
    finally:
        keep_or_remove(tmp, args.keep, SOCIETY)
    publish(markdown(res, rep), args.out, not args.no_write, BEGIN, END)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
