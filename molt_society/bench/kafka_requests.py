"""``python -m molt_society.bench.kafka_requests``: every request a society sends its broker, by Kafka API,
over a long run, on both local brokers.

For each broker (Apache Kafka, Tansu): the broker starts advertising a recording proxy
(``runtime.kafka_proxy``) in front of it, so that every client of the stack talks to it through the proxy;
then the demo's society (2,000 agents, ticks of 300 s) runs ``--ticks`` ticks (default 8,640, a simulated
month) with ``KAFKA_BOOTSTRAP`` at the proxy and, as the stack does on that broker by default, idempotent
producers and trimming on Apache Kafka only. Every second: the run's newest tick and the CPU seconds of
every process, the broker and the proxy included. Afterwards, per 500-tick slice and per API: requests,
KiB (both ways) and response milliseconds (broker and loopback; a fetch's wait for data included) per tick,
and each process's CPU milliseconds per tick. The table shows the first slice, the last and their ratio:
what grows with the society's age shows itself there.

The proxy itself costs CPU on the same two cores, so the tick rates here are below those of
``bench.aging``; read the per-tick counts and the ratios. Figures go to ``<work>/<broker>.json`` and the
table to BENCHMARKS.md between the ``kafka-requests`` markers (unless ``--no-write``).
"""

from __future__ import annotations

import argparse
import bisect
import json
import shutil
import subprocess
import sys
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any

from molt_society.bench.aging import journal_ticks
from molt_society.bench.brokers import LABEL, Sampler, slices
from molt_society.bench.machine import machine_line
from molt_society.bench.markdown import markers, md_table, publish, read_doc
from molt_society.bench.processes import REPO
from molt_society.bench.society_run import run_args, society_command, society_env
from molt_society.runtime.apache_kafka import KafkaBroker
from molt_society.runtime.broker import LocalBroker, free_port, wait_for_port
from molt_society.runtime.kafka_proxy import FIELDS

BEGIN, END = markers("kafka-requests")
BROKERS = ("kafka", "tansu")
AGENTS = 2000
TICK_SECONDS = 300.0
SOCIETY = "requests"
HEAD = ["API", "requests first", "requests last", "ratio", "KiB first", "KiB last", "ms first", "ms last"]
HEAD += ["ms ratio"]


def _totals(path: Path) -> list[tuple[float, dict[str, list[float]]]]:
    """The proxy's lines: ``(wall time, {api: [requests, request bytes, responses, response bytes,
    seconds]})``, cumulative."""
    out: list[tuple[float, dict[str, list[float]]]] = []
    for line in path.read_text().splitlines():
        try:
            d = json.loads(line)
        except ValueError:
            continue
        if tuple(d.get("fields", ())) == FIELDS:
            out.append((float(d["ts"]), d["apis"]))
    return out


def per_api_slices(
    totals: list[tuple[float, dict[str, list[float]]]], by_tick: dict[int, float], width: int = 500
) -> list[dict[str, Any]]:
    """Per ``width`` ticks (by the journal's wall time of its first and last tick): per API the requests,
    KiB and response milliseconds per tick over the slice (the proxy's totals nearest those times)."""
    if not totals or not by_tick:
        return []
    times = [t for t, _ in totals]

    def at(ts: float) -> dict[str, list[float]]:
        i = min(bisect.bisect_left(times, ts), len(times) - 1)
        return totals[i][1]

    newest = max(by_tick)
    out: list[dict[str, Any]] = []
    for a in range(0, newest, width):
        b = min(a + width, newest)
        if a not in by_tick or b not in by_tick or b <= a:
            continue
        start, end = at(by_tick[a]), at(by_tick[b])
        n = b - a
        apis: dict[str, dict[str, float]] = {}
        for api, v in end.items():
            s = start.get(api, [0.0] * len(FIELDS))
            d = dict(zip(FIELDS, (x - y for x, y in zip(v, s, strict=True)), strict=True))
            apis[api] = {
                "requests": round(d["requests"] / n, 2),
                "kib": round((d["request_bytes"] + d["response_bytes"]) / 1024 / n, 2),
                "ms": round(1000 * d["seconds"] / n, 2),
            }
        out.append({"first": a, "last": b, "seconds": round(by_tick[b] - by_tick[a], 2), "apis": apis})
    return out


def run_broker(kind: str, work: Path, ticks: int) -> dict[str, Any]:
    """The society on ``kind`` through the proxy; its figures (also written to ``<work>/<kind>.json``)."""
    shutil.rmtree(work / kind, ignore_errors=True)
    base = work / kind
    base.mkdir(parents=True)
    listen, port = free_port(), free_port()
    out = base / "requests.jsonl"
    proxy_argv = [sys.executable, "-m", "molt_society.runtime.kafka_proxy", "--listen", str(listen)]
    proxy_argv += ["--upstream", f"127.0.0.1:{port}", "--out", str(out)]
    broker: KafkaBroker | LocalBroker | None = None
    proxy: subprocess.Popen[bytes] | None = None
    doc: dict[str, Any] = {"broker": kind, "ticks": ticks}
    try:
        if kind == "kafka":  # it asks whether it is ready through the address it advertises: proxy first
            proxy = subprocess.Popen(proxy_argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            wait_for_port("127.0.0.1", listen)
            broker = KafkaBroker.start(base / "kafka", base / "broker.log", port, advertised_port=listen)
        else:
            broker = LocalBroker.start(base / "broker.log", port, advertised_port=listen)
            proxy = subprocess.Popen(proxy_argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            wait_for_port("127.0.0.1", listen)
        env = society_env(base, drop=("KAFKA_BOOTSTRAP", "SOCIETY_BROKER", "SOCIETY_TRIM", "SOCIETY_IDEMP"))
        on_kafka = "true" if kind == "kafka" else "false"  # what the stack does on that local broker
        env.update(
            KAFKA_BOOTSTRAP=f"127.0.0.1:{listen}",
            SOCIETY_BROKER=kind,
            SOCIETY_TRIM=on_kafka,
            SOCIETY_IDEMPOTENT_PRODUCER=on_kafka,
        )
        journal = base / "state" / SOCIETY / "run.log"
        began = time.monotonic()
        sampler = Sampler(base / "state", journal, began, extra={"broker": broker.pid, "proxy": proxy.pid})
        sampler.start()
        argv = society_command() + run_args(SOCIETY, AGENTS, ticks, TICK_SECONDS, "--no-dashboard")
        with (base / "run.out").open("wb") as f:
            code = subprocess.run(argv, env=env, stdout=f, stderr=subprocess.STDOUT, check=False).returncode
        sampler.halt.set()
        sampler.join()
        doc.update(exit_code=code, wall_s=round(time.monotonic() - began, 1))
        doc["cpu"] = [asdict(s) for s in slices(sampler.samples, ticks)]
    finally:
        if proxy is not None:
            proxy.terminate()
            proxy.wait(timeout=30)
        if broker is not None:
            broker.stop()
    doc["requests"] = per_api_slices(_totals(out), journal_ticks(journal))
    (work / f"{kind}.json").write_text(json.dumps(doc))
    return doc


def _ratio(first: float, last: float) -> str:
    return f"{last / first:.2f}x" if first > 0 else ("-" if last == 0 else "new")


def broker_section(doc: dict[str, Any]) -> list[str]:
    kind = doc["broker"]
    req = doc.get("requests") or []
    parts = [
        "",
        f"### {LABEL.get(kind, kind)}",
        "",
        f"{doc['ticks']:,} ticks: exit {doc.get('exit_code')}, {doc.get('wall_s', 0):,.0f} s with the proxy.",
    ]
    if len(req) < 2:
        return [*parts, "", "Too few slices to compare."]
    first, last = req[0], req[-1]
    # slowest last first; ties by name, not by the set's (hash-seeded) order
    names = sorted(
        set(first["apis"]) | set(last["apis"]), key=lambda n: (-last["apis"].get(n, {}).get("ms", 0), n)
    )
    rows = []
    zero = {"requests": 0.0, "kib": 0.0, "ms": 0.0}
    for name in names:
        f, la = first["apis"].get(name, zero), last["apis"].get(name, zero)
        if f["requests"] == 0 and la["requests"] == 0:
            continue
        rows.append(
            [
                name,
                f"{f['requests']:.2f}",
                f"{la['requests']:.2f}",
                _ratio(f["requests"], la["requests"]),
                f"{f['kib']:.1f}",
                f"{la['kib']:.1f}",
                f"{f['ms']:.1f}",
                f"{la['ms']:.1f}",
                _ratio(f["ms"], la["ms"]),
            ]
        )
    a, b = f"{first['first']:,}-{first['last']:,}", f"{last['first']:,}-{last['last']:,}"
    parts += [
        "",
        f"Per tick, ticks {a} (first) and {b} (last); ms: response milliseconds summed over the requests.",
        "",
        md_table(HEAD, rows),
    ]
    cpu = doc.get("cpu") or []
    if len(cpu) >= 2:
        c0, c1 = cpu[0], cpu[-1]
        roles = sorted(set(c0["cpu_share"]) & set(c1["cpu_share"]))
        crow = []
        for r in roles:
            m0 = 1000 * c0["cpu_share"][r] / c0["ticks_per_s"] if c0["ticks_per_s"] else 0.0
            m1 = 1000 * c1["cpu_share"][r] / c1["ticks_per_s"] if c1["ticks_per_s"] else 0.0
            crow.append([r, f"{m0:.1f}", f"{m1:.1f}", _ratio(m0, m1)])
        parts += [
            "",
            f"CPU milliseconds per tick, ticks {c0['first']:,}-{c0['last']:,} "
            f"({c0['ticks_per_s']:.1f} ticks/s) and {c1['first']:,}-{c1['last']:,} "
            f"({c1['ticks_per_s']:.1f} ticks/s):",
            "",
            md_table(["process", "first", "last", "ratio"], crow),
        ]
    return parts


def markdown(work: Path, command: str) -> str:
    parts = [BEGIN, "## Requests to the broker by Kafka API, over a long run (issue 26)", ""]
    parts.append(
        f"Command: `{command}`; {machine_line(python=True)}; {time.strftime('%Y-%m-%d')}. One run per "
        f"broker, the demo's society ({AGENTS:,} agents, ticks of {TICK_SECONDS:.0f} s), every request "
        "through `runtime.kafka_proxy`."
    )
    for kind in BROKERS:
        doc = read_doc(work / f"{kind}.json")
        if doc:
            parts += broker_section(doc)
    parts.append(END)
    return "\n".join(parts)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        prog="python -m molt_society.bench.kafka_requests", description=__doc__.split("\n\n")[0]
    )
    ap.add_argument("--brokers", nargs="+", choices=BROKERS, default=list(BROKERS))
    ap.add_argument("--ticks", type=int, default=8640)
    ap.add_argument("--work", type=Path, default=Path("/tmp/molt-bench-requests"))
    ap.add_argument("--report-only", action="store_true", help="write the table from an earlier run's JSON")
    ap.add_argument("--no-write", action="store_true")
    ap.add_argument("--command", default=None, help="the command shown in the report (with --report-only)")
    args = ap.parse_args(argv)
    given = sys.argv[1:] if argv is None else argv
    command = args.command or " ".join(["python -m molt_society.bench.kafka_requests", *given])
    args.work.mkdir(parents=True, exist_ok=True)
    if not args.report_only:
        for kind in args.brokers:
            print(f"[kafka-requests] {kind}: {args.ticks:,} ticks ...", file=sys.stderr, flush=True)
            doc = run_broker(kind, args.work, args.ticks)
            said = f"exit {doc.get('exit_code')} in {doc.get('wall_s')} s"
            print(f"[kafka-requests] {kind}: {said}", file=sys.stderr, flush=True)
    publish(markdown(args.work, command), REPO / "BENCHMARKS.md", not args.no_write, BEGIN, END)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
