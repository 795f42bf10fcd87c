"""``python -m molt_society.bench.llm``: tokens/s through LLM agents against a direct benchmark of the same
server.

1. The local model server (SmolLM2-135M-Instruct Q4_1, llama-cpp-python, all cores) is started once.
2. Through the agents: a society on the local stack (Tansu, stream processor, sink, one agent worker)
   whose ``--llm-agents`` LLM agents all wake every tick (``SOCIETY_LLM_RATE=1``) call the server with
   ``--concurrency`` calls in flight. They reach it through a pass-through proxy in this process that
   records every request body. tokens/s = the prompt + completion tokens of every ``model_called`` event
   in ClickHouse / the wall time from the end of the genesis tick to the end of the last tick (simulated
   time: the clock waits for every decision, so the time between ticks counts against the agents).
3. Direct: the same recorded requests (same prompts, reply schema, max_tokens, temperature and seed, so
   the same completions and token counts) are sent straight to the server with the same concurrency;
   tokens/s = their tokens / wall time.

The ratio compares the same work done two ways. Results go to the terminal and to BENCHMARKS.md between
the ``llm`` markers (``--no-write`` skips).
"""

from __future__ import annotations

import argparse
import asyncio
import shutil
import tempfile
import threading
import time
import uuid
from pathlib import Path

import aiohttp
import orjson
from aiohttp import web

from molt_society.bench.machine import machine_info
from molt_society.bench.markdown import LLM, write_section
from molt_society.runtime.broker import free_port
from molt_society.runtime.settings import Settings
from molt_society.society.drive import drive_clock, last_window_start, wait_drained
from molt_society.society.model_server import LocalModelServer
from molt_society.society.stack import PIPELINE_NICE, LocalStack
from molt_society.warehouse.sink_http import query_http

BEGIN, END = LLM


class RecordingProxy:
    """Forwards ``/v1/*`` to the model server and keeps every request body (a thread with its own loop)."""

    def __init__(self, target: str) -> None:
        self.target = target.rstrip("/")
        self.requests: list[bytes] = []
        self.port = free_port()
        self._loop = asyncio.new_event_loop()
        self._ready = threading.Event()
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._session: aiohttp.ClientSession | None = None
        self.outstanding = 0
        self.last_done: float | None = None
        self.idle: list[float] = []  # gaps with no request outstanding, between the first and the last

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def start(self) -> RecordingProxy:
        self._thread.start()
        self._ready.wait(10)
        return self

    def _serve(self) -> None:
        asyncio.set_event_loop(self._loop)

        async def handler(request: web.Request) -> web.Response:
            body = await request.read()
            self.requests.append(body)
            now = time.perf_counter()
            if self.outstanding == 0 and self.last_done is not None:
                self.idle.append(now - self.last_done)  # nothing asked of the server meanwhile
            self.outstanding += 1
            try:
                return await forward(request, body)
            finally:
                self.outstanding -= 1
                if self.outstanding == 0:
                    self.last_done = time.perf_counter()

        async def forward(request: web.Request, body: bytes) -> web.Response:
            assert self._session is not None
            async with self._session.post(
                f"{self.target}/{request.match_info['tail']}",
                data=body,
                headers={"Content-Type": "application/json"},
                timeout=aiohttp.ClientTimeout(total=600),
            ) as resp:
                return web.Response(
                    status=resp.status, body=await resp.read(), content_type="application/json"
                )

        async def main() -> None:
            self._session = aiohttp.ClientSession()
            app = web.Application(client_max_size=1 << 24)
            app.router.add_post("/v1/{tail:.*}", handler)
            runner = web.AppRunner(app)
            await runner.setup()
            await web.TCPSite(runner, "127.0.0.1", self.port).start()
            self._ready.set()
            await asyncio.Event().wait()

        self._loop.run_until_complete(main())


async def direct(url: str, requests: list[bytes], concurrency: int) -> dict[str, float]:
    """Send ``requests`` (chat-completion bodies) to ``url`` with ``concurrency`` in flight."""
    queue: asyncio.Queue[bytes] = asyncio.Queue()
    for body in requests:
        queue.put_nowait(body)
    usage: list[tuple[int, int]] = []
    async with aiohttp.ClientSession() as session:

        async def worker() -> None:
            while not queue.empty():
                body = queue.get_nowait()
                async with session.post(
                    f"{url}/chat/completions", data=body, headers={"Content-Type": "application/json"},
                    timeout=aiohttp.ClientTimeout(total=600),
                ) as resp:  # fmt: skip
                    doc = orjson.loads(await resp.read())
                u = doc.get("usage") or {}
                usage.append((int(u.get("prompt_tokens") or 0), int(u.get("completion_tokens") or 0)))

        began = time.perf_counter()
        await asyncio.gather(*(worker() for _ in range(concurrency)))
        wall = time.perf_counter() - began
    p, c = sum(u[0] for u in usage), sum(u[1] for u in usage)
    return {
        "calls": len(usage),
        "prompt": p,
        "completion": c,
        "seconds": wall,
        "tps": (p + c) / wall,
        "ctps": c / wall,
    }


def through_agents(s: Settings, ticks: int) -> dict[str, float]:
    society = f"bench_llm_{uuid.uuid4().hex[:6]}"
    stack = LocalStack(s, society, nice=PIPELINE_NICE)  # as the stack does beside its own model server
    stamps: dict[int, float] = {}
    try:
        stack.start()

        async def go() -> None:
            def on_tick(t: int) -> None:
                stamps[t] = time.perf_counter()

            _, end_us = await drive_clock(
                s, stack.bootstrap, society, ticks=ticks, duration=None, on_tick=on_tick
            )
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
    # on_tick(t) runs once every decision of tick t is folded into the feeds: from the end of genesis
    # (tick 0, no model calls) to the end of the last tick
    wall = stamps[ticks - 1] - stamps[0]
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
    ap = argparse.ArgumentParser(
        prog="python -m molt_society.bench.llm", description=__doc__.split("\n\n")[0]
    )
    ap.add_argument("--concurrency", type=int, default=4)
    ap.add_argument("--llm-agents", type=int, default=8)
    ap.add_argument("--ticks", type=int, default=5, help="ticks of the society (the first is genesis)")
    ap.add_argument("--no-write", action="store_true")
    args = ap.parse_args(argv)
    tmp = Path(tempfile.mkdtemp(prefix="bench_llm_"))
    base = Settings()
    server = LocalModelServer.from_settings(base, tmp / "model-server.log").start()
    try:
        proxy = RecordingProxy(server.base_url).start()
        s = base.model_copy(
            update={
                "state_dir": tmp / "state", "clickhouse_url": f"chdb://{tmp / 'ch'}", "agents": 100,
                "llm_agents": args.llm_agents, "llm_rate": 1.0, "llm_concurrency": args.concurrency,
                "llm_base_url": proxy.base_url, "dashboard_port": 0,
            }
        )  # fmt: skip
        a = through_agents(s, args.ticks)
        print(_line("agents", a))
        print(
            f"server idle while the agents ran: {sum(proxy.idle):.1f} s in {len(proxy.idle)} gaps "
            f"(max {max(proxy.idle, default=0):.2f} s)"
        )
        gaps = list(proxy.idle)
        d = asyncio.run(direct(server.base_url, list(proxy.requests), args.concurrency))
        print(_line("direct", d))
    finally:
        server.stop()
        shutil.rmtree(tmp, ignore_errors=True)
    ratio = a["tps"] / d["tps"]
    print(f"agents / direct = {ratio:.1%} (tokens/s)")
    if not args.no_write:
        m = machine_info()
        cmd = (
            f"python -m molt_society.bench.llm --concurrency {args.concurrency} "
            f"--llm-agents {args.llm_agents} --ticks {args.ticks}"
        )
        block = "\n".join(
            [
                BEGIN,
                "## LLM agents: tokens/s through the agents vs the model server alone",
                "",
                f"`{cmd}` (part of `make bench`) on {m.get('cpu', '?')}, {m.get('nproc', '?')} cores. "
                "One local server (SmolLM2-135M-Instruct Q4_1, llama-cpp-python, which answers one request "
                "at a time) for both runs. The direct run replays exactly the requests the agents sent "
                "(recorded by a pass-through proxy: same prompts, reply schema, seeds, so the same "
                f"completions), with the same concurrency ({args.concurrency}). "
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
                _row(f"through {args.llm_agents} LLM agents", *_cells(a)),
                _row("direct (same requests)", *_cells(d)),
                "",
                f"**Through the agents / direct: {ratio:.1%}** of the tokens/s (target ≥ 90%), in one run. "
                f"While the agents ran, the server had no request to work on for {sum(gaps):.1f} s in all "
                f"({len(gaps)} gaps, the longest {max(gaps, default=0):.2f} s).",
                "",
                END,
                "",
            ]
        )
        write_section(Path("BENCHMARKS.md"), block, BEGIN, END)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
