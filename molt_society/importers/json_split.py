"""The items of a large JSON array, split by a vectorised scan and each parsed by orjson.

``importers.jsonstream`` streams a large document with ijson, building each item from parser events in
Python: for a ``posts_full.json`` (one array of posts, each with its comment tree) that was half of an
import's time. Here the file is read in chunks and scanned with numpy for its structure (the first stage
of simdjson, in array operations): a quote is a string's edge unless an odd run of backslashes precedes
it, brackets and commas outside strings give the nesting depth, and the commas at depth 1 end the
array's items. Each item's bytes are then parsed by orjson, in C. Memory is one chunk plus the item
being read.

Anything this does not handle the way the streaming parser would (an item orjson refuses, an item nested
deeper than the streaming parser allows, a document that is not an array, content after it) raises
``NotFast`` with the number of items already given: the caller streams the rest with the parser that
reports the exact error and its position, skipping those items.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import IO

import numpy as np
import orjson

from molt_society.importers.positions import BLANK

CHUNK = 8 << 20
"""Bytes scanned at once."""


class NotFast(Exception):
    """The rest of the document must be streamed; ``done`` items were given before."""

    def __init__(self, done: int) -> None:
        super().__init__(f"streamed after item {done}")
        self.done = done


def _real_quotes(a: np.ndarray, carry_run: int) -> np.ndarray:
    """Positions of the quotes of chunk ``a`` not escaped by an odd run of backslashes before them
    (``carry_run``: backslashes that ended the previous chunk)."""
    quotes = np.flatnonzero(a == 34)
    if not quotes.size:
        return quotes
    backslash = a == 92
    if not backslash.any() and not carry_run:
        return quotes
    idx = np.arange(a.size, dtype=np.int64)
    last_plain = np.maximum.accumulate(np.where(backslash, -1, idx))  # last non-backslash at or before
    prev = quotes - 1
    at = last_plain[np.maximum(prev, 0)]
    run = np.where(at >= 0, prev - at, prev + 1 + carry_run)
    run = np.where(prev < 0, carry_run, run)
    real: np.ndarray = quotes[run % 2 == 0]
    return real


def _trailing_run(a: np.ndarray, carry_run: int) -> int:
    """Backslashes that end chunk ``a`` (with the previous chunk's, when ``a`` is all backslashes)."""
    plain = np.flatnonzero(a != 92)
    if not plain.size:
        return carry_run + int(a.size)
    return int(a.size - 1 - plain[-1])


def split_items(fh: IO[bytes], max_depth: int) -> Iterator[object]:
    """The items of the JSON array that ``fh`` holds from its position; ``NotFast`` as said above.
    ``max_depth``: how deep an item may nest (its own brackets count 1)."""
    done = 0
    pending = bytearray()  # the bytes of the item being read
    in_string, run, depth = False, 0, 0
    started = ended = False
    while chunk := fh.read(CHUNK):
        if ended:
            if chunk.strip(BLANK):
                raise NotFast(done)
            continue
        offset = 0
        if not started:
            body = chunk.lstrip(BLANK)
            if not body:
                continue
            if body[:1] != b"[":
                raise NotFast(done)
            offset = len(chunk) - len(body) + 1
            started, depth = True, 1
        a = np.frombuffer(chunk, dtype=np.uint8)[offset:]
        quotes = _real_quotes(a, run)
        run = _trailing_run(a, run) if a.size else run
        marks = np.flatnonzero((a == 44) | (a == 91) | (a == 93) | (a == 123) | (a == 125))
        before = np.searchsorted(quotes, marks)  # quotes before each mark
        outside = (before + int(in_string)) % 2 == 0
        marks = marks[outside]
        in_string = bool((int(in_string) + quotes.size) % 2)
        kinds = a[marks]
        step = np.where((kinds == 91) | (kinds == 123), 1, np.where((kinds == 93) | (kinds == 125), -1, 0))
        after = depth + np.cumsum(step)
        if after.size and int(after.max()) > max_depth + 1:
            raise NotFast(done)
        ends = marks[((kinds == 44) & (after == 1)) | (after == 0)]
        if after.size and int(after.min()) < 0:
            raise NotFast(done)
        begin = 0
        for end in ends.tolist():
            pending += a[begin:end].tobytes()
            begin = end + 1
            closing = a[end] != 44
            if closing and not pending.strip(BLANK) and done == 0:
                pending.clear()  # an empty array
            else:
                try:
                    item = orjson.loads(pending)
                except orjson.JSONDecodeError:
                    raise NotFast(done) from None
                pending.clear()
                yield item
                done += 1
            if closing:
                ended = True
                if a[begin:].tobytes().strip(BLANK):
                    raise NotFast(done)
                break
        if not ended:
            pending += a[begin:].tobytes()
        if after.size:
            depth = int(after[-1])
    if not ended:
        raise NotFast(done)  # cut short: the streaming parser says where
