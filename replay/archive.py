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


def read_jsonl_docs(path: Path) -> tuple[ArchiveHeader | None, Iterator[dict[str, Any]]]:
    """Header and events of a JSON Lines archive as wire-form dicts, not validated here.

    The replay hot path: every event is validated by the stream processor it is published to.
    """
    opener: Any = gzip.open if path.suffix == ".gz" else open
    f = opener(path, "rb")
    first = f.readline()
    header: ArchiveHeader | None = None
    pending: list[bytes] = []
    if first.strip():
        doc = orjson.loads(first)
        if isinstance(doc, dict) and "archive" in doc:
            header = ArchiveHeader(**doc["archive"])
        else:
            pending.append(first)

    def docs() -> Iterator[dict[str, Any]]:
        try:
            for line in pending:
                yield orjson.loads(line)
            for line in f:
                if line.strip():
                    yield orjson.loads(line)
        finally:
            f.close()

    return header, docs()


def read_jsonl(path: Path) -> tuple[ArchiveHeader | None, Iterator[Event]]:
    """The header (None for a plain event log) and the validated events of a JSON Lines archive."""
    header, docs = read_jsonl_docs(path)
    return header, (_event_from_doc(d) for d in docs)


_COLUMNS = ("event_id", "type", "schema_version", "society", "actor", "occurred_at", "causation_id", "body")


def write_parquet(path: Path, header: ArchiveHeader, events: Iterable[Event]) -> int:
    import pyarrow as pa
    import pyarrow.parquet as pq

    cols: dict[str, list[Any]] = {c: [] for c in _COLUMNS}
    for ev in events:
        d = event_to_dict(ev)
        for c in _COLUMNS[:-1]:
            cols[c].append(d[c])
        cols["body"].append(orjson.dumps(d["body"]).decode())
    table = pa.table(
        {
            "event_id": pa.array(cols["event_id"], pa.string()),
            "type": pa.array(cols["type"], pa.string()),
            "schema_version": pa.array(cols["schema_version"], pa.int16()),
            "society": pa.array(cols["society"], pa.string()),
            "actor": pa.array(cols["actor"], pa.string()),
            "occurred_at": pa.array(cols["occurred_at"], pa.string()),  # ISO text: exact to the microsecond
            "causation_id": pa.array(cols["causation_id"], pa.string()),
            "body": pa.array(cols["body"], pa.string()),
        }
    )
    table = table.replace_schema_metadata({"society-archive": orjson.dumps(asdict(header))})
    pq.write_table(table, path, compression="zstd")
    return int(table.num_rows)


def read_parquet(path: Path) -> tuple[ArchiveHeader | None, Iterator[Event]]:
    import pyarrow.parquet as pq

    table = pq.read_table(path)
    meta = table.schema.metadata or {}
    raw = meta.get(b"society-archive")
    header = ArchiveHeader(**orjson.loads(raw)) if raw else None

    def events() -> Iterator[Event]:
        for batch in table.to_batches(max_chunksize=10_000):
            for row in batch.to_pylist():
                row["body"] = orjson.loads(row["body"])
                yield _event_from_doc(row)

    return header, events()


def is_archive(path: Path) -> bool:
    name = path.name
    return name.endswith((".jsonl", ".jsonl.gz", ".parquet"))


def read_archive(path: Path) -> tuple[ArchiveHeader | None, Iterator[Event]]:
    if path.name.endswith(".parquet"):
        return read_parquet(path)
    return read_jsonl(path)


def write_archive(path: Path, header: ArchiveHeader, events: Iterable[Event]) -> int:
    if path.name.endswith(".parquet"):
        return write_parquet(path, header, events)
    return write_jsonl(path, header, events)
