"""A chat-completions endpoint on loopback for unit tests of the model client, the LLM brain and the judge:
it stands in for the network behaviour and the replies of a model server (the real one runs in the
integration tests)."""

from __future__ import annotations

from typing import Any

from aiohttp import web


async def serve_chat(handler: Any) -> tuple[web.AppRunner, str]:
    """Serve ``handler`` at ``POST /v1/chat/completions``; return the runner and the base URL (``…/v1``)."""
    app = web.Application()
    app.router.add_post("/v1/chat/completions", handler)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    return runner, f"http://127.0.0.1:{port}/v1"
