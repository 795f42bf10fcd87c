"""The Faust application of a stream worker.

One Faust worker process hosts, for one society:

- the ``ActionProcessor`` service (validation, events, dead letters, feeds, window partials; see
  ``streams.processor`` for why it is a batch loop and not a per-event agent), ``ProcessorService``: the
  worker starts it before the app, so that it does not wait for the app's group and tables;
- the ``aggregate`` agent: a Faust agent over the partials topic that waits until every partition has
  closed a window, computes the window's metrics (``streams.aggregate``) and publishes them on the metrics
  topic. Its state lives in Faust tables (changelog-backed), so a restarted or rebalanced worker resumes
  where the last one stopped. Updates are idempotent: a partial for a window already computed is ignored,
  and a repeated partial replaces an identical one.

Run several workers for the same society and they share the partitions through their consumer groups.
"""

from __future__ import annotations

import asyncio
import functools
from typing import Any

import faust
import mode

from molt_society.runtime import kafka
from molt_society.runtime.logs import get_logger
from molt_society.runtime.settings import Settings
from molt_society.schemas import control
from molt_society.schemas.topics import Role, topic_name
from molt_society.streams.aggregate import InfluenceMemory, window_metrics
from molt_society.streams.processor import ActionProcessor

log = get_logger(__name__)


def create_app(settings: Settings, bootstrap: str, society: str, *, data_dir: str) -> faust.App:
    """The Faust app of one society's stream worker."""
    app = faust.App(
        kafka.group_id(society, "aggregate"),  # the app id: also its consumer group
        broker=f"kafka://{bootstrap}",
        value_serializer="raw",
        key_serializer="raw",
        processing_guarantee="at_least_once",
        web_enabled=False,
        topic_partitions=1,
        topic_replication_factor=settings.replication,
        consumer_auto_offset_reset="earliest",
        store="memory://",
        datadir=data_dir,
        producer_max_request_size=16 << 20,
        broker_commit_every=100,
        broker_commit_interval=0.5,
        stream_wait_empty=False,
        consumer_metadata_max_age_ms=kafka.METADATA_MAX_AGE_MS,
        producer_metadata_max_age_ms=kafka.METADATA_MAX_AGE_MS,
    )
    partials_topic = app.topic(
        topic_name(society, Role.PARTIALS), value_serializer="raw", key_serializer="raw"
    )
    metrics_topic = app.topic(topic_name(society, Role.METRICS), value_serializer="raw", key_serializer="raw")
    # key "<window_start_us>:<partition>" -> partial JSON; deleted once the window is computed
    pending = app.Table("pending", default=None, partitions=1, value_type=bytes, key_type=str)
    # key "memory" -> {"top_k": [...], "supers": [...], "last_window_us": int}
    influence = app.Table("influence", default=None, partitions=1, value_type=bytes, key_type=str)

    def load_memory() -> InfluenceMemory:
        raw = influence.get("memory")
        if raw is None:
            return InfluenceMemory()
        d: dict[str, Any] = control.loads(raw)
        return InfluenceMemory(
            top_k=frozenset(d["top_k"]) if d["top_k"] is not None else None,
            supers=frozenset(d["supers"]) if d["supers"] is not None else None,
            last_window_us=d["last_window_us"],
        )

    def save_memory(m: InfluenceMemory) -> None:
        influence["memory"] = control.dumps(
            {
                "top_k": sorted(m.top_k) if m.top_k is not None else None,
                "supers": sorted(m.supers) if m.supers is not None else None,
                "last_window_us": m.last_window_us,
            }
        )

    @app.agent(partials_topic, concurrency=1)
    async def aggregate(stream: faust.StreamT[bytes]) -> None:
        async for raw in stream:
            partial: control.WindowPartial = control.loads(raw)
            start = partial["window_start_us"]
            memory = load_memory()
            if memory.last_window_us is not None and start <= memory.last_window_us:
                continue  # already computed (a partition re-emitted it after a rebuild)
            pending[f"{start}:{partial['partition']}"] = raw
            n = partial["partitions"]
            keys = [f"{start}:{q}" for q in range(n)]
            if any(pending.get(k) is None for k in keys):
                continue
            partials = [control.loads(pending[k]) for k in keys]
            loop = asyncio.get_running_loop()
            metrics = await loop.run_in_executor(
                None, functools.partial(window_metrics, society, partials, memory, top_k=settings.top_k)
            )
            by_name: dict[str, list[control.MetricEvent]] = {}
            for m in metrics:
                by_name.setdefault(m["metric"], []).append(m)
            for name, values in by_name.items():
                await metrics_topic.send(key=name.encode(), value=control.dumps(values))
            save_memory(memory)
            for k in keys:
                del pending[k]
            log.info("window.computed", window_start_us=start, metrics=len(metrics))

    return app


class ProcessorService(mode.Service):
    """Hosts the ``ActionProcessor`` in the stream worker's lifecycle.

    Give it to the worker before the app (``faust.Worker(app, ProcessorService(...))``, see
    ``streams.__main__``): the worker then starts it first, and its consumer joins its group while the Faust
    app starts and joins its own. As an ``@app.service`` it started only once the app had joined its group
    and recovered its tables, and the broker holds a first join for half the session timeout: the two joins
    one after the other kept the first event about 6 s later (BENCHMARKS.md, start-up). A failure of the
    processor's run still crashes the worker (mode crashes the service's whole beacon path up to the root),
    which then exits non-zero."""

    def __init__(self, settings: Settings, bootstrap: str, society: str, **kwargs: Any) -> None:
        self._stop = asyncio.Event()
        self._proc = ActionProcessor(settings, bootstrap, society)
        super().__init__(**kwargs)

    async def on_start(self) -> None:
        self.add_future(self._proc.run(self._stop))

    async def on_stop(self) -> None:
        self._stop.set()
