"""Parquet exports of MoltBook records (``importers.parquet_file``): read row by row as JSON Lines are.

The same generated records written as JSON and as Parquet import to the same events: posts carrying their
nested comment trees, and flat posts and comments tables (with Parquet's own timestamp type). A zone-less
timestamp is refused as in JSON, and a cut file is reported at the row where reading stopped.
"""

from __future__ import annotations

import sqlite3
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import orjson
import pyarrow as pa
import pyarrow.parquet as pq

from molt_society.bench.archive_gen import generate
from molt_society.importers import import_path
from molt_society.schemas.events import Event
from molt_society.schemas.wire import encode_event


def _canon(events: list[Event]) -> list[bytes]:
    return sorted(encode_event(e) for e in events)


def _posts_full(tmp_path: Path) -> list[dict[str, Any]]:
    generate(tmp_path / "gen", 200, seed=11, layouts=["posts-full-json"])
    posts: list[dict[str, Any]] = orjson.loads((tmp_path / "gen" / "posts_full.json").read_bytes())
    # Parquet writers refuse schemas nested deeper than 100 levels: leave out the generator's 40-deep chain
    return [p for i, p in enumerate(posts) if i != 100]


def test_posts_with_nested_threads_import_from_parquet_as_from_json(tmp_path: Path) -> None:
    posts = _posts_full(tmp_path)
    (tmp_path / "json").mkdir()
    (tmp_path / "json" / "posts_full.json").write_bytes(orjson.dumps(posts))
    (tmp_path / "pq").mkdir()
    pq.write_table(pa.Table.from_pylist(posts), tmp_path / "pq" / "posts_full.parquet", row_group_size=37)
    from_json = import_path(tmp_path / "json", "s")
    from_parquet = import_path(tmp_path / "pq", "s")
    assert sum(1 for e in from_json.events if e.type == "comment_created") > 200
    assert _canon(from_parquet.events) == _canon(from_json.events)
    (report,) = from_parquet.report.files
    assert report.shape == "parquet_posts"
    assert report.read["posts"] == len(posts)


def _table(db: sqlite3.Connection, sql: str) -> list[dict[str, Any]]:
    cur = db.execute(sql)
    names = [d[0] for d in cur.description]
    return [dict(zip(names, row, strict=True)) for row in cur]


def _timestamps(rows: list[dict[str, Any]], tz: Any) -> pa.Table:
    table = pa.Table.from_pylist(rows)
    times = [datetime.fromisoformat(r["created_at"]).astimezone(UTC).replace(tzinfo=None) for r in rows]
    i = table.schema.get_field_index("created_at")
    return table.set_column(i, "created_at", pa.array(times, pa.timestamp("us", tz=tz)))


def test_flat_posts_and_comments_tables_import_from_parquet_as_from_json_lines(tmp_path: Path) -> None:
    generate(tmp_path / "gen", 300, seed=12, layouts=["observatory-sqlite"])
    db = sqlite3.connect(tmp_path / "gen" / "observatory.sqlite")
    cols = "id, agent_id AS author_id, agent_name AS author_name, score, created_at"
    posts = _table(db, f"SELECT {cols}, submolt, title, content, comment_count FROM posts")
    comments = _table(db, f"SELECT {cols}, post_id, parent_id, content FROM comments")
    for folder in ("jsonl", "pq"):
        (tmp_path / folder).mkdir()
    for name, rows in (("posts", posts), ("comments", comments)):
        (tmp_path / "jsonl" / f"{name}.jsonl").write_bytes(b"\n".join(orjson.dumps(r) for r in rows))
        pq.write_table(_timestamps(rows, "UTC"), tmp_path / "pq" / f"{name}.parquet")
    from_jsonl = import_path(tmp_path / "jsonl", "s")
    from_parquet = import_path(tmp_path / "pq", "s")
    assert len(from_parquet.events) > 1_000
    assert _canon(from_parquet.events) == _canon(from_jsonl.events)
    assert {f.shape for f in from_parquet.report.files} == {"parquet_posts", "parquet_comments"}


def test_a_zone_less_parquet_timestamp_is_refused_and_a_cut_file_is_an_error(tmp_path: Path) -> None:
    posts = _posts_full(tmp_path)[:30]
    flat = [{k: v for k, v in p.items() if k != "comments"} for p in posts]
    naive = tmp_path / "naive.parquet"
    pq.write_table(_timestamps(flat, None), naive)
    result = import_path(naive, "s")
    assert not result.events
    (report,) = result.report.files
    assert report.skipped["timestamp has no time zone"].count == 30

    whole = tmp_path / "whole.parquet"
    pq.write_table(_timestamps(flat, "UTC"), whole, row_group_size=10)
    cut = tmp_path / "cut.parquet"
    data = whole.read_bytes()
    cut.write_bytes(data[: len(data) // 2])
    result = import_path(cut, "s")
    (report,) = result.report.files
    assert report.errors, "a cut Parquet file is reported"
