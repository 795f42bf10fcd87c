"""The command line of a society worker process (``python -m molt_society.agents|streams``).

Both take ``--society NAME --bootstrap HOST:PORT``, read the settings from the environment, configure
logging (and ``SIGUSR1`` stack dumps, ``runtime.stack_dump``) and say ``<role>.starting`` once
their imports are done (``bench.startup`` measures start-up to that line).
"""

from __future__ import annotations

import argparse

from molt_society.runtime.logs import configure_logging, get_logger
from molt_society.runtime.settings import Settings, get_settings
from molt_society.runtime.stack_dump import enable_thread_dumps


def worker_args(
    role: str, description: str | None, argv: list[str] | None
) -> tuple[argparse.Namespace, Settings]:
    """Parse ``argv`` of ``python -m molt_society.<role>``, configure logging, log ``<role>.starting``;
    the arguments (``society``, ``bootstrap``) and the settings."""
    parser = argparse.ArgumentParser(prog=f"python -m molt_society.{role}", description=description)
    parser.add_argument("--society", required=True)
    parser.add_argument("--bootstrap", required=True)
    args = parser.parse_args(argv)
    settings = get_settings()
    configure_logging(settings.log_level, settings.log_json)
    enable_thread_dumps()  # kill -USR1 <pid>: every thread's stack in the worker's log
    get_logger(role).info(f"{role}.starting", society=args.society)
    return args, settings
