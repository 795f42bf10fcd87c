"""The local model server process: llama-cpp-python's OpenAI-compatible app behind the project's checks.

``python -m llama_cpp.server`` answers any ``Host`` and grants every ``Origin`` CORS with credentials, so
any web page a user opens could use the model and read its answers (also by DNS rebinding). This entry
point builds the same app (``llama_cpp.server.app.create_app``), drops its CORS middleware, and serves it
behind ``runtime.web_guard.GuardedASGI``: loopback ``Host`` with this port, no foreign ``Origin``, JSON
bodies only. ``society.model_server.LocalModelServer`` starts it.
"""

from __future__ import annotations

import argparse
from typing import Any

from molt_society.runtime.web_guard import GuardedASGI


def build_app(model: str, alias: str, port: int, n_ctx: int, n_threads: int) -> GuardedASGI:
    """The guarded ASGI app serving ``model`` under the name ``alias``."""
    from fastapi.middleware.cors import CORSMiddleware
    from llama_cpp.server.app import create_app
    from llama_cpp.server.settings import ModelSettings, ServerSettings

    app: Any = create_app(
        server_settings=ServerSettings(host="127.0.0.1", port=port),
        model_settings=[
            ModelSettings(model=model, model_alias=alias, n_ctx=n_ctx, n_threads=n_threads, verbose=False)
        ],
    )
    app.user_middleware = [m for m in app.user_middleware if m.cls is not CORSMiddleware]
    app.middleware_stack = None  # rebuilt from user_middleware on the first request
    return GuardedASGI(app, port)


def main(argv: list[str] | None = None) -> None:
    import uvicorn

    ap = argparse.ArgumentParser(prog="python -m molt_society.society.model_serve", description=__doc__)
    ap.add_argument("--model", required=True)
    ap.add_argument("--model_alias", required=True)
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--n_ctx", type=int, default=2048)
    ap.add_argument("--n_threads", type=int, default=1)
    args = ap.parse_args(argv)
    app = build_app(args.model, args.model_alias, args.port, args.n_ctx, args.n_threads)
    uvicorn.run(app, host="127.0.0.1", port=args.port, log_level="warning")


if __name__ == "__main__":
    main()
