"""algorithms.kafka_partition.murmur2 against aiokafka's murmur2 (the reference), on keys of every length."""

from __future__ import annotations

import random

from aiokafka.partitioner import murmur2 as reference

from molt_society.algorithms.kafka_partition import murmur2


def test_same_hash_as_aiokafka_for_every_length_and_byte() -> None:
    rng = random.Random(7)
    keys = [bytes(rng.randrange(256) for _ in range(n)) for n in range(0, 70) for _ in range(20)]
    keys += [b"", b"\xff" * 9, b"post-123", "agent:émile".encode()]
    for key in keys:
        assert murmur2(key) == reference(key), key


def test_known_kafka_values() -> None:
    # values Kafka's Java client gives (org.apache.kafka.common.utils.UtilsTest.testMurmur2)
    assert murmur2(b"21") == -973932308 & 0xFFFFFFFF
    assert murmur2(b"foobar") == -790332482 & 0xFFFFFFFF
    assert murmur2(b"a-little-bit-long-string") == -985981536 & 0xFFFFFFFF
    assert murmur2(b"a-little-bit-longer-string") == -1486304829 & 0xFFFFFFFF
    assert murmur2(b"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8") == -58897971 & 0xFFFFFFFF
    assert murmur2(bytes([ord("a"), ord("b"), ord("c")])) == 479470107
