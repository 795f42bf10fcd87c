"""Longitudinal snapshot folders read as one history (``importers.snapshot_folders``, ``importers.builder``).

Two snapshots of a generated society six hours apart, the second with counts that grew (and one that
fell, and one net score that fell), a post that only the second has: one post_created / comment_created
per id, and the tallies of each target add up to its latest counts (the highest seen, for a count that
fell), the changes dated at the second snapshot. Expected values are computed here from the documents
written, not by the importer's code.
"""

from __future__ import annotations

import copy
import sqlite3
from collections import Counter
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import orjson

from molt_society.bench.archive_gen import generate
from molt_society.importers import import_path
from molt_society.importers.snapshot_folders import snapshot_time
from molt_society.schemas.events import Event
from molt_society.schemas.wire import encode_event
from molt_society.streams.partition_state import Accepted, PartitionState

FIRST, SECOND = "2026-02-05T00-00-00Z", "2026-02-05T06-00-00Z"
SECOND_AT = datetime(2026, 2, 5, 6, tzinfo=UTC)


def test_snapshot_times_come_from_folders_named_by_a_date_and_a_time() -> None:
    assert snapshot_time("snaps/2026-02-05T06-00-00Z/raw/posts.json") == SECOND_AT
    assert snapshot_time("runs/20260130T170118Z/raw/post_1.json") == datetime(
        2026, 1, 30, 17, 1, 18, tzinfo=UTC
    )
    assert snapshot_time("dump.tar.gz/2026-02-05_06:00/posts.json") == SECOND_AT
    assert snapshot_time("temp_data/2026-02-01/raw/posts.json") is None  # a date alone: a partition
    assert snapshot_time("2026-02-05T06-00-00Z.json") is None  # a file name is no folder
    assert snapshot_time("x/2026-13-05T06-00/posts.json") is None  # no such month


def _walk(comments: list[dict[str, Any]]) -> list[dict[str, Any]]:
    out, todo = [], list(comments)
    while todo:
        c = todo.pop()
        out.append(c)
        todo.extend(c["replies"])
    return out


def _sums(events: list[Event]) -> dict[str, tuple[int, int]]:
    up: Counter[str] = Counter()
    down: Counter[str] = Counter()
    for e in events:
        if e.type == "vote_tallied":
            up[e.body.target_id] += e.body.upvotes  # type: ignore[union-attr]
            down[e.body.target_id] += e.body.downvotes  # type: ignore[union-attr]
    return {t: (up[t], down[t]) for t in set(up) | set(down)}


def _accepted_by_a_stream_worker(events: list[Event]) -> None:
    state = PartitionState(
        0, 1, window_us=3_600_000_000, feed_size=5, max_event_bytes=65536, max_future_us=2**62
    )
    for e in events:
        assert isinstance(state.accept_action(encode_event(e), now_us=2**62), Accepted)


def test_posts_seen_in_two_snapshots_are_one_post_with_their_gains_tallied(tmp_path: Path) -> None:
    generate(tmp_path / "gen", 60, seed=3, layouts=["posts-full-json"])
    first: list[dict[str, Any]] = orjson.loads((tmp_path / "gen" / "posts_full.json").read_bytes())
    first[2]["upvotes"] = 5
    second = copy.deepcopy(first)
    second[0]["upvotes"] += 3
    second[1]["comment_count"] += 2
    second[2]["upvotes"] = 4  # one withdrawn: cannot be a tally
    second[2]["downvotes"] += 1
    commented = next(p for p in second if p["comments"])
    commented["comments"][0]["upvotes"] += 4
    newcomer = copy.deepcopy(first[5])
    newcomer["id"] = "only-in-the-second-snapshot"
    newcomer["comments"] = []
    second.append(newcomer)
    for name, posts in ((FIRST, first), (SECOND, second)):
        (tmp_path / "series" / name).mkdir(parents=True)
        (tmp_path / "series" / name / "posts_full.json").write_bytes(orjson.dumps(posts))

    result = import_path(tmp_path / "series", "s")
    events = result.events
    created = Counter(e.type for e in events)
    assert created["post_created"] == len(second)
    assert created["comment_created"] == sum(len(_walk(p["comments"])) for p in first)
    expected: dict[str, tuple[int, int]] = {}
    for p in second:
        older = next((q for q in first if q["id"] == p["id"]), p)
        expected[p["id"]] = (max(p["upvotes"], older["upvotes"]), max(p["downvotes"], older["downvotes"]))
        old_comments = {c["id"]: c for c in _walk(older["comments"])}
        for c in _walk(p["comments"]):
            o = old_comments.get(c["id"], c)
            expected[c["id"]] = (max(c["upvotes"], o["upvotes"]), max(c["downvotes"], o["downvotes"]))
    sums = _sums(events)
    assert set(sums) <= set(expected)
    assert all(sums.get(t, (0, 0)) == v for t, v in expected.items())
    later = [e for e in events if e.type == "vote_tallied" and e.occurred_at == SECOND_AT]
    assert {e.body.target_id for e in later} == {  # type: ignore[union-attr]
        second[0]["id"],
        second[1]["id"],
        second[2]["id"],
        commented["comments"][0]["id"],
    }
    tallies = [e.body for e in events if e.type == "vote_tallied"]
    reported = max(b.reported_comments or 0 for b in tallies if b.target_id == second[1]["id"])  # type: ignore[union-attr]
    assert reported == second[1]["comment_count"]
    notes = result.report.notes_by_reason()
    assert notes["vote count fell between snapshots (the highest seen is kept)"] == 1
    assert result.report.skipped_by_reason().get("duplicate post id (same record)", 0) == 0
    _accepted_by_a_stream_worker(events)


def test_a_net_score_follows_the_latest_snapshot_either_way(tmp_path: Path) -> None:
    generate(tmp_path / "gen", 80, seed=4, layouts=["observatory-sqlite"])
    for name in (FIRST, SECOND):
        (tmp_path / "series" / name).mkdir(parents=True)
    a, b = (tmp_path / "series" / n / "observatory.sqlite" for n in (FIRST, SECOND))
    a.write_bytes((tmp_path / "gen" / "observatory.sqlite").read_bytes())
    b.write_bytes(a.read_bytes())
    db = sqlite3.connect(b)
    db.execute("UPDATE posts SET score = score + 5 WHERE rowid % 3 = 0")
    db.execute("UPDATE posts SET score = score - 2 WHERE rowid % 3 = 1")
    db.execute("UPDATE comments SET score = score + 1 WHERE rowid % 4 = 0")
    db.commit()
    latest = dict(
        db.execute("SELECT id, score FROM posts UNION ALL SELECT id, score FROM comments").fetchall()
    )
    db.close()

    events = import_path(tmp_path / "series", "s").events
    nets = {t: u - d for t, (u, d) in _sums(events).items()}
    assert set(nets) <= set(latest)
    assert all(nets.get(t, 0) == score for t, score in latest.items())
    assert Counter(e.type for e in events)["post_created"] == 80
    _accepted_by_a_stream_worker(events)
