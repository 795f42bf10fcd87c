"""``society status``: throughput, lag from the high watermark, and dead letters of the running stack;
each of its processes with what its status file says (ready, last heartbeat).

Lag comes from ``runtime.lag``: measured against the high watermark a fetch returns, not ``end_offsets``
(which the local Tansu broker reports wrongly). A stack whose driver died is reported and cleared
(``society.stale_stack.clear_stale_stack``).
"""

from __future__ import annotations

import asyncio
import json
import time
import urllib.request
from typing import Any

from aiokafka import TopicPartition
from rich.console import Console
from rich.table import Table

from molt_society.runtime import lag
from molt_society.runtime.pids import pid_alive
from molt_society.runtime.process_status import read_status
from molt_society.runtime.settings import Settings
from molt_society.runtime.stack_state import read_state
from molt_society.schemas.topics import Role, topic_name
from molt_society.society.stale_stack import clear_stale_stack, driver_of


async def collect(bootstrap: str, society: str) -> dict[str, Any]:
    """Records per topic, rates over one second, group lags and dead letters of ``society``.

    High watermarks of partitions that did not answer within ``lag.LagReader``'s timeout are left out
    (the figures show what answered)."""
    reader = lag.LagReader(bootstrap, society)
    try:
        hw1 = await reader.highwaters(partial=True)
        t1 = time.monotonic()
        lags = await reader.group_lags(hw1)
        await asyncio.sleep(1.0)
        hw2 = await reader.highwaters(partial=True)
        dt = time.monotonic() - t1
    finally:
        await reader.close()

    def total(hw: dict[TopicPartition, int], role: Role) -> int:
        return sum(v for tp, v in hw.items() if tp.topic == topic_name(society, role))

    return {
        "society": society,
        "records": {r.value: total(hw2, r) for r in Role},
        "rate_per_s": {r.value: (total(hw2, r) - total(hw1, r)) / dt for r in (Role.ACTIONS, Role.EVENTS)},
        "lag": lags,
        "dead_letters": total(hw2, Role.DEADLETTER),
    }


def print_status(settings: Settings, console: Console) -> int:
    """Print the running stack's figures and processes; 1 when none runs (a dead driver's stack is cleared
    and said). A broker that does not answer within ``STATUS_TIMEOUT`` s is said, not waited for."""
    stale = clear_stale_stack(settings)
    if stale is not None:
        console.print(stale.describe(), highlight=False, markup=False)
        return 1
    state = read_state(settings)
    if not state:
        console.print(
            f"no running stack (no {settings.state_dir / 'stack.json'}); start one with `society run`"
        )
        return 1
    bootstrap, society = str(state["bootstrap"]), str(state["society"])
    try:
        info = asyncio.run(asyncio.wait_for(collect(bootstrap, society), STATUS_TIMEOUT))
    except Exception as exc:  # a silent or unreachable broker: the rest of the status still helps
        reason = "no answer" if isinstance(exc, TimeoutError) else repr(exc)
        console.print(
            f"the broker at {bootstrap} does not answer ({reason} within {STATUS_TIMEOUT:.0f} s): no figures",
            highlight=False,
            markup=False,
        )
    else:
        t = Table(title=f"society {info['society']} on {bootstrap}", header_style="bold")
        t.add_column("figure")
        t.add_column("value", justify="right")
        for role, n in info["records"].items():
            t.add_row(f"records in {role}", f"{n:,}")
        for role, r in info["rate_per_s"].items():
            t.add_row(f"{role}/s", f"{r:,.0f}")
        for group, lag in info["lag"].items():
            t.add_row(f"lag of {group} (records behind the high watermark)", f"{lag:,}")
        t.add_row("dead letters", f"{info['dead_letters']:,}")
        console.print(t)
    _print_sink(settings, society, console)
    driver = driver_of(state)
    if driver is not None:
        console.print(f"{'driver':8s} pid {driver[0]}  (society run)", highlight=False)
    broker = state.get("broker")
    if isinstance(broker, dict):
        console.print(f"{'broker':8s} pid {broker.get('pid')}  {bootstrap}", highlight=False)
    restarts = state.get("restarts") or {}
    for p in state["processes"]:
        alive = pid_alive(int(p["pid"]), p.get("start"))
        again = f"  restarted {restarts[p['role']]}x" if restarts.get(p["role"]) else ""
        how = _how(settings, society, str(p["role"]), int(p["pid"])) if alive else ""
        console.print(
            f"{p['role']:8s} pid {p['pid']}{'' if alive else ' (exited)'}{again}{how}  log {p['log']}",
            highlight=False,
        )
    return 0


def _how(settings: Settings, society: str, role: str, pid: int) -> str:
    """What the process's status file says (``runtime.process_status``): ready or not, its last beat."""
    status = read_status(settings.state_dir / society, role, pid)
    if status is None:
        return "  (no status file yet)"
    if status.ready is None:
        ready = "not ready yet"
    else:
        ready = f"ready {status.ready - status.started:.1f} s after start"
    return f"  {ready}, last beat {max(0.0, time.time() - status.beat):.0f} s ago"


STATUS_TIMEOUT = 15.0


def _print_sink(settings: Settings, society: str, console: Console) -> None:
    """Say when the sink is alive but not storing (its ``GET /health`` reports failing inserts)."""
    try:
        url = json.loads((settings.state_dir / society / "sink.json").read_text())["url"]
        with urllib.request.urlopen(f"{url}/health", timeout=5) as resp:
            health = json.loads(resp.read())
    except (OSError, ValueError, KeyError, TypeError):
        console.print("the sink does not answer (restarting, or stopped)", highlight=False, markup=False)
        return
    failing = health.get("failing") if isinstance(health, dict) else None
    if isinstance(failing, dict):
        console.print(
            f"the sink's inserts have failed for {float(failing.get('seconds') or 0):.0f} s "
            f"({failing.get('attempts')} attempts): {failing.get('error')}",
            style="bold red",
            highlight=False,
            markup=False,
        )
