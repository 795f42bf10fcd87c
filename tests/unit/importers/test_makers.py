"""An import's events made by worker processes (``importers.makers``) are the events, spill order and report
of the same import made by the builder alone; a worker that dies ends the import, saying so.

The dump: a generated observatory archive (``bench.archive_gen``: threads 40 deep, tallies, follows) and,
beside it, posts and comments that make the builder note, cut and skip (an author missing or known only by
name, a title too long, a comment dated before its post, a comment whose time is no valid event time and
its replies, a reply whose parent is missing).
"""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path
from typing import Any

import pytest

from molt_society.bench.archive_gen import generate
from molt_society.importers import import_stream, makers
from molt_society.importers.builder import Builder
from molt_society.importers.makers import MakerError, Makers

T0 = "2026-01-30T17:00:00+00:00"


def _odd_records(folder: Path) -> None:
    posts: list[dict[str, Any]] = []
    comments: list[dict[str, Any]] = []
    for i in range(60):
        post: dict[str, Any] = {"id": f"odd-{i}", "content": "c", "created_at": T0, "submolt": "general"}
        post["title"] = "t" * (400 if i % 5 == 0 else 10)
        if i % 3 == 0:
            post["author"] = {"name": f"named {i}"}
        elif i % 3 == 1:
            post["author"] = {"id": f"agent-{i}", "name": f"agent {i}"}
        posts.append(post)
        base = {"post_id": f"odd-{i}", "content": f"on {i}", "author": {"id": f"agent-c{i}", "name": "c"}}
        comments += [
            {**base, "id": f"early-{i}", "parent_id": None, "created_at": "2026-01-30T16:00:00+00:00"},
            {**base, "id": f"void-{i}", "parent_id": None, "created_at": "0001-01-01T00:00:00+00:00"},
            {**base, "id": f"under-void-{i}", "parent_id": f"void-{i}", "created_at": T0},
            {**base, "id": f"orphan-{i}", "parent_id": "gone", "created_at": T0},
        ]
    (folder / "odd-posts.json").write_text(json.dumps(posts))
    (folder / "odd-comments.json").write_text(json.dumps(comments))


@pytest.fixture(scope="module")
def dump(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("dump")
    generate(folder, 1_200, 7, ["observatory-sqlite"])
    (folder / "manifest.json").unlink()
    _odd_records(folder)
    return folder


def _imported(path: Path, makers_from: int, monkeypatch: pytest.MonkeyPatch) -> tuple[list[bytes], Any]:
    with monkeypatch.context() as m:
        m.setattr(makers, "MIN_RECORDS", makers_from)
        used: list[int] = []
        start = makers.start

        def counted(b: Builder) -> Makers | None:
            made = start(b)
            used.append(made is not None)
            return made

        m.setattr(makers, "start", counted)
        stream = import_stream(path, "m")
    assert used == [makers_from == 0]
    try:
        return list(stream.spill), stream.report.to_dict()
    finally:
        stream.close()


@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="workers are used on two cores or more")
def test_events_made_by_workers_are_the_builders_own(dump: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    alone, alone_report = _imported(dump, 10**12, monkeypatch)
    workers, workers_report = _imported(dump, 0, monkeypatch)
    assert len(alone) > 5_000
    assert workers == alone  # the same encoded events in the same order
    assert workers_report == alone_report
    odd = next(f for f in alone_report["files"] if f["file"] == "odd-comments.json")
    for reason in ("parent skipped", "parent not in dump", "not valid for the event schema"):
        assert odd["skipped"][reason]["count"] == 60, reason
    assert "comment is dated before what it replies to (kept as given)" in odd["notes"]
    posts = next(f for f in alone_report["files"] if f["file"] == "odd-posts.json")
    assert {"title truncated to 300 characters", "author known only by name (agent id name:<name>)"} <= set(
        posts["notes"]
    )


def test_a_worker_that_dies_ends_the_import_saying_so(tmp_path: Path) -> None:
    makers = Makers("m", ["f"], 2, tmp_path, 1_000)
    try:
        os.kill(makers.procs[1].pid or 0, signal.SIGKILL)
        rows = iter([("p", 0, 0, b"[]")] * 5_000)
        with pytest.raises(MakerError, match=r"ended \(exit code -9\) before it had made"):
            list(makers.posts(rows))
    finally:
        makers.close()
