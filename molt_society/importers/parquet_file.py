"""Reading a Parquet export of MoltBook records (recognised by its ``PAR1`` header bytes).

The large public corpora are published as Parquet as well as JSON Lines: one row per post (its comment
threads, when it carries them, as a nested ``comments`` list whose items hold ``replies``), or one row
per comment (with its ``post_id``). Each row is read exactly as a line of JSON Lines is
(``importers.json_doc.read_records``): the same identification of posts, post details and comments, the
same field readers, the same report, at position ``row N``. Rows are read in batches of ``BATCH_ROWS``
(``pyarrow.parquet.ParquetFile.iter_batches``), never the whole file.

Parquet's own types are given to the readers as JSON would give them: timestamps as ISO 8601 text (a
timestamp stored as UTC, ``isAdjustedToUTC``, keeps its zone; one without a zone is refused by the same
rule as a zone-less JSON time), dates as text, decimals as numbers, binary as UTF-8 text when it is.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import date, datetime
from decimal import Decimal
from pathlib import Path

from molt_society.importers.json_doc import read_records
from molt_society.importers.records import FileRecords

MAGIC = b"PAR1"
BATCH_ROWS = 1_000


def is_parquet(head: bytes) -> bool:
    return head.startswith(MAGIC)


def _plain(value: object) -> object:
    """``value`` with Parquet's types turned into JSON's (recursively)."""
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_plain(v) for v in value]
    if isinstance(value, datetime | date):
        return value.isoformat()
    if isinstance(value, Decimal):
        return int(value) if value == value.to_integral_value() else float(value)
    if isinstance(value, bytes):
        try:
            return value.decode("utf-8")
        except UnicodeDecodeError:
            return value
    return value


def read_parquet(path: Path, out: FileRecords) -> None:
    """Every post and comment of the Parquet file at ``path``; a file that cannot be read is an error at
    the row where reading stopped (the rows before it are kept)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    try:
        pf = pq.ParquetFile(path)
    except (pa.ArrowException, OSError, ValueError) as exc:
        out.report.error("file", f"Parquet file cannot be opened: {exc}")
        return
    state = {"row": 0}

    def rows() -> Iterator[tuple[str, object]]:
        try:
            for batch in pf.iter_batches(batch_size=BATCH_ROWS):
                for row in batch.to_pylist():
                    state["row"] += 1
                    yield f"row {state['row']}", _plain(row)
        except (pa.ArrowException, OSError, ValueError) as exc:
            out.report.error(
                f"row {state['row'] + 1}",
                f"Parquet file cannot be read further: {exc} (rows before it are kept)",
            )
        finally:
            pf.close()

    read_records(rows(), out)
    if out.report.shape in ("flat_posts", "flat_comments", "flat_mixed", "api_post_details"):
        out.report.shape = "parquet_" + out.report.shape.removeprefix("flat_")
