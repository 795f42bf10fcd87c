"""``society`` as a user runs it, from a benchmark: the command, its arguments, a fresh environment.

The benchmarks that measure a whole run (``bench.scale``, ``bench.startup``, ``bench.broker_memory``,
``bench.crawl_report``, ``bench.brokers``) start the console script in a subprocess on a fresh ClickHouse
and state directory under their work directory, and read what it left there.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any


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


def stack_processes(stack_json: Path) -> dict[str, int]:
    """The pid of every process of a running stack, by role (``driver``, ``broker``, ``sinks-0``, ...),
    from its ``stack.json``; empty while it is not there (yet, or any more)."""
    try:
        state = json.loads(stack_json.read_text())
    except (OSError, ValueError):
        return {}
    out = {"driver": int(state["driver"]["pid"])}
    if "broker" in state:
        out["broker"] = int(state["broker"]["pid"])
    for p in state.get("processes", []):
        out[f"{p['role']}-{p.get('index', 0)}"] = int(p["pid"])
    return out


def society_sql(env: dict[str, str], query: str, *, check: bool = True) -> list[list[Any]]:
    """The rows of ``society sql --format json QUERY`` run with ``env``; a failed command raises
    (``check``) or gives no rows."""
    out = subprocess.run(
        [*society_command(), "sql", "--format", "json", query],
        env=env,
        capture_output=True,
        text=True,
        check=check,
    )
    if out.returncode != 0:
        return []
    doc = json.loads(out.stdout)
    rows = doc["rows"] if isinstance(doc, dict) else doc
    return [list(r.values()) if isinstance(r, dict) else list(r) for r in rows]
