"""Records appended straight into producer batches, per partition, in order."""

from __future__ import annotations

import asyncio
from typing import Any

from aiokafka import AIOKafkaProducer

from molt_society.runtime import kafka


class BatchOut:
    """Records of one partition (accepted events, or marks), appended to producer batches.

    Building record batches directly skips the producer's per-message path, which is most of the cost of
    republishing; batches are submitted in order, so the partition keeps the order of the actions. Once
    the sends are acknowledged, ``offset_after`` says which offset followed any record: the position a
    watermark applied at, recorded on the marks topic.
    """

    def __init__(self, producer: AIOKafkaProducer, topic: str, partition: int) -> None:
        self.producer = producer
        self.topic = topic
        self.partition = partition
        self.batch = producer.create_batch()
        self.futures: list[asyncio.Future[Any]] = []
        self.appended = 0  # records appended so far
        self._sent: list[tuple[int, int, asyncio.Future[Any]]] = []  # (first record, records, future)

    async def append(self, key: bytes | None, value: bytes, headers: list[tuple[str, bytes]]) -> None:
        headers = kafka.signed_headers(self.producer, self.topic, key, value, headers)
        if self.batch.append(key=key, value=value, timestamp=None, headers=headers) is None:
            await self.flush()
            if self.batch.append(key=key, value=value, timestamp=None, headers=headers) is None:
                raise ValueError(f"record of {len(value)} bytes does not fit in a producer batch")
        self.appended += 1

    async def flush(self) -> None:
        n = self.batch.record_count()
        if n > 0:
            fut: asyncio.Future[Any] = await self.producer.send_batch(
                self.batch, self.topic, partition=self.partition
            )
            self.futures.append(fut)
            self._sent.append((self.appended - n, n, fut))
            self.batch = self.producer.create_batch()

    def offset_after(self, n: int, before: int) -> int:
        """The partition's next offset once the first ``n`` appended records were written: the offset of
        record ``n`` (or the one after the last). ``before``: the next offset before any of them, used
        when nothing was sent. Call after ``flush`` and once the futures are done."""
        for first, count, fut in self._sent:
            if n <= first + count:
                offset: int = fut.result().offset
                return offset + (n - first)
        if self._sent:
            first, count, fut = self._sent[-1]
            last: int = fut.result().offset
            return last + count
        return before
