"""Consumer lag, measured one way everywhere: high watermarks by a fetch, committed offsets by OffsetFetch.

The local Tansu broker answers ``ListOffsets(latest)`` wrongly, so ``end_offsets`` is never used: a fetch
from the last known high watermark comes back (nearly) empty and carries the current one. A group's
committed offsets are read by a consumer that never joins the group (the admin client's
``list_consumer_group_offsets`` is not answered by Tansu).

- ``LagReader``: long-lived consumers for a process that asks again and again (the dashboard, status).
- ``highwaters`` / ``group_lag``: one-shot forms of the same.
- ``own_lag``: a consumer's own lag on its assigned partitions (high watermark - position), as the sink
  reports it in ``/health``.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from typing import Any

from aiokafka import AIOKafkaConsumer, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient

from molt_society.runtime import kafka
from molt_society.schemas.topics import Role, topic_name


class LagReader:
    """High watermarks and group lags of one society, on consumers kept open between calls."""

    def __init__(self, bootstrap: str, society: str, *, timeout: float = 5.0, client_id: str | None = None):
        self.bootstrap = bootstrap
        self.society = society
        self.timeout = timeout
        self._extra: dict[str, Any] = {
            "fetch_max_wait_ms": 50,
            "max_partition_fetch_bytes": 64 * 1024,
            "request_timeout_ms": int(timeout * 1000),
            "retry_backoff_ms": 200,
            **({"client_id": client_id} if client_id else {}),
        }
        self._fetcher: AIOKafkaConsumer | None = None
        self._admin: AIOKafkaAdminClient | None = None
        self._partitions: dict[str, int] = {}  # partition counts never change in a run
        self._groups: dict[str, AIOKafkaConsumer] = {}
        self._hw: dict[TopicPartition, int] = {}

    async def highwaters(
        self, topics: list[str] | None = None, *, partial: bool = False
    ) -> dict[TopicPartition, int]:
        """The high watermark of every partition of ``topics`` (default: every topic of the society).

        Raises ``TimeoutError`` when not every partition answered within the timeout (with ``partial``:
        returns those that did; ``society status`` shows what it got), and the client's own errors when
        the broker does not answer at all."""
        if self._fetcher is None:
            c = kafka.consumer(self.bootstrap, "reader", **self._extra)
            await c.start()
            self._fetcher = c
        c = self._fetcher
        names = topics if topics is not None else [topic_name(self.society, r) for r in Role]
        counts = await self.partition_counts(names)  # raises when the broker does not answer
        tps = [TopicPartition(t, p) for t in names for p in range(counts.get(t, 0))]
        if not tps:
            return {}
        if set(tps) != c.assignment():
            c.assign(tps)
        # only answers that arrived after this round began count (last_poll_timestamp)
        round_ms = time.time() * 1000 - 1
        for tp in tps:
            c.seek(tp, self._hw.get(tp, 0))
        seen: dict[TopicPartition, int] = {}
        deadline = time.monotonic() + self.timeout
        while len(seen) < len(tps) and time.monotonic() < deadline:
            await c.getmany(timeout_ms=100, max_records=1)
            for tp in tps:
                hw, polled = c.highwater(tp), c.last_poll_timestamp(tp)
                if hw is not None and polled is not None and polled >= round_ms and tp not in seen:
                    seen[tp] = hw
        if len(seen) < len(tps) and not partial:
            raise TimeoutError("no fetch answer for every partition")
        self._hw.update(seen)
        return seen

    async def partition_counts(self, topics: list[str]) -> dict[str, int]:
        """Partitions of each of ``topics`` that exists (DescribeTopics; a consumer's metadata lists only
        the topics it reads on Apache Kafka)."""
        missing = [t for t in topics if t not in self._partitions]
        if missing:
            if self._admin is None:
                admin = kafka.admin(self.bootstrap, timeout_s=self.timeout)
                await admin.start()
                self._admin = admin
            for meta in await self._admin.describe_topics(missing):
                parts = meta.get("partitions")
                if meta.get("error_code", 0) == 0 and parts:
                    self._partitions[str(meta["topic"])] = len(parts)
        return {t: self._partitions[t] for t in topics if t in self._partitions}

    async def committed(self, group: str, tps: list[TopicPartition]) -> dict[TopicPartition, int | None]:
        """The offsets ``group`` committed on ``tps`` (None where it committed nothing)."""
        gc = self._groups.get(group)
        if gc is None:
            gc = kafka.consumer(self.bootstrap, "offsets", group=group, **self._extra)
            await gc.start()
            self._groups[group] = gc
        return {tp: await gc.committed(tp) for tp in tps}

    async def group_lags(self, hws: dict[TopicPartition, int]) -> dict[str, int]:
        """Records each of the society's groups has not committed yet, on the topic it reads."""
        lags: dict[str, int] = {}
        for role, topic_role in kafka.GROUP_TOPICS.items():
            topic = topic_name(self.society, topic_role)
            mine = {tp: hw for tp, hw in hws.items() if tp.topic == topic}
            done = await self.committed(kafka.group_id(self.society, role), list(mine))
            lags[role] = sum(hw - (done[tp] or 0) for tp, hw in mine.items())
        return lags

    async def close(self) -> None:
        for c in [self._fetcher, *self._groups.values()]:
            if c is not None:
                with contextlib.suppress(Exception):
                    await asyncio.wait_for(c.stop(), 5)
        if self._admin is not None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self._admin.close(), 5)
        self._fetcher = None
        self._admin = None
        self._groups = {}


async def highwaters(
    bootstrap: str, society: str, topics: list[str] | None = None
) -> dict[TopicPartition, int]:
    """One-shot ``LagReader.highwaters``."""
    reader = LagReader(bootstrap, society)
    try:
        return await reader.highwaters(topics)
    finally:
        await reader.close()


async def group_lags(bootstrap: str, society: str) -> tuple[dict[TopicPartition, int], dict[str, int]]:
    """One-shot high watermarks of every topic and the lag of every group of ``society``."""
    reader = LagReader(bootstrap, society)
    try:
        hws = await reader.highwaters()
        return hws, await reader.group_lags(hws)
    finally:
        await reader.close()


def own_lag(consumer: AIOKafkaConsumer, tp: TopicPartition, position: int) -> int | None:
    """``consumer``'s lag on ``tp`` at ``position`` (None until a fetch reported the high watermark)."""
    high = consumer.highwater(tp)
    return None if high is None else max(0, high - position)
