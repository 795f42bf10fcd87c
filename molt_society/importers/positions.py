"""Where in a file a problem is: a byte offset turned into line and column, read as a stream.

A position is reported as ``line L column C (byte B)``: ``B`` is the 0-based offset of the offending
byte from the file's first byte (a byte order mark counts), ``L`` and ``C`` are 1-based, ``C`` counted in
characters of the line (a byte order mark is not a character of line 1). The file is read in chunks, so
finding the position of an error near the end of a large file does not load the file into memory.
"""

from __future__ import annotations

import codecs
from pathlib import Path

CHUNK = 1 << 16
BOM = b"\xef\xbb\xbf"
BLANK = b" \t\r\n"
"""JSON's whitespace (and what a CSV header may start after)."""


def describe(line: int, column: int, offset: int) -> str:
    return f"line {line} column {column} (byte {offset})"


def line_column(path: Path, offset: int) -> tuple[int, int]:
    """(line, column) of byte ``offset`` in the file at ``path`` (see the module docstring)."""
    line, column = 1, 1
    decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
    done = 0
    with path.open("rb") as fh:
        while done < offset:
            chunk = fh.read(min(CHUNK, offset - done))
            if not chunk:
                break
            if done == 0 and chunk.startswith(BOM):
                chunk, done = chunk[3:], 3
            done += len(chunk)
            nl = chunk.rfind(b"\n")
            if nl >= 0:
                line += chunk.count(b"\n")
                column = 1
                decoder.reset()
                chunk = chunk[nl + 1 :]
            column += len(decoder.decode(chunk))
    return line, column


def position(path: Path, offset: int) -> str:
    """``line L column C (byte B)`` for byte ``offset`` of the file at ``path``."""
    line, column = line_column(path, offset)
    return describe(line, column, offset)


def first_invalid_utf8(path: Path, start: int = 0, end: int | None = None) -> int | None:
    """Byte offset of the first byte in ``[start, end)`` that is not valid UTF-8, or ``None``.

    A sequence cut by ``end`` is not an error (the bytes after ``end`` are not looked at).
    """
    decoder = codecs.getincrementaldecoder("utf-8")()
    at = start
    with path.open("rb") as fh:
        fh.seek(start)
        while end is None or at < end:
            chunk = fh.read(CHUNK if end is None else min(CHUNK, end - at))
            if not chunk:
                break
            pending = len(decoder.getstate()[0])
            try:
                decoder.decode(chunk)
            except UnicodeDecodeError as exc:
                return at - pending + exc.start
            at += len(chunk)
        if end is None:
            try:
                decoder.decode(b"", final=True)
            except UnicodeDecodeError as exc:
                return at - len(exc.object) + exc.start
    return None
