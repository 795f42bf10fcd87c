"""The split fast path gives exactly the parts (and errors) the streaming parser gives.

Each document is read by ``jsonstream.parts`` as a large file twice: with ``json_split`` and with it
refusing at once (so ijson streams everything, the reference); chunks as small as 7 bytes put chunk
edges inside strings, escapes and runs of backslashes.
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from pathlib import Path
from typing import IO

import orjson
import pytest

from molt_society.importers import json_split, jsonstream
from molt_society.importers.json_split import NotFast

FIXED = [
    b"[]",
    b"  [ ]  ",
    b"[1,2,3]",
    b'["a\\\\", "b\\"c", {"x": "]}\\\\\\""}]',
    b"[1,]",
    b"[,1]",
    b"[1] x",
    b"[1, 2",
    b'{"a": [1]}',
    b"3",
    b'[{"a": [[[[1]]]]}]',
    b"[" + b"[" * 600 + b"]" * 600 + b"]",
    b"[" + b"[" * 513 + b"]" * 513 + b"]",
    b"[" + b"[" * 511 + b"]" * 511 + b"]",
    b'["\xff"]',
    b"[1e400]",
    b'[{"k":1,"k":2}]',
    b"[NaN]",
    b'["\\ud800"]',
    b"[1.5, -0, -0.0, true, null]",
]


def _random_docs() -> Iterator[bytes]:
    rng = random.Random(7)
    for n in range(120):
        items = []
        for _ in range(rng.randint(0, 20)):
            text = "".join(rng.choice('\\"[]{},a é') for _ in range(rng.randint(0, 40)))
            items.append({"id": n, "t": text, "r": [text, {"d": [text] * rng.randint(0, 3)}]})
        yield orjson.dumps(items, option=orjson.OPT_INDENT_2 if n % 2 else 0)


def _read(path: Path) -> object:
    try:
        return [(p.key, p.index, p.value) for p in jsonstream.parts(path)]
    except jsonstream.JsonError as exc:
        return ("error", exc.offset, exc.message)


def _refuse(fh: IO[bytes], max_depth: int) -> Iterator[object]:
    raise NotFast(0)
    yield  # a generator, as split_items is


@pytest.mark.parametrize("chunk", [7, 64, 1 << 20])
def test_split_parts_equal_streamed_parts(
    chunk: int, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(jsonstream, "IN_MEMORY_MAX", 0)  # every file is "large"
    monkeypatch.setattr(json_split, "CHUNK", chunk)
    for i, doc in enumerate([*FIXED, *_random_docs()]):
        path = tmp_path / f"{i}.json"
        path.write_bytes(doc)
        fast = _read(path)
        with monkeypatch.context() as m:
            m.setattr(jsonstream, "split_items", _refuse)
            streamed = _read(path)
        assert fast == streamed, doc[:120]


def test_split_gives_items_and_says_where_it_stops(tmp_path: Path) -> None:
    path = tmp_path / "a.json"
    path.write_bytes(b'[{"a": "x\\"]"}, [1, [2]], "s"]')
    with path.open("rb") as fh:
        assert list(json_split.split_items(fh, 512)) == [{"a": 'x"]'}, [1, [2]], "s"]
    path.write_bytes(b"[1, 2, oops, 4]")
    got: list[object] = []

    def take() -> None:
        with path.open("rb") as fh:
            got.extend(json_split.split_items(fh, 512))

    with pytest.raises(NotFast) as stop:
        take()
    assert got == [1, 2]
    assert stop.value.done == 2
    path.write_bytes(b"[1, [[[2]]]]")
    with path.open("rb") as fh, pytest.raises(NotFast) as deep:
        list(json_split.split_items(fh, 2))
    assert deep.value.done <= 1  # at or before the deep item (a chunk holding one is streamed whole)
