"""``society status``: throughput, lag from the high watermark, and dead letters of the running stack.

Lag is measured against the high watermark a fetch returns, not ``end_offsets`` (which the local Tansu
broker reports wrongly).
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

from aiokafka import AIOKafkaConsumer, TopicPartition
from rich.console import Console
from rich.table import Table

from schemas.topics import Role, topic_name
from society.settings import Settings
from society.stack import read_state

GROUPS = {"streams": Role.ACTIONS, "sink": Role.EVENTS, "agents": Role.TICKS}


async def highwaters(bootstrap: str, topics: list[str]) -> dict[TopicPartition, int]:
    """High watermark of every partition of ``topics``, read with a real fetch."""
    c = AIOKafkaConsumer(
        bootstrap_servers=bootstrap, group_id=None, enable_auto_commit=False, fetch_max_wait_ms=50
    )
    await c.start()
    try:
        tps = [TopicPartition(t, p) for t in topics for p in sorted(c.partitions_for_topic(t) or ())]
        if not tps:
            await c.topics()  # loads metadata of every topic
            tps = [TopicPartition(t, p) for t in topics for p in sorted(c.partitions_for_topic(t) or ())]
        c.assign(tps)
        for tp in tps:
            c.seek(tp, 0)
        out: dict[TopicPartition, int] = {}
        deadline = time.monotonic() + 5
        while len(out) < len(tps) and time.monotonic() < deadline:
            await c.getmany(timeout_ms=100, max_records=1)
            for tp in tps:
                hw = c.highwater(tp)
                if hw is not None:
                    out[tp] = hw
                    c.pause(tp)
        return out
    finally:
        await c.stop()


async def group_lag(bootstrap: str, group: str, hws: dict[TopicPartition, int], topic: str) -> int:
    """Records of ``topic`` the group has not committed yet (high watermark - committed offset)."""
    # OffsetFetch for explicit partitions through a consumer that never joins the group: the admin
    # client's list_consumer_group_offsets is not answered by the local Tansu broker.
    c = AIOKafkaConsumer(bootstrap_servers=bootstrap, group_id=group, enable_auto_commit=False)
    await c.start()
    try:
        lag = 0
        for tp, hw in hws.items():
            if tp.topic == topic:
                committed = await c.committed(tp)
                lag += hw - (committed or 0)
        return lag
    finally:
        await c.stop()


async def collect(bootstrap: str, society: str) -> dict[str, Any]:
    topics = [topic_name(society, r) for r in Role]
    hw1 = await highwaters(bootstrap, topics)
    t1 = time.monotonic()
    lags: dict[str, int] = {}
    for group, role in GROUPS.items():
        lags[group] = await group_lag(bootstrap, f"society.{society}.{group}", hw1, topic_name(society, role))
    await asyncio.sleep(1.0)
    hw2 = await highwaters(bootstrap, topics)
    dt = time.monotonic() - t1

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
    state = read_state(settings)
    if not state:
        console.print(
            f"no running stack (no {settings.state_dir / 'stack.json'}); start one with `society run`"
        )
        return 1
    info = asyncio.run(collect(state["bootstrap"], state["society"]))
    t = Table(title=f"society {info['society']} on {state['bootstrap']}", header_style="bold")
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
    for p in state["processes"]:
        console.print(f"{p['role']:8s} pid {p['pid']}  log {p['log']}", highlight=False)
    return 0
