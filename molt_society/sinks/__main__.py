"""``python -m molt_society.sinks --society NAME --bootstrap HOST:PORT``: run the ClickHouse sink until
SIGTERM/SIGINT.

Everything else (ClickHouse URL, batch size and age, HTTP port, state directory, logging) comes from
``runtime.settings.Settings`` (environment, ``SOCIETY_`` prefix). On a signal the sink flushes and commits
what it holds, removes its ``sink.json`` and exits 0.
"""

from __future__ import annotations

import argparse
import asyncio
import signal
import sys
from collections.abc import Coroutine
from typing import Any

from molt_society.runtime.gc_tuning import tune_gc
from molt_society.runtime.logs import configure_logging, get_logger
from molt_society.runtime.settings import Settings, get_settings
from molt_society.runtime.stack_dump import enable_task_dumps, enable_thread_dumps
from molt_society.sinks.consumer import ClickHouseSink


def _parse(argv: list[str] | None, settings: Settings) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m molt_society.sinks", description=__doc__.split("\n\n")[0] if __doc__ else None
    )
    parser.add_argument("--society", default=settings.society, help="society name (default: SOCIETY_SOCIETY)")
    parser.add_argument(
        "--bootstrap",
        default=settings.kafka_bootstrap,
        required=settings.kafka_bootstrap is None,
        help="Kafka bootstrap servers HOST:PORT (default: KAFKA_BOOTSTRAP)",
    )
    return parser.parse_args(argv)


async def _run(settings: Settings, bootstrap: str, society: str) -> None:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    enable_task_dumps(loop)  # kill -USR2 <pid>: every asyncio task's stack in the log
    await ClickHouseSink(settings, bootstrap, society).run(stop)


def _run_loop(coro: Coroutine[Any, Any, None]) -> None:
    try:
        import uvloop
    except ImportError:
        asyncio.run(coro)
        return
    with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
        runner.run(coro)


def main(argv: list[str] | None = None) -> int:
    """Run the sink; returns the process exit code (0 after a clean stop, 1 on a failure)."""
    settings = get_settings()
    args = _parse(argv, settings)
    configure_logging(settings.log_level, settings.log_json)
    enable_thread_dumps()  # kill -USR1 <pid>: every thread's stack in the sink's log
    tune_gc()
    log = get_logger("sinks")
    log.info("sink.settings", **{**settings.model_dump(mode="json"), "society": args.society})
    try:
        _run_loop(_run(settings, args.bootstrap, args.society))
    except Exception as exc:
        log.exception("sink.failed", error=repr(exc))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
