"""The aggregate agent computes every window, in order, even when Faust never hands it some partials.

Faust clears its stream buffer in a rebalance and its fetcher does not always go back for what it cleared
(CI, stop 43: window 00:10 of a run with two stream workers was never computed, its later window was).
Here the real agent (``streams.app.create_app``: its Faust app, tables, topics, a real broker) takes the
partials of three windows from the partials topic, and the drop is made where Faust makes it: the agent's
``take`` never sees the dropped partials, which are on the topic. Every window's metrics must reach the
metrics topic once, equal to ``window_metrics`` of that window's partials computed here in order.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import orjson
import pytest
from stack_helpers import create_topic, make_settings

from molt_society.runtime import kafka
from molt_society.runtime.broker import read_topic
from molt_society.runtime.record_auth import RecordKeys
from molt_society.schemas import control
from molt_society.schemas.topics import Role, topic_name
from molt_society.streams import app as stream_app
from molt_society.streams.aggregate import InfluenceMemory, window_metrics

pytestmark = pytest.mark.integration

WINDOW_US = 600_000_000
ORIGIN_US = 1_769_558_400_000_000
PARTITIONS = 2


def _partial(window: int, partition: int) -> control.WindowPartial:
    """A partial of window ``window`` (0, 1, 2) from ``partition``, with activity that differs per window."""
    start = ORIGIN_US + window * WINDOW_US
    a, b = f"agent-{window}{partition}", f"agent-{partition}{window + 1}"
    return {
        "window_start_us": start,
        "window_end_us": start + WINDOW_US,
        "partition": partition,
        "partitions": PARTITIONS,
        "counts": {"comment_created": 3 + window, "post_created": 1 + partition},
        "active_agents": sorted({a, b}),
        "joined_agents": 0,
        "removed": {},
        "banned": 0,
        "edges": [[a, b, 1 + window], [b, a, 1]],
        "size_hist": {"0": 4 - window, str(1 + window): 1 + partition},
        "participants_hist": {"0": 4 - window, "2": 1 + window},
        "depth_hist": {"0": 4 - window, "1": 1 + window},
        "threads_touched": [[f"post-{window}-{partition}", 1 + window, 2, 1]],
    }


def _run(bootstrap: str, tmp: Path, dropped: set[tuple[int, int]], monkeypatch: Any) -> list[Any]:
    society = f"order{abs(hash((tmp, tuple(sorted(dropped))))) % 10**8}"
    settings = make_settings(bootstrap, tmp, partitions=PARTITIONS)
    taken: list[tuple[int, int]] = []
    real_take = stream_app.Aggregator.take

    async def take(self: stream_app.Aggregator, raw: bytes) -> None:
        p = control.loads(raw)
        at = ((p["window_start_us"] - ORIGIN_US) // WINDOW_US, p["partition"])
        if at in dropped:
            return  # as if Faust had cleared it from its buffer: on the topic, never taken
        taken.append(at)
        await real_take(self, raw)

    monkeypatch.setattr(stream_app.Aggregator, "take", take)

    async def go() -> list[Any]:
        partials_topic = topic_name(society, Role.PARTIALS)
        metrics_topic = topic_name(society, Role.METRICS)
        await create_topic(bootstrap, partials_topic)
        await create_topic(bootstrap, metrics_topic)
        app = stream_app.create_app(settings, bootstrap, society, data_dir=str(tmp / "faust"))
        keys = RecordKeys(settings.state_dir)
        producer = kafka.producer(bootstrap, "bulk", keys=keys)
        await producer.start()
        await app.start()
        try:
            for w in range(3):
                for q in range(PARTITIONS):
                    raw = control.dumps(_partial(w, q))
                    key = str(ORIGIN_US + w * WINDOW_US).encode()
                    await producer.send_and_wait(
                        partials_topic, raw, key=key, headers=keys.headers(partials_topic, key, raw)
                    )
            deadline = asyncio.get_running_loop().time() + 90
            while asyncio.get_running_loop().time() < deadline:
                records = await read_topic(bootstrap, metrics_topic)
                windows = {m["window_start_us"] for r in records for m in orjson.loads(r.value)}
                if len(windows) == 3:
                    break
                await asyncio.sleep(0.5)
            return [m for r in await read_topic(bootstrap, metrics_topic) for m in orjson.loads(r.value)]
        finally:
            await app.stop()
            await producer.stop()

    metrics = asyncio.run(go())
    assert not dropped & set(taken)
    return metrics


def _expected() -> dict[tuple[int, str, str], float]:
    """Every window's metrics from its partials, computed here in order (the influence memory carried)."""
    memory = InfluenceMemory()
    out: dict[tuple[int, str, str], float] = {}
    for w in range(3):
        partials = [_partial(w, q) for q in range(PARTITIONS)]
        for m in window_metrics("x", partials, memory, top_k=10):
            out[(m["window_start_us"], m["metric"], m["dim"])] = m["value"]
    return out


@pytest.mark.parametrize(
    "dropped",
    [set(), {(1, 1)}, {(1, 0), (1, 1)}, {(0, 0), (0, 1)}],
    ids=["none-dropped", "one-of-the-middle-window", "all-of-the-middle-window", "all-of-the-first-window"],
)
def test_every_window_is_computed_in_order_once(
    broker: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, dropped: set[tuple[int, int]]
) -> None:
    metrics = _run(broker, tmp_path, dropped, monkeypatch)
    got = {(m["window_start_us"], m["metric"], m["dim"]): m["value"] for m in metrics}
    ids = [m["metric_id"] for m in metrics]
    assert len(ids) == len(set(ids))  # each window once
    assert got == pytest.approx(_expected())
