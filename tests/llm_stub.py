"""An OpenAI-compatible test server: many chat-completion endpoints that answer after a fixed delay.

It stands in for a cluster of model servers (vLLM endpoints) whose speed is known, so that what limits
the LLM agents' rate can be measured: every request is answered after ``delay_s`` (plus an optional
per-request ``jitter_s``, drawn from the request's seed, to make answers come back out of order), with no
limit on concurrency. Each server counts the requests it got, the requests in flight and their peak.

The answer is a valid decision chosen from the request alone (never from timing or from which server
answers): branch ``seed mod len(anyOf)`` of the reply schema the brain sent in ``response_format``, each
field filled from the schema (a const, the ``seed``-th value of an enum, a short text). Without a schema
the answer is ``{"action": "nothing"}``.

It is a real HTTP server on loopback (aiohttp), run in a thread with its own event loop
(:class:`ChatStub`), or as a process for benchmarks: ``python tests/llm_stub.py --servers 4 --delay 0.2``
prints one base URL per line, then serves until killed; ``GET /v1/stats`` returns the counters and
``POST /v1/stats/reset`` clears them.
"""

from __future__ import annotations

import argparse
import asyncio
import random
import threading
from dataclasses import asdict, dataclass
from typing import Any

import orjson
from aiohttp import web


@dataclass
class Stats:
    requests: int = 0
    in_flight: int = 0
    peak: int = 0


def answer_for(body: dict[str, Any]) -> str:
    """The decision the stub answers ``body`` with (see module docstring)."""
    seed = int(body.get("seed") or 0)
    schema = (body.get("response_format") or {}).get("schema") or {}
    branches = schema.get("anyOf") or []
    if not branches:
        return '{"action": "nothing"}'
    branch = branches[seed % len(branches)]
    out: dict[str, Any] = {}
    for key, prop in branch["properties"].items():
        if "const" in prop:
            out[key] = prop["const"]
        elif "enum" in prop:
            out[key] = prop["enum"][seed % len(prop["enum"])]
        else:
            out[key] = f"{key} {seed}"[: int(prop.get("maxLength", 40))]
    return orjson.dumps(out).decode()


def _app(stats: Stats, delay_s: float, jitter_s: float) -> web.Application:
    async def complete(request: web.Request) -> web.Response:
        stats.requests += 1
        stats.in_flight += 1
        stats.peak = max(stats.peak, stats.in_flight)
        try:
            body = await request.json(loads=orjson.loads)
            extra = random.Random(int(body.get("seed") or 0)).random() * jitter_s if jitter_s else 0.0
            await asyncio.sleep(delay_s + extra)
            text = answer_for(body)
            usage = {"prompt_tokens": len(body["messages"][0]["content"]) // 4, "completion_tokens": 20}
            return web.json_response(
                {
                    "model": body.get("model", "stub"),
                    "choices": [{"index": 0, "message": {"role": "assistant", "content": text}}],
                    "usage": usage,
                },
                dumps=lambda o: orjson.dumps(o).decode(),
            )
        finally:
            stats.in_flight -= 1

    async def models(request: web.Request) -> web.Response:
        return web.json_response({"object": "list", "data": [{"id": "stub", "object": "model"}]})

    async def get_stats(request: web.Request) -> web.Response:
        return web.json_response(asdict(stats))

    async def reset(request: web.Request) -> web.Response:
        stats.requests, stats.peak = 0, stats.in_flight
        return web.json_response(asdict(stats))

    app = web.Application()
    app.router.add_post("/v1/chat/completions", complete)
    app.router.add_get("/v1/models", models)
    app.router.add_get("/v1/stats", get_stats)
    app.router.add_post("/v1/stats/reset", reset)
    return app


async def serve(
    servers: int, delay_s: float, jitter_s: float = 0.0
) -> tuple[list[web.AppRunner], list[str], list[Stats]]:
    """Start ``servers`` endpoints on free loopback ports in the running loop."""
    runners, urls, stats = [], [], []
    for _ in range(servers):
        st = Stats()
        runner = web.AppRunner(_app(st, delay_s, jitter_s), access_log=None)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0, backlog=4096)
        await site.start()
        port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
        runners.append(runner)
        urls.append(f"http://127.0.0.1:{port}/v1")
        stats.append(st)
    return runners, urls, stats


class ChatStub:
    """``servers`` stub endpoints served by a thread of their own: ``with ChatStub(4) as stub: stub.urls``."""

    def __init__(self, servers: int = 1, delay_s: float = 0.2, jitter_s: float = 0.0) -> None:
        self.servers, self.delay_s, self.jitter_s = servers, delay_s, jitter_s
        self.urls: list[str] = []
        self.stats: list[Stats] = []
        self._loop = asyncio.new_event_loop()
        self._runners: list[web.AppRunner] = []
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)

    def __enter__(self) -> ChatStub:
        self._thread.start()
        started = asyncio.run_coroutine_threadsafe(
            serve(self.servers, self.delay_s, self.jitter_s), self._loop
        )
        self._runners, self.urls, self.stats = started.result(timeout=10)
        return self

    def __exit__(self, *exc: object) -> None:
        async def stop() -> None:
            for r in self._runners:
                await r.cleanup()

        asyncio.run_coroutine_threadsafe(stop(), self._loop).result(timeout=10)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=10)
        self._loop.close()

    @property
    def base_url(self) -> str:
        """Every server, as ``SOCIETY_LLM_BASE_URL`` takes them (comma-separated)."""
        return ",".join(self.urls)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--servers", type=int, default=1)
    parser.add_argument("--delay", type=float, default=0.2, help="seconds before each answer")
    parser.add_argument("--jitter", type=float, default=0.0, help="up to this many seconds more, per request")
    args = parser.parse_args()

    async def run() -> None:
        _, urls, _ = await serve(args.servers, args.delay, args.jitter)
        print("\n".join(urls), flush=True)
        await asyncio.Event().wait()

    try:
        import uvloop

        uvloop.run(run())
    except ImportError:
        asyncio.run(run())


if __name__ == "__main__":
    main()
