"""``society`` as a user runs it, from a benchmark: the command, its arguments, a fresh environment.

The benchmarks that measure a whole run (``bench.scale``, ``bench.startup``, ``bench.broker_memory``,
``bench.crawl_report``) start the console script in a subprocess on a fresh ClickHouse and state directory
under their work directory, and read what it left there.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path


def society_command(script: bool = True) -> list[str]:
    """The ``society`` console script beside this Python (``script``, if installed), else
    ``python -m molt_society.society.cli``."""
    path = Path(sys.executable).with_name("society")
    if script and path.exists():
        return [str(path)]
    return [sys.executable, "-m", "molt_society.society.cli"]


def society_env(work: Path, drop: tuple[str, ...] = ()) -> dict[str, str]:
    """This process's environment without the variables starting with one of ``drop`` (``KAFKA_BOOTSTRAP``:
    the local broker), on chDB in ``work/clickhouse`` and the state directory ``work/state``."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(drop)}
    env.update(CLICKHOUSE_URL=f"chdb://{work / 'clickhouse'}", SOCIETY_STATE_DIR=str(work / "state"))
    return env


def run_args(society: str, agents: int, ticks: int, tick_seconds: float | str, *extra: str) -> list[str]:
    """``run --society S --agents N --ticks T --tick-seconds X`` and ``extra``."""
    return [
        "run", "--society", society, "--agents", str(agents), "--ticks", str(ticks),
        "--tick-seconds", str(tick_seconds), *extra,
    ]  # fmt: skip
