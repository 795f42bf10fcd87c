"""``python -m molt_society.bench.llm_rate``: LLM decisions/s against configured concurrency, with 1 and 4
model servers.

The model servers are the OpenAI-compatible test server ``tests/llm_stub.py`` (a separate process, so it
takes no CPU time from the agents' process under the GIL): every request is answered after 200 ms, with
no limit on concurrency, like a cluster far larger than the load. The agents are the agent worker's LLM
brain (``agents.llm_brain.open_llm_brain`` from Settings, every agent awake: ``llm_rate=1``), deciding
whole ticks. For each number of servers and per-server concurrency ``c``:

- the ideal rate is ``servers * c / 0.2 s`` decisions/s (every slot always busy);
- decisions/s = the calls answered / the wall time of the ticks (prompts, reply schemas, parsing and the
  events included, as in the worker);
- the peak of requests in flight is what each server saw (its own counter).

Each configuration runs ``servers * c * 25`` calls (each slot answers 25 times, about 5 s at the ideal
rate), at most ``--max-calls``, over ticks of at most 2,000 agents. Results go to the terminal and to
BENCHMARKS.md between the ``llm-rate`` markers (``--no-write`` skips).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import subprocess
import sys
import tempfile
import time
import urllib.request
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import numpy as np
import psutil

from molt_society.agents.behaviour import load_behaviour
from molt_society.agents.brain import FeedView, TickContext
from molt_society.agents.llm_brain import open_llm_brain
from molt_society.agents.roster import build_roster
from molt_society.bench.machine import machine_info
from molt_society.bench.markdown import markers, md_table, write_section
from molt_society.runtime.settings import Settings
from molt_society.schemas.control import FeedItem
from molt_society.schemas.events import ModelCalled

BEGIN, END = markers("llm-rate")
STUB = Path(__file__).resolve().parents[2] / "tests" / "llm_stub.py"
DELAY_S = 0.2
ROUNDS = 25  # answers per slot and configuration
MAX_AGENTS = 2_000


@dataclass(frozen=True)
class Row:
    servers: int
    concurrency: int
    agents: int
    calls: int
    seconds: float
    cpu_seconds: float  # of this process (the agents')
    stub_cpu_seconds: float  # of the test server's process
    peaks: list[int]
    requests: list[int]

    @property
    def rate(self) -> float:
        return self.calls / self.seconds

    @property
    def ideal(self) -> float:
        return self.servers * self.concurrency / DELAY_S


def start_stub(servers: int) -> tuple[subprocess.Popen[str], list[str]]:
    proc = subprocess.Popen(
        [sys.executable, str(STUB), "--servers", str(servers), "--delay", str(DELAY_S)],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None
    urls = [proc.stdout.readline().strip() for _ in range(servers)]
    if not all(u.startswith("http://") for u in urls):
        proc.kill()
        raise RuntimeError(f"the test server did not start: {urls}")
    return proc, urls


def stats(url: str, reset: bool = False) -> dict[str, int]:
    req = urllib.request.Request(
        f"{url}/stats/reset" if reset else f"{url}/stats", method="POST" if reset else "GET"
    )
    with urllib.request.urlopen(req, timeout=10) as resp:
        doc: dict[str, int] = json.loads(resp.read())
        return doc


def _cpu(proc: psutil.Process) -> float:
    times = proc.cpu_times()
    return float(times.user + times.system)


def feed(submolts: tuple[str, ...]) -> FeedView:
    lists: dict[str, dict[str, list[FeedItem]]] = {}
    for j, name in enumerate(submolts):
        items: list[FeedItem] = [
            {
                "post_id": f"post-{j}-{k}",
                "author": f"agent-{900000 + k:06d}",
                "submolt": name,
                "title": f"a post in {name}",
                "created_us": 1_000 * (2 * j + k),
                "score": k,
                "comments": 1,
                "hot": float(j + k),
                "recent": [[f"c-{j}-{k}", "agent-000001", 1, 0, "a first comment"]],
                "excerpt": "the start of the post's text",
            }
            for k in range(3)
        ]
        lists[name] = {"new": items, "hot": items}
    return FeedView(0, lists)


async def measure(urls: list[str], concurrency: int, max_calls: int, stub: psutil.Process) -> Row:
    calls = min(max_calls, len(urls) * concurrency * ROUNDS)
    agents = min(MAX_AGENTS, calls)
    ticks = math.ceil(calls / agents)
    behaviour = load_behaviour()
    submolts = tuple(behaviour.submolts.names)
    s = Settings(
        llm_base_url=",".join(urls),
        llm_concurrency=concurrency,
        llm_agents=agents,
        llm_rate=1.0,
        llm_models="bench-model",
        state_dir=Path(tempfile.gettempdir()),
    )
    cohort = build_roster(1, agents, 1, behaviour, llm_agents=agents, models=s.model_names).cohort(0)
    view = feed(submolts)
    for u in urls:
        stats(u, reset=True)
    answered = 0
    async with open_llm_brain(s) as brain:
        start, cpu, stub_cpu = time.perf_counter(), time.process_time(), _cpu(stub)
        for t in range(1, ticks + 1):
            ctx = TickContext(
                "bench", t, datetime(2026, 2, 1, tzinfo=UTC), 60.0, np.random.default_rng([1, t]), submolts
            )
            events = await brain.decide(cohort, view, ctx)
            answered += sum(1 for ev in events if isinstance(ev, ModelCalled) and ev.body.outcome == "ok")
        seconds, cpu_s, stub_s = time.perf_counter() - start, time.process_time() - cpu, _cpu(stub) - stub_cpu
    after = [stats(u) for u in urls]
    return Row(
        servers=len(urls),
        concurrency=concurrency,
        agents=agents,
        calls=answered,
        seconds=seconds,
        cpu_seconds=cpu_s,
        stub_cpu_seconds=stub_s,
        peaks=[a["peak"] for a in after],
        requests=[a["requests"] for a in after],
    )


def render(rows: list[Row], command: str, loads: tuple[str, str]) -> str:
    m = machine_info()
    table = md_table(
        ["servers", "concurrency per server", "calls in flight (ideal)", "agents x ticks", "calls", "seconds",
         "decisions/s", "ideal/s", "of ideal", "peak in flight per server", "CPU s per 1,000 calls: agents",
         "test server", "agents' one-core ceiling/s"],
        [
            [
                str(r.servers), str(r.concurrency), str(r.servers * r.concurrency),
                f"{r.agents:,} x {math.ceil(r.calls / r.agents)}", f"{r.calls:,}", f"{r.seconds:.1f}",
                f"{r.rate:,.0f}", f"{r.ideal:,.0f}", f"{100 * r.rate / r.ideal:.0f}%",
                " / ".join(str(p) for p in r.peaks), f"{1000 * r.cpu_seconds / r.calls:.2f}",
                f"{1000 * r.stub_cpu_seconds / r.calls:.2f}", f"{r.calls / r.cpu_seconds:,.0f}",
            ]
            for r in rows
        ],
    )  # fmt: skip
    return (
        f"{BEGIN}\n## LLM agents: decisions/s against concurrency and model servers\n\n"
        f"`{command}` (part of `make bench`) on {m['cpu']}, {m['nproc']} cores, {m['ram']}, Python "
        f"{m['python']}, {datetime.now(UTC):%Y-%m-%d}. The servers: `tests/llm_stub.py` in its own process, "
        f"answering every request after {DELAY_S * 1000:.0f} ms with unlimited concurrency. The agents: the "
        "agent worker's LLM brain (`open_llm_brain`), every agent awake, deciding whole ticks (prompt, "
        "reply schema, HTTP, parsing, events). Ideal = servers x concurrency / 0.2 s. Peak in flight: "
        "each server's own count. One-core ceiling: the decisions/s the agents' process would reach on a "
        "core of its own (calls / its CPU seconds). Load average (1 min) before the run "
        f"{loads[0]}, after {loads[1]}. Where decisions/s falls well short of the ideal, the CPU columns say "
        "why: the agents' process and the test server's (one process for every server) share the machine's "
        "cores with each other and with any other work.\n\n"
        f"{table}\n{END}\n"
    )


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        prog="python -m molt_society.bench.llm_rate", description=__doc__.split("\n\n")[0]
    )
    ap.add_argument("--concurrency", default="4,16,64,256", help="per-server concurrencies, comma-separated")
    ap.add_argument("--servers", default="1,4", help="numbers of servers, comma-separated")
    ap.add_argument("--max-calls", type=int, default=8_000, help="calls per configuration at most")
    ap.add_argument("--no-write", action="store_true")
    args = ap.parse_args(argv)
    counts = [int(x) for x in args.servers.split(",")]
    levels = [int(x) for x in args.concurrency.split(",")]
    before = f"{psutil.getloadavg()[0]:.1f}"
    proc, urls = start_stub(max(counts))
    rows = []
    try:
        for n in counts:
            for c in levels:
                row = asyncio.run(measure(urls[:n], c, args.max_calls, psutil.Process(proc.pid)))
                rows.append(row)
                print(
                    f"servers {n} concurrency {c}: {row.calls} calls in {row.seconds:.1f} s = "
                    f"{row.rate:,.0f}/s (ideal {row.ideal:,.0f}/s), peaks {row.peaks}, "
                    f"requests {row.requests}",
                    flush=True,
                )
    finally:
        proc.kill()
        proc.wait()
    given = sys.argv[1:] if argv is None else argv
    command = " ".join(["python -m molt_society.bench.llm_rate", *given])
    block = render(rows, command, (before, f"{psutil.getloadavg()[0]:.1f}"))
    print(block)
    if not args.no_write:
        write_section(Path("BENCHMARKS.md"), block, BEGIN, END)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
