"""``python -m molt_society.streams --society NAME --bootstrap HOST:PORT``: run one stream worker until
stopped.

Exits 0 after SIGTERM/SIGINT (Faust's worker handles them; the kernel sends SIGTERM when the driver dies),
1 if that stop has not finished within ``STOP_EXIT_S`` (``streams.stop_abandoned``);
``STALL_EXIT`` (75) when its aggregate watch stopped it as stalled (``aggregate.stalled`` says why); a
crash of the worker is logged as ``streams.failed`` with the error (the supervisor shows that line) and
exits non-zero. Started by ``runtime.process_main`` (Faust's worker drives the loop it makes); ready (its
status file) once its first partition is rebuilt.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import sys
import tempfile
import threading

import faust

from molt_society.runtime.logs import get_logger
from molt_society.runtime.process_main import Entry, Started, run_on_loop
from molt_society.runtime.stack_dump import task_stacks
from molt_society.streams.app import STALL_EXIT, STALL_STOP, ProcessorService, create_app

STOP_EXIT_S = 30.0  # after SIGTERM/SIGINT the process exits within this, its orderly stop done or not
STOP_ABANDONED_EXIT = 1
ENTRY = Entry(role="streams", name="streams", description=__doc__, tune_gc=True)


def _exit_after(seconds: float) -> None:
    """Exit the process ``seconds`` from now if it is still alive (said first): Faust's stop waits on a
    broker that is gone (seen: a worker SIGTERMed when its driver was SIGKILLed, its broker gone too, kept
    rebuilding for 2 minutes, test_faults). Nothing committed is lost; what is not is processed again."""

    def fire() -> None:
        get_logger("streams").warning("streams.stop_abandoned", seconds=seconds)
        sys.stderr.flush()
        os._exit(STOP_ABANDONED_EXIT)

    timer = threading.Timer(seconds, fire)
    timer.daemon = True
    timer.start()


class StreamWorker(faust.Worker):
    """Faust's worker, with ``SIGUSR2`` writing every asyncio task's stack to the log as the other
    processes do (``runtime.stack_dump``): mode's own handler starts pdb, which in a worker without a
    terminal stops it. ``SIGUSR1`` stays mode's task dump. SIGTERM and SIGINT start the orderly stop and
    bound it (``STOP_EXIT_S``)."""

    def _on_sigusr2(self) -> None:
        self.stderr.write(task_stacks(self.loop))
        self.stderr.flush()

    def _on_sigterm(self) -> None:
        _exit_after(STOP_EXIT_S)
        super()._on_sigterm()

    def _on_sigint(self) -> None:
        _exit_after(STOP_EXIT_S)
        super()._on_sigint()


def _work(started: Started, loop: asyncio.AbstractEventLoop) -> int:
    settings, society = started.settings, started.society
    data_dir = tempfile.mkdtemp(prefix=f"faust-{society}-")
    app = create_app(settings, started.need_bootstrap(), society, data_dir=data_dir)
    # A worker killed without leaving its consumer group holds it until its session times out, and a
    # restarted worker's join waits for that: Faust's default (60 s, then a 60 s rebalance) kept a restart
    # from working for about two minutes. The action processor's own consumer uses aiokafka's 10 s.
    app.conf.broker_session_timeout = settings.stream_session_timeout_seconds
    app.conf.broker_rebalance_timeout = settings.stream_session_timeout_seconds
    # The action processor first: the worker starts its services before the app (see ProcessorService).
    processor = ProcessorService(settings, started.need_bootstrap(), society, loop=loop)
    worker = StreamWorker(
        app, processor, loglevel=settings.log_level, loop=loop, redirect_stdouts=False, quiet=True
    )
    try:
        worker.execute_from_commandline()
    except SystemExit as exc:
        if STALL_STOP.is_set():  # stopped itself as stalled (aggregate.stalled logged): not a clean stop
            return STALL_EXIT
        if exc.code not in (None, 0):
            get_logger("streams").error("streams.failed", error=f"the Faust worker exited with {exc.code!r}")
        raise
    finally:
        shutil.rmtree(data_dir, ignore_errors=True)
    return 0


def main(argv: list[str] | None = None) -> int:
    return run_on_loop(ENTRY, argv, _work)


if __name__ == "__main__":
    raise SystemExit(main())
