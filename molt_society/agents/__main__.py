"""``python -m molt_society.agents --society NAME --bootstrap HOST:PORT``: run one agent worker until stopped.

Exits 0 after SIGTERM/SIGINT (the stack's way to stop it, also sent by the kernel when the driver dies);
on a failure it logs ``agents.failed`` with the error (the supervisor shows that line) and exits 1.
"""

from __future__ import annotations

import asyncio
import signal

from molt_society.agents.worker import AgentWorker
from molt_society.runtime.logs import get_logger
from molt_society.runtime.settings import get_settings
from molt_society.runtime.stack_dump import enable_task_dumps
from molt_society.runtime.worker_args import worker_args


async def _serve(society: str, bootstrap: str) -> None:
    settings = get_settings()
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    enable_task_dumps(loop)  # kill -USR2 <pid>: every asyncio task's stack in the log
    await AgentWorker(settings, bootstrap, society).run(stop)


def main(argv: list[str] | None = None) -> int:
    args, _ = worker_args("agents", __doc__, argv)  # logs agents.starting: imports done (bench.startup)
    try:
        try:
            import uvloop
        except ImportError:  # pragma: no cover
            asyncio.run(_serve(args.society, args.bootstrap))
        else:
            uvloop.run(_serve(args.society, args.bootstrap))
    except Exception as exc:
        get_logger("agents").exception("agents.failed", error=repr(exc))
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
