"""``python -m molt_society.sinks --society NAME --bootstrap HOST:PORT``: run the ClickHouse sink until
SIGTERM/SIGINT.

Everything else (ClickHouse URL, batch size and age, HTTP port, state directory, logging) comes from
``runtime.settings.Settings`` (environment, ``SOCIETY_`` prefix). On a signal the sink flushes and commits
what it holds, removes its ``sink.json`` and exits 0; a failure is logged as ``sink.failed`` and exits 1.
Started and stopped by ``runtime.process_main``; ready (its status file) once its HTTP endpoint serves.
"""

from __future__ import annotations

import asyncio
import sys

from molt_society.runtime.process_main import Entry, Started, serve
from molt_society.sinks.consumer import ClickHouseSink

ENTRY = Entry(role="sinks", name="sink", description=(__doc__ or "").split("\n\n")[0], tune_gc=True)


async def _serve(started: Started, stop: asyncio.Event) -> None:
    settings = started.settings
    started.log.info("sink.settings", **{**settings.model_dump(mode="json"), "society": started.society})
    await ClickHouseSink(settings, started.need_bootstrap(), started.society).run(stop)


def main(argv: list[str] | None = None) -> int:
    """Run the sink; returns the process exit code (0 after a clean stop, 1 on a failure)."""
    return serve(ENTRY, argv, _serve)


if __name__ == "__main__":
    sys.exit(main())
