"""UUIDv7 event ids (RFC 9562): 48-bit Unix milliseconds, version, 74 random bits.

Python 3.11 has no ``uuid.uuid7``; this is the layout of RFC 9562 section 5.7. The random bits can come
from a seeded generator, which is how a simulated society gets the same ids for the same seed.
"""

from __future__ import annotations

import os
import random
import uuid
from datetime import datetime


def uuid7(at: datetime, rand: random.Random | None = None) -> uuid.UUID:
    """A UUIDv7 whose timestamp is ``at`` (timezone-aware) and whose random bits come from ``rand``.

    Without ``rand`` the random bits come from ``os.urandom``.
    """
    bits = rand.getrandbits(74) if rand is not None else int.from_bytes(os.urandom(10), "big") >> 6
    return uuid7_of_bits(at, bits)


def uuid7_of_bits(at: datetime, bits: int) -> uuid.UUID:
    """The UUIDv7 of time ``at`` whose 74 random bits are the low 74 bits of ``bits``."""
    ms = int(at.timestamp() * 1000) & ((1 << 48) - 1)
    rand_a = (bits >> 62) & 0xFFF
    rand_b = bits & ((1 << 62) - 1)
    value = (ms << 80) | (0x7 << 76) | (rand_a << 64) | (0b10 << 62) | rand_b
    return uuid.UUID(int=value)


def uuid7_time_ms(value: uuid.UUID) -> int:
    """The Unix millisecond timestamp carried by a UUIDv7."""
    return value.int >> 80
