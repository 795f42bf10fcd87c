"""``python -m molt_society.bench.report``: the full ``society report`` of a society of 1,000,000 events,
embeddings included, with the time of every diagnostic, and the streaming metrics checked against
the batch ones.

1. One MoltBook-shaped dataset (``bench.dataset``) of ``--events`` events for one society, produced at full
   speed through the local stack (Tansu, stream processor, sink on embedded chDB), so the society has the
   pipeline's streaming metrics as well as its events.
2. The stack stops (the sink releases chDB) and the report is built in this process on the stored society,
   as ``society report`` does on a society that is not running: embeddings of every distinct text not yet
   embedded (timed separately, with texts/s), then each diagnostic, timed.
3. The embedding rate is also measured on the real MoltBook texts of the shared samples (longer than the
   simulated ones), so a society of unique texts can be extrapolated.

Results go to the terminal and to BENCHMARKS.md between the ``report`` markers (``--no-write`` skips).
"""

from __future__ import annotations

import argparse
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

from rich.console import Console

from molt_society.bench.dataset import build
from molt_society.bench.loading import fresh_settings, keep_or_remove, load
from molt_society.bench.machine import run_facts
from molt_society.bench.markdown import REPORT, publish
from molt_society.bench.report_steps import section_rows, timed_report
from molt_society.report.embeddings import Encoder
from molt_society.report.model import Report, Scalar, Table
from molt_society.report.warehouse_source import ClientWarehouse
from molt_society.report.write import write_report
from molt_society.society.stack import LocalStack
from molt_society.warehouse.sink_http import query_http

BEGIN, END = REPORT

err = Console(stderr=True)
SAMPLES = Path(__file__).resolve().parents[3] / "shared" / "data" / "moltbook"


def load_society(events: int, tmp: Path, society: str) -> dict[str, Any]:
    settings = fresh_settings(tmp)
    records = tmp / "data.records"
    err.print(f"generating {events:,} events ...")
    ds = build(events, partitions=settings.partitions, societies={society: records})
    stack = LocalStack(settings, society)
    out: dict[str, Any] = {"events": ds.events, "window_seconds": settings.window_seconds}
    try:
        url, began = load(stack, records, ds.events)
        # the final watermark closes the last windows: wait until their metrics stop arriving
        last = -1
        while (m := _metric_rows(url, society)) != last:
            last = m
            time.sleep(5)
        out["load_s"] = time.time() - began
        err.print(f"\nstored {ds.events:,} events and {last:,} metric rows in {out['load_s']:.0f} s")
    finally:
        stack.stop()
    return out


def _metric_rows(url: str, society: str) -> int:
    return int(query_http(url, f"SELECT count() FROM metrics WHERE society = '{society}'").rows[0][0])


def real_post_texts() -> list[str]:
    """The post texts (title and body, as the report embeds them) of the shared observatory export, in the
    file's order."""
    from molt_society.importers import import_path
    from molt_society.schemas.events import PostCreated

    path = SAMPLES / "observatory-export" / "public" / "data" / "all" / "posts_raw.json"
    return [
        f"{e.body.title}\n{e.body.content}".strip()
        for e in import_path(path, "s").events
        if isinstance(e, PostCreated)
    ]


def sample_rate(enc: Encoder) -> dict[str, float]:
    """Texts/s of the model on the real MoltBook post texts of the shared samples (no storage)."""
    texts = real_post_texts()[:2000]
    enc.encode(texts[:50])  # load the model
    began = time.perf_counter()
    enc.encode(texts)
    seconds = time.perf_counter() - began
    chars = sum(len(t) for t in texts) / max(1, len(texts))
    return {"texts": len(texts), "seconds": seconds, "rate": len(texts) / seconds, "mean_chars": chars}


def markdown(res: dict[str, Any], rep: Report) -> str:
    s = rep.settings
    lines = [
        BEGIN,
        "## Report (issue 5)",
        "",
        f"Run {res['date']} on {res['machine']}: `{res['command']}`. {res['events']:,} events of one "
        "society produced through the stack (stream processor and sink, embedded chDB) in "
        f"{res['load_s']:.0f} s, then `society report`'s `build_report` on the stored society in this "
        f"process (stack stopped). Whole report {res['total_s']:.0f} s; HTML {res['html_kb']:,.0f} KB, "
        f"JSON {res['json_kb']:,.0f} KB.",
        "",
        "| step | seconds |",
        "|---|---|",
        f"| embeddings: {s.get('texts_embedded_now', 0):,} distinct texts embedded and stored "
        f"({res['embed_rate']:,.0f} texts/s) | {s.get('embedding_seconds', 0):.1f} |",
    ]
    lines += section_rows(rep)
    sr = res["sample_rate"]
    lines += [
        "",
        "The dataset tiles one simulated base period, so its "
        f"{s.get('texts_embedded_now', 0):,} distinct texts are short ({res['sim_chars']:.0f} characters on "
        "average) and repeat across copies; each is embedded once. On real MoltBook posts (the observatory "
        f"export, {sr['mean_chars']:.0f} characters on average) the model encodes {sr['rate']:.0f} texts/s "
        f"({sr['texts']:,} posts in {sr['seconds']:.1f} s): a society of N unique texts of that length needs "
        f"about N / {sr['rate']:.0f} seconds of embedding, once.",
        "",
        "Streaming metrics of the pipeline against their batch recomputation from the stored events "
        "(the report's *Streaming vs batch* section):",
        "",
        "| figure | values compared | max abs difference |",
        "|---|---|---|",
    ]
    table = next((i for sec in rep.sections for i in sec.items if i.key == "agreement.table"), None)
    if isinstance(table, Table):
        for name, n, diff in table.rows:
            lines.append(f"| {name} | {n} | {float(diff or 0):.3g} |")
    worst = rep.scalars().get("agreement.max_abs_diff")
    if isinstance(worst, Scalar):
        shown = worst.value if worst.value is not None else worst.reason
        lines += ["", f"Largest difference over every value compared: {shown}."]
    lines.append(END)
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m molt_society.bench.report", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("--events", type=int, default=1_000_000)
    parser.add_argument("--out", type=Path, default=Path("BENCHMARKS.md"))
    parser.add_argument("--no-write", action="store_true")
    parser.add_argument("--keep", action="store_true", help="keep the work dir (chDB, report files)")
    args = parser.parse_args(argv)
    tmp = Path(tempfile.mkdtemp(prefix="society-bench-report-"))
    society = f"rep{uuid.uuid4().hex[:6]}"
    res: dict[str, Any] = run_facts("python -m molt_society.bench.report", argv)
    try:
        res |= load_society(args.events, tmp, society)
        enc = Encoder()

        def sim_chars(wh: ClientWarehouse) -> dict[str, Any]:
            sql = f"SELECT avg(length(text)) FROM texts WHERE society = '{society}'"
            return {"sim_chars": float(wh.query(sql).rows[0][0])}

        rep, facts = timed_report(tmp / "clickhouse", society, sim_chars, encoder=enc)
        res |= facts
        s = rep.settings
        res["embed_rate"] = s.get("texts_embedded_now", 0) / max(1e-9, s.get("embedding_seconds", 0) or 1e-9)
        html, js = write_report([rep], tmp / "report.html")
        res["html_kb"], res["json_kb"] = html.stat().st_size / 1024, js.stat().st_size / 1024
        res["sample_rate"] = sample_rate(enc)
    finally:
        keep_or_remove(tmp, args.keep, society)
    publish(markdown(res, rep), args.out, not args.no_write, BEGIN, END)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
