"""The project's own archive: a society's events as compressed JSON Lines or Parquet, and back.

JSON Lines (``.jsonl.gz`` or ``.jsonl``): the first line is ``{"archive": {...}}`` (format version, society,
time span, window length), then one event per line in wire form, in event-time order. Parquet
(``.parquet``): one row per event with the envelope as columns and ``body`` as JSON text; the same header
is stored in the file's key-value metadata under ``society-archive``. Both read back to exactly the events
that were exported (ids, timestamps to the microsecond, bodies).

The time span matters for an exact replay: the metric windows of the original run are the windows from
``origin_us`` up to the one starting at ``last_window_us``, including trailing empty ones.
"""

from __future__ import annotations

import gzip
from collections.abc import Iterable, Iterator
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import orjson

from molt_society.schemas.events import EVENT_ADAPTER, Event
from molt_society.schemas.wire import event_to_dict

ARCHIVE_VERSION = 1


@dataclass(frozen=True)
class ArchiveHeader:
    society: str
    events: int
    origin_us: int | None = None  # start of the first metric window of the original run
    last_window_us: int | None = None  # start of its last metric window
    window_seconds: float | None = None
    version: int = ARCHIVE_VERSION


def _event_from_doc(doc: dict[str, Any]) -> Event:
    return EVENT_ADAPTER.validate_json(orjson.dumps(doc), strict=True)


def write_jsonl(path: Path, header: ArchiveHeader, events: Iterable[Event]) -> int:
    """Write the archive; ``.gz`` compresses. Returns the number of events written."""
    opener: Any = gzip.open if path.suffix == ".gz" else open
    n = 0
    with opener(path, "wb") as f:
        f.write(orjson.dumps({"archive": asdict(header)}) + b"\n")
        for ev in events:
            f.write(orjson.dumps(event_to_dict(ev)) + b"\n")
            n += 1
    return n


MAX_LINE_BYTES = 2 << 20
"""The longest line an archive may have: an event record is at most 1 MiB (``SOCIETY_MAX_EVENT_BYTES``), a
header a few hundred bytes. A longer line is refused before it is held (a 2 MB .gz of one 2 GiB line
took 2.2 GB)."""


class ArchiveError(ValueError):
    """The archive cannot be read: the message names the file, the line and what is wrong."""


def _header(path: Path, doc: Any) -> ArchiveHeader:
    none = type(None)
    fields: dict[str, Any] = {"society": str, "events": int, "origin_us": (int, none),
                              "last_window_us": (int, none), "window_seconds": (int, float, none),
                              "version": int}  # fmt: skip
    if not isinstance(doc, dict) or set(doc) - set(fields) or not {"society", "events"} <= set(doc):
        raise ArchiveError(f"{path}: line 1 is not an archive header (expected keys {sorted(fields)})")
    for key, kind in fields.items():
        if key in doc and (not isinstance(doc[key], kind) or isinstance(doc[key], bool)):
            raise ArchiveError(f"{path}: line 1, the header's {key!r} has the wrong type: {doc[key]!r:.80}")
    if doc.get("version", ARCHIVE_VERSION) != ARCHIVE_VERSION:
        raise ArchiveError(
            f"{path}: archive format version {doc['version']}; this version reads {ARCHIVE_VERSION}"
        )
    return ArchiveHeader(**doc)


def _lines(path: Path, f: Any) -> Iterator[tuple[int, bytes]]:
    """(line number, line) of ``f``, each at most ``MAX_LINE_BYTES``; ``ArchiveError`` otherwise."""
    n = 0
    while True:
        try:
            line = f.readline(MAX_LINE_BYTES + 1)
        except (OSError, EOFError, gzip.BadGzipFile) as exc:
            raise ArchiveError(f"{path}: after line {n}, the file cannot be read: {exc}") from None
        if not line:
            return
        n += 1
        if len(line) > MAX_LINE_BYTES:
            raise ArchiveError(f"{path}: line {n} is longer than {MAX_LINE_BYTES >> 20} MiB")
        yield n, line


def _doc(path: Path, n: int, line: bytes) -> dict[str, Any]:
    try:
        doc = orjson.loads(line)
    except orjson.JSONDecodeError as exc:
        raise ArchiveError(f"{path}: line {n} is not JSON ({exc})") from None
    if not isinstance(doc, dict):
        raise ArchiveError(f"{path}: line {n} is not a JSON object (an event), but {type(doc).__name__}")
    return doc


def read_jsonl_docs(path: Path) -> tuple[ArchiveHeader | None, Iterator[dict[str, Any]]]:
    """Header and events of a JSON Lines archive as wire-form dicts, not validated here.

    The replay hot path: every event is validated by the stream processor it is published to. A line that
    is not a JSON object, longer than ``MAX_LINE_BYTES``, or a header of the wrong shape raises
    ``ArchiveError`` naming the file and the line.
    """
    opener: Any = gzip.open if path.suffix == ".gz" else open
    f = opener(path, "rb")
    lines = _lines(path, f)
    header: ArchiveHeader | None = None
    pending: list[tuple[int, bytes]] = []
    try:
        first = next(lines, None)
        if first is not None and first[1].strip():
            doc = _doc(path, *first)
            if "archive" in doc:
                header = _header(path, doc["archive"])
            else:
                pending.append(first)
    except BaseException:
        f.close()
        raise

    def docs() -> Iterator[dict[str, Any]]:
        try:
            for n, line in pending:
                yield _doc(path, n, line)
            for n, line in lines:
                if line.strip():
                    yield _doc(path, n, line)
        finally:
            f.close()

    return header, docs()


def read_jsonl(path: Path) -> tuple[ArchiveHeader | None, Iterator[Event]]:
    """The header (None for a plain event log) and the validated events of a JSON Lines archive."""
    header, docs = read_jsonl_docs(path)
    return header, (_event_from_doc(d) for d in docs)


_COLUMNS = ("event_id", "type", "schema_version", "society", "actor", "occurred_at", "causation_id", "body")


PARQUET_ROWS = 50_000
"""Events per row group of a Parquet archive: what is held while writing or reading one."""


def write_parquet(path: Path, header: ArchiveHeader, events: Iterable[Event]) -> int:
    """Write the events in row groups of ``PARQUET_ROWS`` (never the whole history in memory)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    types = {"schema_version": pa.int16()}  # occurred_at: ISO text, exact to the microsecond
    schema = pa.schema([(c, types.get(c, pa.string())) for c in _COLUMNS]).with_metadata(
        {"society-archive": orjson.dumps(asdict(header))}
    )
    n = 0
    with pq.ParquetWriter(path, schema, compression="zstd") as writer:
        for chunk in _chunks(events, PARQUET_ROWS):
            cols: dict[str, list[Any]] = {c: [] for c in _COLUMNS}
            for ev in chunk:
                d = event_to_dict(ev)
                for c in _COLUMNS[:-1]:
                    cols[c].append(d[c])
                cols["body"].append(orjson.dumps(d["body"]).decode())
            writer.write_table(pa.table(cols, schema=schema))
            n += len(chunk)
    return n


def _chunks(events: Iterable[Event], size: int) -> Iterator[list[Event]]:
    chunk: list[Event] = []
    for ev in events:
        chunk.append(ev)
        if len(chunk) == size:
            yield chunk
            chunk = []
    if chunk:
        yield chunk


def _parquet_header(metadata: dict[bytes, bytes] | None) -> ArchiveHeader | None:
    raw = (metadata or {}).get(b"society-archive")
    return ArchiveHeader(**orjson.loads(raw)) if raw else None


def read_header(path: Path) -> ArchiveHeader | None:
    """The header of an archive (window length, span) without reading its events."""
    if path.name.endswith(".parquet"):
        import pyarrow.parquet as pq

        return _parquet_header(pq.read_schema(path).metadata)
    header, docs = read_jsonl_docs(path)
    docs.close()  # type: ignore[attr-defined]
    return header


def read_parquet(path: Path) -> tuple[ArchiveHeader | None, Iterator[Event]]:
    import pyarrow.parquet as pq

    header = _parquet_header(pq.read_schema(path).metadata)

    def events() -> Iterator[Event]:
        with pq.ParquetFile(path) as pf:
            for batch in pf.iter_batches(batch_size=10_000):
                for row in batch.to_pylist():
                    row["body"] = orjson.loads(row["body"])
                    yield _event_from_doc(row)

    return header, events()


def is_archive(path: Path) -> bool:
    """Whether ``path`` is the project's own archive (or event log) rather than a MoltBook dump: a
    ``.parquet`` with its metadata, or a ``.jsonl``/``.jsonl.gz`` whose first line is an archive header or
    an event (``event_id``, ``type``, ``occurred_at``); JSON Lines of posts are a dump (``importers``)."""
    name = path.name
    if name.endswith(".parquet"):
        return True
    if not name.endswith((".jsonl", ".jsonl.gz")):
        return False
    opener: Any = gzip.open if name.endswith(".gz") else open
    try:
        with opener(path, "rb") as f:
            first = f.readline(MAX_LINE_BYTES)
        doc = orjson.loads(first) if first.strip() else None
    except (OSError, EOFError, gzip.BadGzipFile, orjson.JSONDecodeError):
        return True  # not readable as a dump either: the archive reader says what is wrong, at which line
    return not isinstance(doc, dict) or "archive" in doc or {"event_id", "type", "occurred_at"} <= set(doc)


def read_archive(path: Path) -> tuple[ArchiveHeader | None, Iterator[Event]]:
    if path.name.endswith(".parquet"):
        return read_parquet(path)
    return read_jsonl(path)


def write_archive(path: Path, header: ArchiveHeader, events: Iterable[Event]) -> int:
    if path.name.endswith(".parquet"):
        return write_parquet(path, header, events)
    return write_jsonl(path, header, events)
