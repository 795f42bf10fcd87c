"""The accepted event ids of the partitions one stream worker owns (de-duplication and conflicting ids)."""

from __future__ import annotations

import zlib


class EventIds:
    """The accepted event ids of every partition one worker owns, with a fingerprint of their bytes.

    One dict from the id (its 128-bit integer) to ``fingerprint << 16 | partition``: about 130 bytes per
    event, the same as the per-thread sets of id strings it replaces. The fingerprint is 44 bits of the
    accepted bytes, the same in every process (it travels in snapshots, so not Python's per-process
    ``hash``): their CRC-32 and the low 12 bits of their length. A redelivered copy has the same, another
    body under the same id almost surely another; a collision (2**-32 per try of the same length) would
    only make a conflicting copy a silent duplicate: it is never accepted either way.
    """

    PARTITION_BITS = 16
    PARTITION_MASK = (1 << PARTITION_BITS) - 1
    FINGERPRINT_MASK = (1 << 44) - 1

    def __init__(self, repeated: frozenset[int] | None = None) -> None:
        """``repeated``: when the whole input is known in advance (a direct replay), the ids that occur in
        it more than once, as their first 64 bits (``importers.spill.repeated_ties``; a superset is fine):
        only those are remembered, since no other can come again. None (a stream worker): every id."""
        self._ids: dict[int, int] = {}
        self._partitions: set[int] = set()  # partitions that may have ids here
        self._repeated = repeated

    def __len__(self) -> int:
        return len(self._ids)

    @classmethod
    def fingerprint(cls, raw: bytes) -> int:
        return zlib.crc32(raw) << 12 | len(raw) & 0xFFF

    def get(self, uid: int) -> int | None:
        """The packed entry of an accepted id (``unpack`` it), or None: the hot path allocates nothing."""
        return self._ids.get(uid)

    @classmethod
    def unpack(cls, packed: int) -> tuple[int, int]:
        """(fingerprint, partition) of a packed entry."""
        return packed >> cls.PARTITION_BITS, packed & cls.PARTITION_MASK

    def add(self, uid: int, fingerprint: int, partition: int) -> None:
        if self._repeated is not None and uid >> 64 not in self._repeated:
            return  # the only copy of its id in the input: nothing can meet it again
        self._ids[uid] = fingerprint << self.PARTITION_BITS | partition
        self._partitions.add(partition)

    def of_partition(self, partition: int) -> list[tuple[int, int]]:
        """(id, fingerprint) of every accepted id of ``partition``, in the order they were accepted."""
        if partition not in self._partitions:
            return []
        mask, bits = self.PARTITION_MASK, self.PARTITION_BITS
        return [(uid, v >> bits) for uid, v in self._ids.items() if v & mask == partition]

    def drop_partition(self, partition: int) -> None:
        """Forget the ids of a partition (revoked, or about to be rebuilt from its log)."""
        if partition not in self._partitions:
            return
        self._partitions.discard(partition)
        if not self._partitions:
            self._ids.clear()
            return
        mask = self.PARTITION_MASK
        self._ids = {uid: v for uid, v in self._ids.items() if v & mask != partition}
