"""Reading one file: decide JSON or CSV from its first bytes, then stream it to its reader.

Never raises for bad data: a file that cannot be decoded or parsed gets an error at its exact position
(``line L column C (byte B)``, see ``importers.positions``), a file of an unknown shape is left aside
with the reason, and the import goes on. A file is read as a stream, once (a parse error costs one more
read to locate it): it is never held in memory whole.

A SQLite database (by its header bytes) is read by ``importers.sqlite_db``, a Parquet file (by its
``PAR1``) by ``importers.parquet_file``. JSON or CSV, by content: a
file whose first non-blank byte (after a UTF-8 byte order mark) is ``{`` or ``[`` is JSON. Otherwise its
first line is tried as a CSV header of a known shape (``importers.detect``); failing that, the content is
tried as JSON (a scalar document is valid JSON, of an unexpected shape). What is neither is an error "not
JSON" for a file named ``.json`` and an unknown shape otherwise.
"""

from __future__ import annotations

import codecs
import csv
from collections.abc import Iterator
from pathlib import Path

from molt_society.importers import csv_export
from molt_society.importers.detect import UNKNOWN, detect_csv, missing_columns, normalise_header
from molt_society.importers.json_doc import is_json_lines, read_json, read_json_lines
from molt_society.importers.jsonstream import JsonError, parts
from molt_society.importers.parquet_file import is_parquet, read_parquet
from molt_society.importers.positions import BLANK, BOM, CHUNK, position
from molt_society.importers.records import FileRecords
from molt_society.importers.scratch import Scratch
from molt_society.importers.sqlite_db import MAGIC, is_sqlite, read_sqlite

MAX_HEADER_BYTES = 1 << 20


class _Undecodable(Exception):
    def __init__(self, offset: int) -> None:
        super().__init__(f"not valid UTF-8 at byte {offset}")
        self.offset = offset


def _peek(path: Path) -> tuple[int, bytes]:
    """(offset where the content starts, after a BOM; its first non-blank byte, ``b""`` when blank)."""
    with path.open("rb") as fh:
        head = fh.read(3)
        start = 3 if head == BOM else 0
        fh.seek(start)
        while chunk := fh.read(CHUNK):
            stripped = chunk.lstrip(BLANK)
            if stripped:
                return start, stripped[:1]
    return start, b""


def read_file(path: Path, name: str, store: Scratch) -> FileRecords:
    """The records of the file at ``path``, reported under ``name`` (posts, comments and follows go to
    ``store``)."""
    out = store.file_records(name)
    try:
        with path.open("rb") as fh:
            head = fh.read(len(MAGIC))
        if is_sqlite(head):
            read_sqlite(path, out, store)
            return out
        if is_parquet(head):
            read_parquet(path, out)
            return out
        start, first = _peek(path)
    except OSError as exc:
        out.report.error("file", f"cannot read: {exc.strerror or exc}")
        return out
    if not first:
        out.report.skip_reason = "empty file"
        return out
    if first == b"{" and is_json_lines(path, start):
        read_json_lines(path, start, out)
        return out
    if first in (b"{", b"["):
        read_json(path, start, first, out)
        return out
    header_line: str | None = None
    bad_at: int | None = None
    try:
        header_line = _first_line(path, start)
    except _Undecodable as exc:
        bad_at = exc.offset
    header = normalise_header(next(csv.reader([header_line]), [])) if header_line else []
    detected = detect_csv(header) if len(header) > 1 else None
    if detected is not None and detected.shape != UNKNOWN:
        _read_csv(path, start, detected.shape, out)
        return out
    is_json_name = path.suffix.lower() == ".json"
    if _is_json(path, start):
        read_json(path, start, first, out)
        return out
    if is_json_name:
        read_json(path, start, first, out, not_json="not JSON")
        return out
    if bad_at is not None:
        what = f"not UTF-8 text ({position(path, bad_at)})"
    elif detected is not None:
        what = detected.looks_like
    else:
        what = "neither JSON nor a CSV with a header"
    out.report.skip_reason = f"unknown shape: {name} is {what}"
    return out


def _is_json(path: Path, start: int) -> bool:
    try:
        for _ in parts(path, start):
            pass
    except JsonError:
        return False
    return True


def _first_line(path: Path, start: int) -> str:
    with path.open("rb") as fh:
        fh.seek(start)
        raw = fh.readline(MAX_HEADER_BYTES)
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise _Undecodable(start + exc.start) from None


def lines(path: Path, start: int) -> Iterator[str]:
    """The file's lines from byte ``start``, decoded one at a time (line endings kept).

    Raises ``_Undecodable`` with the offending byte's offset at the first byte that is not UTF-8.
    """
    decoder = codecs.getincrementaldecoder("utf-8")()
    offset = start
    with path.open("rb") as fh:
        fh.seek(start)
        for raw in fh:
            try:
                yield decoder.decode(raw)
            except UnicodeDecodeError as exc:
                raise _Undecodable(offset + exc.start) from None
            offset += len(raw)
        try:
            decoder.decode(b"", final=True)
        except UnicodeDecodeError as exc:
            raise _Undecodable(offset - len(exc.object) + exc.start) from None


def _read_csv(path: Path, start: int, shape: str, out: FileRecords) -> None:
    out.report.shape = shape
    header = normalise_header(next(csv.reader([_first_line(path, start)])))
    missing = missing_columns(shape, header)
    if missing:
        out.report.error(
            "line 1", f"CSV looks like {shape} but lacks required column(s): {', '.join(missing)}"
        )
        return
    try:
        csv_export.read_csv(shape, lines(path, start), out)
    except _Undecodable as exc:
        out.report.error(position(path, exc.offset), "not valid UTF-8 text (rows before it are kept)")
