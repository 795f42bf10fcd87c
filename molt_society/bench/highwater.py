"""How many records some topics hold now: the sum of their partitions' high watermarks, polled often."""

from __future__ import annotations

from aiokafka import TopicPartition

from molt_society.runtime import kafka
from molt_society.runtime.broker import partition_count


class HighWatch:
    """Sums of partition high watermarks of some topics, read from real fetch responses.

    ``end_offsets`` is wrong on Tansu (``society.status``), so a group-less consumer fetches at the last
    high watermark it saw: the broker answers with the new high watermark and at most one small batch.
    """

    def __init__(self, bootstrap: str, topics: list[str]) -> None:
        self.bootstrap = bootstrap
        self.topics = topics
        self.consumer = kafka.consumer(
            bootstrap, "reader", auto_offset_reset="latest", max_partition_fetch_bytes=1024
        )
        self.tps: list[TopicPartition] = []
        self.sought: dict[TopicPartition, int] = {}

    async def start(self) -> None:
        await self.consumer.start()
        # partitions from DescribeTopics (waits for each topic): a Kafka consumer's metadata lists only the
        # topics it reads
        self.tps = [
            TopicPartition(t, p) for t in self.topics for p in range(await partition_count(self.bootstrap, t))
        ]
        self.consumer.assign(self.tps)
        for tp in self.tps:
            self.consumer.seek(tp, 0)
            self.sought[tp] = 0

    async def totals(self) -> dict[str, int]:
        await self.consumer.getmany(timeout_ms=60, max_records=1)
        out = dict.fromkeys(self.topics, 0)
        for tp in self.tps:
            hw = self.consumer.highwater(tp)
            if hw is None:
                continue
            out[tp.topic] += hw
            if hw != self.sought[tp]:
                self.consumer.seek(tp, hw)
                self.sought[tp] = hw
        return out

    async def stop(self) -> None:
        await self.consumer.stop()
