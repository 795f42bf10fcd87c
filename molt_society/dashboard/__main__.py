"""``python -m molt_society.dashboard --society NAME [--bootstrap HOST:PORT]``: serve the dashboard until
SIGTERM/SIGINT.

Host, port and refresh interval come from ``Settings`` (``SOCIETY_DASHBOARD_HOST``, ``_PORT``,
``_REFRESH_SECONDS``). Without a bootstrap address the health panel shows no consumer lag.
"""

from __future__ import annotations

import argparse
import asyncio
import signal
import sys

from molt_society.dashboard.server import serve
from molt_society.runtime.logs import configure_logging, get_logger
from molt_society.runtime.settings import Settings, get_settings
from molt_society.schemas.society_name import BadSocietyName, check_society_name


async def run(settings: Settings, society: str, bootstrap: str | None) -> None:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    await serve(settings, society, bootstrap, stop)


def main(argv: list[str] | None = None) -> int:
    settings = get_settings()
    parser = argparse.ArgumentParser(
        prog="python -m molt_society.dashboard", description="serve a society's dashboard"
    )
    parser.add_argument("--society", default=settings.society)
    parser.add_argument("--bootstrap", default=settings.kafka_bootstrap)
    args = parser.parse_args(argv)
    configure_logging(settings.log_level, settings.log_json)
    try:
        check_society_name(args.society)
    except BadSocietyName as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    try:
        asyncio.run(run(settings, args.society, args.bootstrap))
    except OSError as exc:
        get_logger("dashboard").error("dashboard.failed", error=str(exc))
        return 1
    except Exception as exc:  # logged as one line the stack's supervisor can show
        get_logger("dashboard").exception("dashboard.failed", error=repr(exc))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
