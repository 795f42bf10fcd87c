"""Rebuild a simulated society after its broker was lost (Tansu keeps topics in memory only).

ClickHouse holds what the sink stored; the topics, the stream workers' state and the agents' feeds are
gone. The society goes on from the first tick that may be incomplete:

1. The sink stores each events partition in offset order, and in simulated time a partition carries tick
   ``t + 1`` only after all of tick ``t`` (the clock's barrier). So on a partition whose newest stored
   event is in tick ``n``, every event of the ticks before ``n`` is stored; the resume tick is the
   smallest such ``n`` over the partitions (events of the current generation's topics only).
2. A new broker and topics (generation ``g + 1``), a sink told what is already stored (events before the
   resume instant and the ids stored after it are not stored again; ``sinks.resume``), stream and
   agent workers.
3. The stored history before the resume instant is replayed into the new topics with a handoff to the
   agent shards (the fork machinery, ``society.fork.copy_history``): threads, feeds and windows are
   rebuilt from the log, and the clock continues at the resume tick. With the same seed the agents
   regenerate the same events; those already stored are dropped by the sink.
"""

from __future__ import annotations

import asyncio
import math
import time
from dataclasses import dataclass
from datetime import datetime

from molt_society.runtime.broker import ensure_topics
from molt_society.runtime.brokers import start_broker
from molt_society.runtime.logs import get_logger
from molt_society.runtime.settings import Settings
from molt_society.schemas.control import to_us
from molt_society.schemas.topics import Role, topic_name
from molt_society.society.fork import ForkPoint, copy_history, save_config
from molt_society.society.stack import LocalStack
from molt_society.warehouse import SessionReader

log = get_logger(__name__)


@dataclass(frozen=True)
class Recovery:
    point: ForkPoint
    generation: int
    copied: int


def resume_point(settings: Settings, society: str) -> ForkPoint:
    """The first tick that may be missing events in ClickHouse (see module docstring), with its start."""
    origin_us = to_us(datetime.fromisoformat(settings.sim_start))
    tick_us = int(settings.tick_seconds * 1_000_000)
    topic = topic_name(society, Role.EVENTS)
    stored_topic = topic if settings.generation == 0 else f"{topic}@g{settings.generation}"
    reader = SessionReader(settings.clickhouse_url, settings.clickhouse_reader_url)
    try:
        rows = reader.query(
            "SELECT _partition, toUnixTimestamp64Micro(max(occurred_at)) FROM events "
            f"WHERE society = '{_checked(society)}' AND _topic = '{_checked(stored_topic)}' "
            "GROUP BY _partition"
        ).rows
    finally:
        reader.close()
    newest = {int(p): int(us) for p, us in rows}
    floor_tick = 0
    if settings.resume_us is not None:  # a partition with nothing stored since the last rebuild
        floor_tick = max(0, math.floor((settings.resume_us - origin_us) / tick_us))
    ticks = [
        max(floor_tick, (newest[q] - origin_us) // tick_us) if q in newest else floor_tick
        for q in range(settings.partitions)
    ]
    tick = min(ticks) if ticks else 0
    return ForkPoint(tick, origin_us + tick * tick_us)


def _checked(name: str) -> str:
    """Society and topic names are ids (letters, digits, ``_.:@-``); never put anything else in SQL."""
    if not name or any(not (c.isalnum() or c in "_.:@-") for c in name):
        raise ValueError(f"not a society or topic name: {name!r}")
    return name


def new_generation(settings: Settings, point: ForkPoint) -> Settings:
    """The settings of the rebuilt society: the next generation of topics, and where it resumes."""
    return settings.model_copy(update={"generation": settings.generation + 1, "resume_us": point.at_us})


async def replay_history(settings: Settings, bootstrap: str, society: str, point: ForkPoint) -> int:
    """Replay the stored history before ``point`` into the new topics, handing over to the shards."""
    if point.tick <= 0:
        return 0
    copied = await copy_history(settings, bootstrap, society, society, point)
    log.info("recover.history_replayed", society=society, events=copied, resume_tick=point.tick)
    return copied


def rebuild(stack: LocalStack) -> Recovery:
    """Rebuild ``stack``'s society on a new local broker after the old one was lost (module docstring).

    Call it from the main thread, with no supervisor running: it stops every child, finds the resume
    point in ClickHouse, starts a broker and the children of the next generation, and replays the stored
    history before the resume point. The clock then continues at ``Recovery.point.tick``."""
    began = time.monotonic()
    stack.journal("recover.started", generation=stack.settings.generation)
    roles = [c.role for c in stack.children]
    stack.stop_children(timeout=10.0)  # the sink stores what it still holds; the rest cannot reach a broker
    if stack.broker is not None:
        stack.broker.stop()
    point = resume_point(stack.settings, stack.society)
    stack.settings = new_generation(stack.settings, point)
    stack.broker = start_broker(stack.settings, stack.run_dir, nice=stack.nice)
    stack.bootstrap = stack.broker.bootstrap
    s = stack.settings
    asyncio.run(ensure_topics(stack.bootstrap, stack.society, s.partitions, s.shards, s.replication))
    stack.children.clear()
    for role in roles:
        stack.spawn(role)
    stack.write_state()
    if "sinks" in roles:
        stack.sink_url()
    copied = asyncio.run(replay_history(s, stack.bootstrap, stack.society, point))
    save_config(s, stack.society, generation=s.generation, resume_us=point.at_us)
    stack.journal(
        "recover.done",
        generation=s.generation,
        resume_tick=point.tick,
        history_events=copied,
        seconds=round(time.monotonic() - began, 2),
        bootstrap=stack.bootstrap,
    )
    return Recovery(point, s.generation, copied)


def rebuild_hook(stack: LocalStack, lost: BaseException) -> int:
    """``society.stack.BrokerLostHook``: rebuild, and continue from the resume tick."""
    return rebuild(stack).point.tick
