"""Stage 6 of ``bench.pipeline``: how long after a window ends its metrics are in ClickHouse, at 1,000
events/s with 1-s windows.

One producer (in the benchmark process) sends thread-shaped events whose event time is the wall clock at
sending, and a watermark to every partition every 100 ms; a poller asks the sink's ``/query`` every 50 ms
for each window's ``events_total`` row and when ClickHouse stored it (``min(_inserted_at)``).
"""

from __future__ import annotations

import asyncio
import contextlib
import subprocess
import time
from collections.abc import Awaitable, Callable, Iterator
from datetime import datetime
from typing import Any

import aiohttp
import orjson

from molt_society.bench.child_logs import parse_ts
from molt_society.bench.dataset import Dataset, copy_mask, iso_us, key_of, remapped
from molt_society.bench.harness import Harness
from molt_society.bench.pipeline_results import LatencyResult
from molt_society.bench.stats import percentile
from molt_society.runtime import kafka
from molt_society.runtime.record_auth import RecordKeys
from molt_society.schemas import control
from molt_society.schemas.topics import Role, topic_name

LATENCY_RATE = 1_000


def latency_events(ds: Dataset, society: str) -> Iterator[tuple[dict[str, Any], int]]:
    """Endless thread-shaped events (templates remapped per cycle) with their copy mask."""
    cycle = 0
    while True:
        mask = copy_mask(1_000_003 + cycle)
        for item in ds.steady:
            yield item.doc, mask
        cycle += 1


async def latency_run(
    bench: Harness,
    ds: Dataset | None,
    url: str,
    society: str,
    origin_us: int,
    seconds: float,
    on_progress: Callable[[float], None],
    res: LatencyResult,
    procs: list[subprocess.Popen[bytes]],
) -> None:
    """Produce ``LATENCY_RATE`` events/s with wall-clock event times and a mark every 100 ms; measure.
    ``on_progress`` is told the seconds of producing done."""
    topic = topic_name(society, Role.ACTIONS)
    producer = kafka.producer(bench.bootstrap, "actions", keys=RecordKeys(bench.state_dir))
    await producer.start()
    headers = kafka.WATERMARK_HEADERS
    source = latency_events(ds, society) if ds else iter(())
    last_sent: dict[int, float] = {}  # window start (us) -> wall time its last event was sent
    inserted: dict[int, float] = {}  # window start (us) -> min(_inserted_at) (epoch s)
    seen: dict[int, float] = {}  # window start (us) -> wall time the poll first saw it
    sql = (
        f"SELECT window_start, min(_inserted_at) FROM metrics WHERE society = '{society}' "
        "AND metric = 'events_total' GROUP BY window_start"
    )
    stop_polling = asyncio.Event()

    async def poll() -> None:
        async with aiohttp.ClientSession() as session:
            while not stop_polling.is_set():
                try:
                    async with session.post(f"{url}/query", json={"sql": sql}) as resp:
                        doc = await resp.json(loads=orjson.loads)
                    now = time.time()
                    for start, ins in doc.get("rows", []):
                        w = control.to_us(datetime.fromisoformat(start.replace("Z", "+00:00")))
                        if w not in seen:
                            seen[w] = now
                        inserted[w] = parse_ts(ins)
                except (aiohttp.ClientError, ValueError, KeyError):
                    pass
                await asyncio.sleep(0.05)

    mark_tick = 0

    async def send_marks(pending: list[Awaitable[Any]]) -> None:
        nonlocal mark_tick
        now_us = int(time.time() * 1_000_000)
        tick = (now_us - origin_us) // 1_000_000
        mark_tick = max(mark_tick, tick)
        name = control.REPLAY_PRODUCER  # a producer every society registers
        raw = control.dumps(control.watermark(name, [name], now_us, mark_tick, origin_us))
        for q in range(bench.partitions):
            pending.append(await producer.send(topic, raw, partition=q, headers=headers))

    poller = asyncio.create_task(poll())
    pending: list[Awaitable[Any]] = []
    sent = 0
    try:
        began = time.time()
        end = began + seconds
        next_mark = began
        while True:
            now = time.time()
            if now >= end:
                break
            due = int((now - began) * LATENCY_RATE)
            while sent < due:
                doc, mask = next(source)
                occurred_us = int(time.time() * 1_000_000)
                ev = remapped(doc, mask, iso_us(occurred_us), society)
                pending.append(await producer.send(topic, orjson.dumps(ev), key=key_of(ev)))
                last_sent[occurred_us - occurred_us % 1_000_000] = time.time()
                sent += 1
            if now >= next_mark:
                await send_marks(pending)
                next_mark += 0.1
            if len(pending) > 2_000:
                await asyncio.gather(*pending)
                pending = []
            on_progress(min(seconds, now - began))
            for p in procs:
                bench.children.check(p)
            await asyncio.sleep(0.002)
        res.produced = sent
        res.seconds = time.time() - began
        # The full windows: those that started after the first event and ended before the last one.
        full = [w for w in sorted(last_sent) if w >= began * 1e6 and w + 1_000_000 <= end * 1e6]
        deadline = time.time() + 30
        while time.time() < deadline and not all(w in inserted for w in full):
            if time.time() >= next_mark:
                await send_marks(pending)  # a producer keeps marking time while idle
                next_mark += 0.1
            await asyncio.sleep(0.02)
        await asyncio.gather(*pending)
    finally:
        stop_polling.set()
        with contextlib.suppress(Exception):
            await poller
        await producer.stop()
    lat = [inserted[w] - (w + 1_000_000) / 1e6 for w in full if w in inserted]
    vis = [seen[w] - (w + 1_000_000) / 1e6 for w in full if w in seen]
    vs_last = [inserted[w] - last_sent[w] for w in full if w in inserted]
    res.windows = len(lat)
    res.p50, res.p99, res.max = percentile(lat, 50), percentile(lat, 99), max(lat, default=None)
    res.seen_p50, res.seen_p99, res.seen_max = (
        percentile(vis, 50),
        percentile(vis, 99),
        max(vis, default=None),
    )
    res.vs_last_p50, res.vs_last_p99 = percentile(vs_last, 50), percentile(vs_last, 99)
    missing = len(full) - len(lat)
    if missing:
        res.error = f"{missing} of {len(full)} windows never reached ClickHouse within 30 s"
