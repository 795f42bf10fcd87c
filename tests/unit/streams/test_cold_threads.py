"""``streams.cold_threads``: the store answers ``in`` and ``get`` as a dict of what was put and not dropped
would, whatever its post-id filter says (filter grown many times over here); the filter never says no to
a key it holds, and says yes to about 1% of the others at capacity; no file of the store is left in its
folder (the database is unlinked once open)."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from molt_society.streams.cold_threads import ColdThreads, PostFilter


def test_the_store_answers_as_a_dict_of_its_rows(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(ColdThreads, "FILTER_CAPACITY", 8)  # grown from 8 to thousands on the way
    rng = random.Random(11)
    cold = ColdThreads(tmp_path)
    model: dict[str, bytes] = {}
    ids = [f"post-{i}" for i in range(3_000)]
    try:
        for step in range(400):
            if step % 10 == 9 and model:
                gone = rng.sample(sorted(model), k=min(len(model), rng.randint(1, 20)))
                cold.drop(gone)
                for pid in gone:
                    del model[pid]
            else:
                batch = [(pid, step, f"{pid}@{step}".encode()) for pid in rng.sample(ids, rng.randint(1, 40))]
                cold.put(batch)
                model.update({pid: row for pid, _, row in batch})
            for pid in rng.sample(ids, 50):
                assert (pid in cold) == (pid in model)
                assert cold.get(pid) == model.get(pid)
        assert dict(cold.stored()) == model
        assert list(tmp_path.iterdir()) == []  # the open database only: a killed process leaves nothing
    finally:
        cold.close()


def test_the_filter_holds_every_key_and_few_others() -> None:
    f = PostFilter(20_000)
    held = [f"p{i}" for i in range(20_000)]
    for key in held:
        f.add(key)
    assert all(key in f for key in held)
    others = sum(f"q{i}" in f for i in range(100_000))
    assert others < 2_000  # about 1% expected of 7 hashes at 10 bits per key; under 2% asserted
    assert 3 not in f  # not a str
