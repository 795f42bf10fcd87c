"""Records appended straight into producer batches, per partition, in order."""

from __future__ import annotations

from collections.abc import Awaitable
from typing import Any

from aiokafka import AIOKafkaProducer


class BatchOut:
    """Accepted events (and forwarded watermarks) of one partition, appended to producer batches.

    Building record batches directly skips the producer's per-message path, which is most of the cost of
    republishing; batches are submitted in order, so the partition keeps the order of the actions.
    """

    def __init__(self, producer: AIOKafkaProducer, topic: str, partition: int) -> None:
        self.producer = producer
        self.topic = topic
        self.partition = partition
        self.batch = producer.create_batch()
        self.futures: list[Awaitable[Any]] = []

    async def append(self, key: bytes | None, value: bytes, headers: list[tuple[str, bytes]]) -> None:
        if self.batch.append(key=key, value=value, timestamp=None, headers=headers) is None:
            await self.flush()
            if self.batch.append(key=key, value=value, timestamp=None, headers=headers) is None:
                raise ValueError(f"record of {len(value)} bytes does not fit in a producer batch")

    async def flush(self) -> None:
        if self.batch.record_count() > 0:
            self.futures.append(
                await self.producer.send_batch(self.batch, self.topic, partition=self.partition)
            )
            self.batch = self.producer.create_batch()
