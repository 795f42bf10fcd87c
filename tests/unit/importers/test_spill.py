"""The external sort an import and a replay order their events with: any number of runs, the order of
``sorted`` on the same keys, ties in insertion order, nothing lost or duplicated, files removed."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from molt_society.importers.spill import SortedSpill


@pytest.mark.parametrize("run_size", [1, 7, 1_000, 10_000])
def test_spill_gives_the_payloads_in_key_order(tmp_path: Path, run_size: int) -> None:
    rng = random.Random(run_size)
    items = [(rng.randrange(-50, 50), rng.randbytes(rng.randrange(0, 3)), i) for i in range(2_000)]
    spill = SortedSpill(run_size, folder=tmp_path)
    for us, tie, i in items:
        spill.add(us, tie, f"payload {i}".encode())
    expected = [f"payload {i}".encode() for _, _, i in sorted(items)]  # ties: insertion order (i)
    assert len(spill) == 2_000
    assert spill.runs == (2_000 // run_size if run_size < 2_000 else 0)
    assert list(spill) == expected
    assert list(spill) == expected  # iterable again
    spill.close()
    assert list(tmp_path.iterdir()) == []  # the runs are removed
    assert list(spill) == []


def test_a_payload_is_kept_byte_for_byte(tmp_path: Path) -> None:
    blobs = [bytes(range(256)) * 3, b"", b"\x00\n\r", "é✓".encode()]
    with SortedSpill(2, folder=tmp_path) as spill:
        for i, b in enumerate(blobs):
            spill.add(len(blobs) - i, b"", b)
        assert list(spill) == list(reversed(blobs))


@pytest.mark.parametrize("run_size", [3, 1_000])
def test_a_sealed_spill_reads_the_same_from_its_run_files(tmp_path: Path, run_size: int) -> None:
    rng = random.Random(5)
    items = [(rng.randrange(50), rng.randbytes(4), rng.randbytes(rng.randrange(30))) for _ in range(200)]
    spill = SortedSpill(run_size=run_size, folder=tmp_path)
    for us, tie, payload in items:
        spill.add(us, tie, payload)
    expected = list(spill)
    runs = spill.seal()
    reader = SortedSpill.of_runs(runs, len(spill))
    assert len(reader) == 200
    assert list(reader) == expected
    reader.close()  # the reader's close leaves the owner's files
    assert all(p.exists() for p in runs)
    assert list(spill) == expected
    spill.close()
    assert not any(p.exists() for p in runs)
