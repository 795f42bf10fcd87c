"""Fork and resume: a new society whose history up to a time is an old one's, continued live by agents.

The history is the old society's events before the fork instant, read from ClickHouse and replayed into
the new society's topics; the stream workers rebuild threads, feeds and windows from it as they would
from any log (no snapshot that could drift from it). The fork instant is rounded up to a tick boundary
``T``; the replay ends with a handoff watermark at ``T`` that passes the partitions to the agent shards,
and the clock continues from the tick that starts at ``T``. Agents are rebuilt from the old society's
recorded configuration (seed, number of agents, shards, tick length), so with the same seed the fork
continues exactly as the old society did; with another seed (``--seed``) it diverges from ``T`` on.

Simulated time only: a real-time society has no ticks to resume at.
"""

from __future__ import annotations

import asyncio
import json
import math
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from molt_society.agents.worker import shard_producer
from molt_society.replay.export import iter_events
from molt_society.replay.publisher import publish
from molt_society.runtime.record_auth import RecordKeys
from molt_society.runtime.settings import Settings
from molt_society.schemas.control import from_us, to_us
from molt_society.society.drive import drive_clock, last_window_start, wait_drained
from molt_society.society.stack import LocalStack

CONFIG_FIELDS = (
    "seed",
    "agents",
    "shards",
    "partitions",
    "tick_seconds",
    "sim_start",
    "window_seconds",
    "mode",
    "feed_size",
    "top_k",
    "llm_agents",
    "llm_models",
    "behaviour_file",  # a fitted behaviour (society calibrate --fit): a fork's agents behave the same
    "arm_plan",  # an experiment arm's interventions (schemas.arm_plan): a fork of an arm keeps them
)


def config_path(settings: Settings, society: str) -> Path:
    return settings.state_dir / society / "society.json"


def save_config(settings: Settings, society: str, **extra: Any) -> None:
    """Record what a fork needs to rebuild the society's agents."""
    path = config_path(settings, society)
    path.parent.mkdir(parents=True, exist_ok=True)
    doc = {k: getattr(settings, k) for k in CONFIG_FIELDS}
    if path.exists():
        doc.update({k: v for k, v in json.loads(path.read_text()).items() if k not in doc})
    doc.update(extra)
    path.write_text(json.dumps(doc, indent=2, default=str))


def load_config(settings: Settings, society: str) -> dict[str, Any]:
    path = config_path(settings, society)
    if not path.exists():
        raise FileNotFoundError(
            f"no recorded configuration for society {society!r} ({path}); forks need the seed, agents, "
            "shards and tick length of the run, which `society run` records there"
        )
    doc: dict[str, Any] = json.loads(path.read_text())
    return doc


@dataclass(frozen=True)
class ForkPoint:
    tick: int  # the first tick the new society runs live
    at_us: int  # its start, the end of the copied history


class ForkError(ValueError):
    """A fork that cannot be made as asked (a usage error: the CLI says it in one line)."""


def fork_point(settings: Settings, at: datetime | int | None, end_us: int | None) -> ForkPoint:
    """The tick boundary at or after ``at`` (an event time, or a tick number: the start of that tick), or
    the old society's end when ``at`` is None. A point after the old society's recorded end is an error:
    the new society would start with ticks that never ran."""
    origin = datetime.fromisoformat(settings.sim_start)
    tick_us = int(settings.tick_seconds * 1_000_000)
    end_tick = None if end_us is None else max(1, math.ceil((end_us - to_us(origin)) / tick_us))
    if isinstance(at, int):
        tick = max(1, at)
    else:
        target = to_us(at) if at is not None else end_us
        if target is None:
            raise ForkError("the old society has no recorded end; give --at")
        tick = max(1, math.ceil((target - to_us(origin)) / tick_us))
    if end_tick is not None and tick > end_tick:
        asked = at if isinstance(at, int) else at.isoformat() if at else "its end"
        raise ForkError(
            f"--at {asked} is after the old society's "
            f"end (tick {end_tick:,}, {from_us(end_tick * tick_us + to_us(origin)).isoformat()}): fork at "
            "or before it"
        )
    return ForkPoint(tick, to_us(origin + timedelta(microseconds=tick * tick_us)))


async def copy_history(settings: Settings, bootstrap: str, source: str, target: str, point: ForkPoint) -> int:
    """Replay ``source``'s events before the fork point into ``target`` and hand over to the shards."""
    events = iter_events(settings, source, until=from_us(point.at_us))
    stats = await publish(
        events,
        bootstrap=bootstrap,
        society=target,
        partitions=settings.partitions,
        window_seconds=settings.window_seconds,
        origin_us=to_us(datetime.fromisoformat(settings.sim_start)),
        handoff=([shard_producer(s) for s in range(settings.shards)], point.at_us, point.tick - 1),
        keys=RecordKeys(settings.state_dir),
    )
    return stats.events


def fork_settings(settings: Settings, source: str, seed: int | None) -> tuple[Settings, dict[str, Any]]:
    """The new society's settings: the old one's configuration, optionally another seed."""
    cfg = load_config(settings, source)
    if cfg.get("mode", "sim") != "sim":
        raise ForkError(f"society {source!r} ran in real time; only simulated societies can be forked")
    update = {k: cfg[k] for k in CONFIG_FIELDS if k in cfg}
    if update.get("arm_plan") is not None:  # recorded as text; model_copy does not validate
        update["arm_plan"] = Path(update["arm_plan"])
    if seed is not None:
        update["seed"] = seed
    return settings.model_copy(update=update), cfg


def run_fork(
    settings: Settings,
    *,
    source: str,
    target: str,
    at: datetime | int | None,
    seed: int | None,
    ticks: int | None,
    duration: float | None,
) -> tuple[ForkPoint, int]:
    """Used by tests and scripts without the live display; ``society run --from`` shows progress."""
    s, cfg = fork_settings(settings, source, seed)
    point = fork_point(s, at, cfg.get("end_us"))
    stack = LocalStack(s, target)
    try:
        stack.start()
        stack.sink_url()
        copied = asyncio.run(copy_history(s, stack.bootstrap, source, target, point))

        async def go() -> None:
            _, end_us = await drive_clock(
                s,
                stack.bootstrap,
                target,
                ticks=None if ticks is None else point.tick + ticks,
                duration=duration,
                start_tick=point.tick,
            )
            save_config(s, target, end_us=end_us, forked_from=source, fork_at_us=point.at_us)
            await wait_drained(target, last_window_start(s, end_us), stack)

        asyncio.run(go())
        return point, copied
    finally:
        stack.stop()
