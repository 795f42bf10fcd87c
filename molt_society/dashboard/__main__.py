"""``python -m molt_society.dashboard --society NAME [--bootstrap HOST:PORT]``: serve the dashboard until
SIGTERM/SIGINT.

Host, port and refresh interval come from ``Settings`` (``SOCIETY_DASHBOARD_HOST``, ``_PORT``,
``_REFRESH_SECONDS``). Without a bootstrap address the health panel shows no consumer lag. Started and
stopped by ``runtime.process_main``; ready (its status file) once it serves.
"""

from __future__ import annotations

import asyncio
import signal
import sys

from molt_society.dashboard.server import serve as serve_dashboard
from molt_society.runtime.process_main import Entry, Started, serve
from molt_society.runtime.settings import Settings

ENTRY = Entry(
    role="dashboard",
    name="dashboard",
    description="serve a society's dashboard",
    bootstrap_required=False,
    plain_errors=(OSError,),  # a port in use: one line
)


async def _serve(started: Started, stop: asyncio.Event) -> None:
    await serve_dashboard(started.settings, started.society, started.bootstrap, stop)


async def run(settings: Settings, society: str, bootstrap: str | None) -> None:
    """Serve in this process until SIGTERM/SIGINT (``society dashboard``, which is no stack process)."""
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    await serve_dashboard(settings, society, bootstrap, stop)


def main(argv: list[str] | None = None) -> int:
    return serve(ENTRY, argv, _serve)


if __name__ == "__main__":
    sys.exit(main())
