"""The one way a process of the stack starts and stops: ``python -m molt_society.<role>``.

Every entry point (``agents``, ``streams``, ``sinks``, ``dashboard``) is an ``Entry`` and a body given to
``serve`` (a coroutine run until SIGTERM/SIGINT) or ``run_on_loop`` (a body that drives the event loop
itself: Faust's worker). Here, once for all of them:

1. the command line (``--society NAME --bootstrap HOST:PORT``, both defaulting to the settings), the
   settings from the environment, the name checked (exit 2 with the reason);
2. structured logging, ``SIGUSR1`` thread dumps (``runtime.stack_dump``), the garbage collector's tuning
   where the role asks for it, and ``<name>.starting`` once the imports are done (``bench.startup``);
3. the process's status file (``runtime.process_status``): written at start, ready when the body says so,
   a beat every 2 s from the event loop, removed at a clean stop;
4. uvloop, SIGTERM/SIGINT setting the body's stop event, ``SIGUSR2`` task dumps;
5. the exit code: 0 after a clean stop, 1 after a failure, logged once as ``<name>.failed`` with the error
   (the supervisor shows that line).
"""

from __future__ import annotations

import argparse
import asyncio
import signal
import sys
from collections.abc import Awaitable, Callable, Coroutine
from dataclasses import dataclass
from typing import Any

from molt_society.runtime import process_status
from molt_society.runtime.gc_tuning import tune_gc
from molt_society.runtime.logs import configure_logging, get_logger
from molt_society.runtime.settings import Settings, get_settings
from molt_society.runtime.stack_dump import enable_task_dumps, enable_thread_dumps
from molt_society.runtime.task_cancel import cancel_and_wait
from molt_society.schemas.society_name import BadSocietyName, check_society_name

USAGE_EXIT = 2


@dataclass(frozen=True)
class Entry:
    """What differs between the stack's processes."""

    role: str  # the module: python -m molt_society.<role>
    name: str  # the prefix of its log events (``sink`` for the sinks)
    description: str | None = None
    bootstrap_required: bool = True  # the dashboard runs without a broker (no lag panel)
    tune_gc: bool = False
    plain_errors: tuple[type[BaseException], ...] = ()  # logged as one line, without a traceback


class Started:
    """The parsed command line and the settings of a started process."""

    def __init__(self, entry: Entry, args: argparse.Namespace, settings: Settings) -> None:
        self.entry, self.settings = entry, settings
        self.society: str = args.society
        self.bootstrap: str | None = args.bootstrap
        self.log = get_logger(entry.role)

    def need_bootstrap(self) -> str:
        assert self.bootstrap is not None, "Entry.bootstrap_required makes argparse require it"
        return self.bootstrap


def start(entry: Entry, argv: list[str] | None) -> Started | int:
    """Steps 1 and 2 of the module docstring: the started process, or the exit code of a usage error."""
    settings = get_settings()
    parser = argparse.ArgumentParser(
        prog=f"python -m molt_society.{entry.role}", description=entry.description
    )
    parser.add_argument("--society", default=settings.society, help="society name (default: SOCIETY_SOCIETY)")
    parser.add_argument(
        "--bootstrap",
        default=settings.kafka_bootstrap,
        required=entry.bootstrap_required and settings.kafka_bootstrap is None,
        help="Kafka bootstrap servers HOST:PORT (default: KAFKA_BOOTSTRAP)",
    )
    args = parser.parse_args(argv)
    try:
        check_society_name(args.society)
    except BadSocietyName as exc:
        print(f"error: {exc}", file=sys.stderr)
        return USAGE_EXIT
    configure_logging(settings.log_level, settings.log_json)
    enable_thread_dumps()  # kill -USR1 <pid>: every thread's stack in the process's log
    if entry.tune_gc:
        tune_gc()
    started = Started(entry, args, settings)
    started.log.info(f"{entry.name}.starting", society=args.society)
    return started


def _failed(started: Started, exc: BaseException) -> int:
    event = f"{started.entry.name}.failed"
    if isinstance(exc, started.entry.plain_errors):
        started.log.error(event, error=str(exc))
    else:
        started.log.exception(event, error=repr(exc))
    return 1


def new_event_loop() -> asyncio.AbstractEventLoop:
    try:
        import uvloop
    except ImportError:  # pragma: no cover - uvloop is a dependency
        return asyncio.new_event_loop()
    return uvloop.new_event_loop()


def serve(
    entry: Entry, argv: list[str] | None, body: Callable[[Started, asyncio.Event], Awaitable[None]]
) -> int:
    """Run ``body(started, stop)`` until it returns (it should once ``stop`` is set: SIGTERM or SIGINT)."""
    started = start(entry, argv)
    if isinstance(started, int):
        return started
    status = process_status.begin(started.settings.state_dir / started.society, entry.role)

    async def main() -> None:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, stop.set)
        enable_task_dumps(loop)  # kill -USR2 <pid>: every asyncio task's stack in the log
        beat = asyncio.create_task(status.heartbeat(), name="process-status-beat")
        try:
            await body(started, stop)
        finally:
            await cancel_and_wait(beat)

    try:
        _run(main())
    except Exception as exc:
        return _failed(started, exc)
    finally:
        status.remove()
    return 0


def run_on_loop(
    entry: Entry, argv: list[str] | None, body: Callable[[Started, asyncio.AbstractEventLoop], int]
) -> int:
    """For a body that drives the loop itself (Faust's worker): the loop is made here, set as the
    thread's, and beats in the status file while the body runs it; ``body`` returns the exit code."""
    started = start(entry, argv)
    if isinstance(started, int):
        return started
    status = process_status.begin(started.settings.state_dir / started.society, entry.role)
    loop = new_event_loop()
    asyncio.set_event_loop(loop)
    loop.create_task(status.heartbeat(), name="process-status-beat")  # runs once the body runs the loop
    try:
        return body(started, loop)
    except SystemExit:
        raise
    except Exception as exc:
        return _failed(started, exc)
    finally:
        status.remove()


def _run(coro: Coroutine[Any, Any, None]) -> None:
    with asyncio.Runner(loop_factory=new_event_loop) as runner:
        runner.run(coro)
