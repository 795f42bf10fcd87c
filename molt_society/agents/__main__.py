"""``python -m molt_society.agents --society NAME --bootstrap HOST:PORT``: run one agent worker until stopped.

Exits 0 after SIGTERM/SIGINT (the stack's way to stop it, also sent by the kernel when the driver dies);
on a failure it logs ``agents.failed`` with the error (the supervisor shows that line) and exits 1. Started
and stopped by ``runtime.process_main``; ready (its status file) once its consumer group is joined.
"""

from __future__ import annotations

import asyncio

from molt_society.agents.worker import AgentWorker
from molt_society.runtime.process_main import Entry, Started, serve

ENTRY = Entry(role="agents", name="agents", description=__doc__)


async def _serve(started: Started, stop: asyncio.Event) -> None:
    await AgentWorker(started.settings, started.need_bootstrap(), started.society).run(stop)


def main(argv: list[str] | None = None) -> int:
    return serve(ENTRY, argv, _serve)


if __name__ == "__main__":
    raise SystemExit(main())
