"""A JSON document read as a stream of parts, so that a large file is never held in memory whole.

``parts`` parses with ijson (its C backend, yajl) and yields the document piece by piece:

- an array document: each item, built one at a time (``Part(None, i, item)``);
- an object document: each value of its keys, except that an array value is not built whole: its items
  come one at a time (``Part(key, i, item)``; an empty array comes as ``Part(key, None, [])``);
- a scalar document (a string, a number, ``true``...): ``Part(None, None, value)``.

An array document is first split by ``importers.json_split`` (a vectorised scan for item edges, each
item parsed by orjson: 3.4x faster on a posts_full.json of 60,000 posts); what the split cannot give as
this parser would (an error, an item too deep) is streamed from there, so the parts and the errors are
the same either way (``tests/unit/importers/test_json_split.py``; one difference: an integer too large for 64
bits is a float there, as in the in-memory path below, where ijson refuses it).

Only one item is in memory at a time (plus what the caller keeps of it). Non-integer numbers are floats.
A file of at most ``IN_MEMORY_MAX`` bytes is read once and parsed with orjson instead (the same parts,
several times faster than building each item in Python; a crawl is thousands of small files); if orjson
refuses it, it is streamed as above, so the parts read before an error and the error's position are the
same whatever the file's size.

A document that is not valid JSON raises ``JsonError`` carrying the exact byte offset and a message;
the offset is found after the fact (``error_offset``: the file is fed to a fresh parser again, in chunks
up to the failing one, then byte by byte), since the parser itself does not tell it. So a parse error
costs another read of the file, never a copy of it in memory.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

import ijson  # type: ignore[import-untyped]
import orjson

from molt_society.importers.json_split import NotFast, split_items
from molt_society.importers.positions import CHUNK, first_invalid_utf8

IN_MEMORY_MAX = 16 << 20
"""Files up to this size (bytes) are parsed in memory with orjson; larger ones are streamed."""
MAX_DEPTH = 512
"""How deep an item of a document may nest (orjson's own limit is 1,024); MoltBook's deepest thread in the
shared crawl nests a few dozen levels."""
_STARTS = ("start_map", "start_array")
_ENDS = ("end_map", "end_array")


@dataclass(frozen=True)
class Part:
    """One piece of a document: ``key`` is the top-level key (object documents), ``index`` the position
    in the array the piece is an item of (``None`` for a key's non-array value or a scalar document)."""

    key: str | None
    index: int | None
    value: object


class JsonError(Exception):
    """The document is not valid JSON: ``offset`` is the byte (from the file's start) where it fails."""

    def __init__(self, offset: int, message: str) -> None:
        super().__init__(f"{message} at byte {offset}")
        self.offset = offset
        self.message = message


class TooDeep(Exception):
    """An item nests deeper than ``MAX_DEPTH`` (a hostile file: 200 KB of ``[[[[...`` took 23 GB)."""


def _build(events: Iterator[tuple[str, Any]], event: str, value: Any) -> object:
    if event not in _STARTS:
        return value
    builder = ijson.ObjectBuilder()
    builder.event(event, value)
    depth = 1
    for event, value in events:
        builder.event(event, value)
        if event in _STARTS:
            depth += 1
            if depth > MAX_DEPTH:
                raise TooDeep
        elif event in _ENDS:
            depth -= 1
            if depth == 0:
                break
    return builder.value


def _skip(events: Iterator[tuple[str, Any]], event: str) -> None:
    """Pass over an item (one already given by ``json_split``) without building it."""
    depth = 1 if event in _STARTS else 0
    while depth:
        event, _ = next(events)
        if event in _STARTS:
            depth += 1
        elif event in _ENDS:
            depth -= 1


def _walk(fh: IO[bytes], skip: int = 0) -> Iterator[Part]:
    """The parts of the document, built from the parser's events; the first ``skip`` items of an array
    document are passed over (they were given already)."""
    events: Iterator[tuple[str, Any]] = iter(ijson.basic_parse(fh, use_float=True))
    first = next(events, None)
    if first is None:
        return
    event, value = first
    if event == "start_array":
        for i, (event, value) in enumerate(events):
            if event == "end_array":
                break
            if i < skip:
                _skip(events, event)
                continue
            yield Part(None, i, _build(events, event, value))
    elif event == "start_map":
        for event, value in events:
            if event == "end_map":
                break
            key = str(value)
            event, value = next(events)
            if event != "start_array":
                yield Part(key, None, _build(events, event, value))
                continue
            empty = True
            for i, (event, value) in enumerate(events):
                if event == "end_array":
                    break
                empty = False
                yield Part(key, i, _build(events, event, value))
            if empty:
                yield Part(key, None, [])
    else:
        yield Part(None, None, value)
    for _ in events:  # anything after the document is an error ("trailing garbage")
        pass


def _doc_parts(doc: object) -> Iterator[Part]:
    """The parts of an already parsed document, as ``_walk`` yields them from a stream."""
    if isinstance(doc, list):
        for i, item in enumerate(doc):
            yield Part(None, i, item)
    elif isinstance(doc, dict):
        for key, value in doc.items():
            if isinstance(value, list) and value:
                for i, item in enumerate(value):
                    yield Part(key, i, item)
            else:
                yield Part(key, None, value)
    else:
        yield Part(None, None, doc)


def parts(path: Path, start: int = 0) -> Iterator[Part]:
    """The parts of the JSON document in the file at ``path`` from byte ``start`` (after a BOM).

    Raises ``JsonError`` (with the failing byte's offset) when the content is not valid JSON.
    """
    with path.open("rb") as fh:
        fh.seek(start)
        small = path.stat().st_size - start <= IN_MEMORY_MAX
        if small:
            try:
                doc = orjson.loads(fh.read())
            except orjson.JSONDecodeError:
                fh.seek(start)  # stream it: the parts before the error, and the error's position
            else:
                yield from _doc_parts(doc)
                return
        try:
            # _walk's builder counts the depth. ijson's C item builder (2.6x faster on a 40 MB array of
            # posts) has no bound: 20 MB of nested arrays took it 23 GB and 3 minutes. An array document
            # is split by json_split and its items parsed by orjson, depth checked; _walk streams what
            # that leaves (from the first item it could not give, exact errors included).
            try:
                for i, item in enumerate(split_items(fh, MAX_DEPTH)):
                    yield Part(None, i, item)
                return
            except NotFast as exc:
                given = exc.done
            fh.seek(start)
            yield from _walk(fh, given)
        except ijson.JSONError as exc:
            raise _locate(path, start, exc) from None
        except TooDeep:
            raise JsonError(fh.tell(), f"an item nests deeper than {MAX_DEPTH} levels") from None


def _message(exc: Exception) -> str:
    text = exc.args[0] if exc.args else str(exc)
    if isinstance(text, bytes):
        text = text.decode("utf-8", "replace")
    return str(text).strip().splitlines()[0] if str(text).strip() else type(exc).__name__


def _locate(path: Path, start: int, exc: Exception) -> JsonError:
    offset = error_offset(path, start)
    bad = first_invalid_utf8(path, start, offset + 4)
    if bad is not None and bad <= offset:
        return JsonError(bad, "not valid UTF-8 text")
    message = _message(exc)
    if "premature EOF" in message:
        message = "the document is cut short (premature end of file)"
    elif "trailing garbage" in message:
        message = "content after the end of the document"
    return JsonError(offset, message)


def _feed(coro: Any, sink: list[Any], data: bytes) -> bool:
    """Feed ``data``; ``False`` when the parser fails on it."""
    try:
        coro.send(data)
    except ijson.JSONError:
        return False
    sink.clear()
    return True


def error_offset(path: Path, start: int = 0) -> int:
    """The offset of the byte on which a JSON parser fails, reading the file from ``start``; the file's
    size when it fails only at the end (a document cut short)."""
    base = start
    failing: bytes | None = None
    sink: Any = ijson.utils.sendable_list()
    coro = ijson.basic_parse_coro(sink)
    with path.open("rb") as fh:
        fh.seek(start)
        while True:
            chunk = fh.read(CHUNK)
            if not chunk:
                break
            if not _feed(coro, sink, chunk):
                failing = chunk
                break
            base += len(chunk)
    if failing is None:
        return base  # fails on close: at the end of the file
    sink = ijson.utils.sendable_list()
    coro = ijson.basic_parse_coro(sink)
    with path.open("rb") as fh:
        fh.seek(start)
        done = start
        while done < base:
            chunk = fh.read(min(CHUNK, base - done))
            _feed(coro, sink, chunk)
            done += len(chunk)
    for i in range(len(failing)):
        if not _feed(coro, sink, failing[i : i + 1]):
            return base + i
    return base + len(failing)
