"""Reading one file: decide JSON or CSV from its content, detect the shape, hand it to its reader.

Never raises for bad data: a file that cannot be decoded or parsed gets an error with its position
(JSON: line, column and character offset from the parser; CSV: line number; undecodable bytes: byte
offset), a file of an unknown shape is left aside with the reason, and the import goes on.

JSON or CSV: content starting (after whitespace and a BOM) with ``{`` or ``[`` is JSON. Other content
is read as CSV when its header matches a known CSV shape. A file whose name ends in ``.json`` but
whose content is not JSON is an error ("not JSON"); any other unrecognised file is an unknown shape.
"""

from __future__ import annotations

import csv
import io
from pathlib import Path

import orjson

from importers import api, csv_export, flat
from importers.detect import UNKNOWN, detect_csv, detect_json, missing_columns, normalise_header
from importers.records import FileRecords
from importers.report import FileReport


def _json_error_position(exc: orjson.JSONDecodeError) -> str:
    return f"line {exc.lineno} column {exc.colno} (char {exc.pos})"


def read_file(path: Path, name: str) -> FileRecords:
    """The records of the file at ``path``, reported under ``name``."""
    out = FileRecords(FileReport(name))
    try:
        raw = path.read_bytes()
    except OSError as exc:
        out.report.error("file", f"cannot read: {exc.strerror or exc}")
        return out
    if raw.startswith(b"\xef\xbb\xbf"):
        raw = raw[3:]
    stripped = raw.lstrip()
    if not stripped:
        out.report.skip_reason = "empty file"
        return out
    if stripped[:1] in (b"{", b"["):
        _read_json(raw, out)
        return out
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        if path.suffix.lower() == ".json":
            out.report.error(f"byte {exc.start}", "not JSON: not valid UTF-8 text")
        else:
            out.report.skip_reason = f"unknown shape: {name} is not UTF-8 text (byte {exc.start})"
        return out
    first_line = text.splitlines()[0] if text else ""
    header = normalise_header(first_line.split(",")) if "," in first_line else []
    detected = detect_csv(header) if header else None
    if detected is not None and detected.shape != UNKNOWN:
        _read_csv(detected.shape, text, out)
        return out
    if path.suffix.lower() == ".json":
        try:
            orjson.loads(raw)
        except orjson.JSONDecodeError as exc:
            out.report.error(_json_error_position(exc), f"not JSON: {exc.msg}")
            return out
    what = detected.looks_like if detected is not None else "neither JSON nor a CSV with a header"
    out.report.skip_reason = f"unknown shape: {name} is {what}"
    return out


def _read_json(raw: bytes, out: FileRecords) -> None:
    try:
        doc = orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        out.report.shape = "json"
        out.report.error(_json_error_position(exc), f"JSON cannot be parsed: {exc.msg}")
        return
    detected = detect_json(doc)
    out.report.shape = detected.shape
    if detected.shape == UNKNOWN:
        out.report.skip_reason = f"unknown shape: {out.report.file} is {detected.looks_like}"
        return
    if detected.shape == "api_post_detail":
        assert isinstance(doc, dict)
        api.read_post_detail(doc, out)
    elif detected.shape == "api_post_listing":
        assert isinstance(doc, dict)
        api.read_post_listing(doc, out)
    elif detected.shape in ("daily_posts", "daily_comments"):
        assert isinstance(doc, dict)
        flat.read_daily(doc, out)
    elif detected.shape == "flat_posts":
        assert isinstance(doc, list)
        flat.read_posts(doc, out)
    elif detected.shape == "flat_comments":
        assert isinstance(doc, list)
        flat.read_comments(doc, out)


def _read_csv(shape: str, text: str, out: FileRecords) -> None:
    out.report.shape = shape
    try:
        header = normalise_header(next(csv.reader(io.StringIO(text, newline=""))))
    except (StopIteration, csv.Error) as exc:
        out.report.error("line 1", f"CSV header cannot be read: {exc}")
        return
    missing = missing_columns(shape, header)
    if missing:
        out.report.error(
            "line 1", f"CSV looks like {shape} but lacks required column(s): {', '.join(missing)}"
        )
        return
    csv_export.read_csv(shape, text, out)
