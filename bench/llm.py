"""``python -m bench.llm``: tokens/s through LLM agents against a direct benchmark of the same server.

1. The local model server (SmolLM2-135M-Instruct Q4_1, llama-cpp-python, all cores) is started once.
2. Direct: ``--concurrency`` clients send the agents' own kind of request (a decision prompt over a
   realistic feed, the reply schema, the same ``max_tokens`` and temperature) back to back, ``--requests``
   in all; tokens/s = (prompt + completion tokens) / wall time. Completion tokens/s is reported too.
3. Through the agents: a society on the local stack (Tansu, stream processor, sink, one agent worker)
   whose ``--llm-agents`` LLM agents all wake every tick (``SOCIETY_LLM_RATE=1``) call the same server with
   the same concurrency; tokens/s = the tokens of every ``model_called`` event in ClickHouse / the wall
   time from the first LLM tick to the end of the last one (simulated time: the clock waits for every
   decision).

Results go to the terminal and to BENCHMARKS.md between the ``llm`` markers (``--no-write`` skips).
"""

from __future__ import annotations

import argparse
import asyncio
import shutil
import tempfile
import time
import uuid
from pathlib import Path

from agents.llm_client import ChatClient, ModelCall
from agents.llm_decision import prompt, reply_schema, show_feed
from agents.personas import persona
from bench.dashboard import write_markdown
from bench.pipeline import LLM_BEGIN as BEGIN
from bench.pipeline import LLM_END as END
from bench.pipeline import machine_info
from schemas.control import FeedItem
from society.model_server import LocalModelServer
from society.query import query_http
from society.run import drive_clock, last_window_start, wait_drained
from society.settings import Settings
from society.stack import LocalStack


def _feed() -> list[FeedItem]:
    titles = [
        "Memory is just context with a longer shelf life",
        "What is 17 + 25? Reply with the number.",
        "Shipped a prompt cache today",
        "Do agents dream of electric crabs?",
        "Heartbeat schedules: every 4 hours or every 30 minutes?",
        "Who owns the weights?",
    ]
    return [
        {
            "post_id": f"p{i}",
            "author": f"agent-{i * 7:06d}",
            "submolt": "general",
            "title": t,
            "created_us": i,
            "score": 5 - i,
            "comments": 2,
            "hot": 1.0 - i / 10,
            "recent": [
                [f"c{i}a", "agent-000003", 1, 0, "I agree, mostly."],
                [f"c{i}b", "agent-000009", 2, 1, "Why?"],
            ],
            "excerpt": "A few thoughts from my last run, curious what you think.",
        }
        for i, t in enumerate(titles)
    ]


async def direct(
    url: str, model: str, n: int, concurrency: int, max_tokens: int, temperature: float
) -> dict[str, float]:
    text, shown = show_feed(_feed(), ("general", "tech"))
    schema = reply_schema(shown)
    queue: asyncio.Queue[int] = asyncio.Queue()
    for i in range(n):
        queue.put_nowait(i)
    calls: list[ModelCall] = []

    async with ChatClient(url, concurrency=concurrency, timeout_s=600) as client:

        async def worker() -> None:
            while not queue.empty():
                i = queue.get_nowait()
                msg = prompt(persona(i), f"molty_{i}", [], text, ("general", "tech"), first=i)
                calls.append(
                    await client.complete(
                        model, [{"role": "user", "content": msg}], max_tokens=max_tokens,
                        temperature=temperature, json_schema=schema, seed=i,
                    )
                )  # fmt: skip

        began = time.perf_counter()
        await asyncio.gather(*(worker() for _ in range(concurrency)))
        wall = time.perf_counter() - began
    ok = [c for c in calls if c.outcome == "ok"]
    p, c = sum(x.prompt_tokens for x in ok), sum(x.completion_tokens for x in ok)
    return {
        "calls": len(ok),
        "prompt": p,
        "completion": c,
        "seconds": wall,
        "tps": (p + c) / wall,
        "ctps": c / wall,
    }


def through_agents(s: Settings, ticks: int) -> dict[str, float]:
    society = f"bench_llm_{uuid.uuid4().hex[:6]}"
    stack = LocalStack(s, society)
    stamps: dict[int, float] = {}
    try:
        stack.start()

        async def go() -> None:
            def on_tick(t: int) -> None:
                stamps[t] = time.perf_counter()

            final, end_us = await drive_clock(
                s, stack.bootstrap, society, ticks=ticks, duration=None, on_tick=on_tick
            )
            stamps[final] = time.perf_counter()  # the final tick goes out once tick ticks-1 is decided
            await wait_drained(society, last_window_start(s, end_us), stack)

        asyncio.run(go())
        rows = query_http(
            stack.sink_url(),
            "SELECT count(), countIf(outcome = 'ok'), sum(prompt_tokens), sum(completion_tokens) "
            f"FROM model_calls WHERE society = '{society}'",
        ).rows
    finally:
        stack.stop()
    n, ok, p, c = (int(x) for x in rows[0])
    wall = (
        stamps[ticks] - stamps[0]
    )  # from publishing tick 1's predecessor's end (tick 0 = genesis, no calls)
    return {
        "calls": n,
        "ok": ok,
        "prompt": p,
        "completion": c,
        "seconds": wall,
        "tps": (p + c) / wall,
        "ctps": c / wall,
    }


def _line(name: str, r: dict[str, float]) -> str:
    return (
        f"{name}: {r['calls']:.0f} calls, {r['tps']:.1f} tokens/s "
        f"({r['ctps']:.2f} completion tokens/s) in {r['seconds']:.1f} s"
    )


def _cells(r: dict[str, float]) -> list[str]:
    return [
        f"{r['calls']:.0f}", f"{r['prompt']:,.0f}", f"{r['completion']:,.0f}", f"{r['seconds']:.1f}",
        f"{r['tps']:.1f}", f"{r['ctps']:.2f}",
    ]  # fmt: skip


def _row(*cells: str) -> str:
    return "| " + " | ".join(cells) + " |"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.llm", description=__doc__.splitlines()[0])
    ap.add_argument("--concurrency", type=int, default=4)
    ap.add_argument("--requests", type=int, default=32, help="direct benchmark requests")
    ap.add_argument("--llm-agents", type=int, default=8)
    ap.add_argument("--ticks", type=int, default=5, help="ticks of the society (the first is genesis)")
    ap.add_argument("--no-write", action="store_true")
    args = ap.parse_args(argv)
    tmp = Path(tempfile.mkdtemp(prefix="bench_llm_"))
    base = Settings()
    server = LocalModelServer.from_settings(base, tmp / "model-server.log").start()
    try:
        s = base.model_copy(
            update={
                "state_dir": tmp / "state", "clickhouse_url": f"chdb://{tmp / 'ch'}", "agents": 100,
                "llm_agents": args.llm_agents, "llm_rate": 1.0, "llm_concurrency": args.concurrency,
                "llm_base_url": server.base_url, "dashboard_port": 0,
            }
        )  # fmt: skip
        d = asyncio.run(
            direct(
                server.base_url,
                s.model_names[0],
                args.requests,
                args.concurrency,
                s.llm_max_tokens,
                s.llm_temperature,
            )
        )
        print(_line("direct", d))
        a = through_agents(s, args.ticks)
        print(_line("agents", a))
    finally:
        server.stop()
        shutil.rmtree(tmp, ignore_errors=True)
    ratio = a["tps"] / d["tps"]
    print(f"agents / direct = {ratio:.1%} (tokens/s)")
    if not args.no_write:
        m = machine_info()
        cmd = (
            f"python -m bench.llm --concurrency {args.concurrency} --requests {args.requests} "
            f"--llm-agents {args.llm_agents} --ticks {args.ticks}"
        )
        block = "\n".join(
            [
                BEGIN,
                "## LLM agents: tokens/s through the agents vs the model server alone",
                "",
                f"`{cmd}` (part of `make bench`) on {m.get('cpu', '?')}, {m.get('cores', '?')} cores. "
                "One local server (SmolLM2-135M-Instruct Q4_1, llama-cpp-python, which answers one request "
                "at a time) for both runs; the same prompt kind, reply schema, "
                f"max_tokens {s.llm_max_tokens} and concurrency {args.concurrency}. "
                "Tokens = prompt + completion.",
                "",
                _row(
                    "run",
                    "calls",
                    "prompt tokens",
                    "completion tokens",
                    "seconds",
                    "tokens/s",
                    "completion tokens/s",
                ),
                "|---|---:|---:|---:|---:|---:|---:|",
                _row("direct", *_cells(d)),
                _row(f"through {args.llm_agents} LLM agents", *_cells(a)),
                "",
                f"**Through the agents / direct: {ratio:.1%}** of the tokens/s (target ≥ 90%), in one run.",
                "",
                END,
                "",
            ]
        )
        write_markdown(Path("BENCHMARKS.md"), block, BEGIN, END)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
