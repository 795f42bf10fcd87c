"""Thread resolution of the on-disk builder: every way a comment can fail to hang in its thread.

The builder resolves depths level by level in SQL (``importers.builder._resolve``) and classifies what
no level reached; the expected depth and reason of each comment below is worked out by hand from the
builder's contract (files listed with replies before their parents, so read order does not help it).
"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path
from typing import Any

import pytest

from molt_society.importers import builder, import_path
from molt_society.schemas import events as E

T0 = "2026-01-30T17:00:00+00:00"


def _post(pid: str) -> dict[str, Any]:
    return {"id": pid, "title": f"t {pid}", "content": "c", "created_at": T0, "submolt": "general"}


def _comment(cid: str, post: str, parent: str | None, minute: int = 5, text: str = "") -> dict[str, Any]:
    return {
        "id": cid,
        "post_id": post,
        "parent_id": parent,
        "content": text or f"comment {cid}",
        "created_at": f"2026-01-30T17:{minute:02d}:00+00:00",
        "author": {"id": f"agent-{cid}", "name": f"agent {cid}"},
    }


COMMENTS = [
    _comment("c", "P1", "b"),  # depth 3, listed before its parent
    _comment("b", "P1", "a"),
    _comment("a", "P1", None),
    _comment("x", "P9", None),  # post not in the dump
    _comment("y3", "P1", "y2"),
    _comment("y2", "P1", "y"),
    _comment("y", "P1", "gone"),  # parent not in the dump; y2, y3 below it
    _comment("z", "P2", "a"),  # parent in another post; z2 below it
    _comment("z2", "P2", "z"),
    _comment("cyc1", "P1", "cyc2"),
    _comment("cyc2", "P1", "cyc1"),
    _comment("hang", "P1", "cyc1"),  # below a cycle, not in it
    _comment("d4", "P1", "d3"),  # deeper than the limit (3 here); d5 below it
    _comment("d5", "P1", "d4"),
    _comment("d3", "P1", "d2"),
    _comment("d2", "P1", "d1"),
    _comment("d1", "P1", None),
    _comment("a", "P1", None),  # the same record again
    _comment("b", "P1", "a", text="other words"),  # the same id, other content
]

DEPTHS = {"a": 1, "b": 2, "c": 3, "d1": 1, "d2": 2, "d3": 3}
REASONS = {
    "post not in dump": {"x"},
    "parent not in dump": {"y"},
    "parent is in another post": {"z"},
    "parent chain is a cycle": {"cyc1", "cyc2"},
    "deeper than 3": {"d4"},
    "parent skipped": {"y2", "y3", "z2", "hang", "d5"},
    "duplicate comment id (same record)": {"a"},
    "conflict: comment id seen before with different content (first kept)": {"b"},
}


def test_every_comment_gets_its_depth_or_its_reason(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(builder, "MAX_DEPTH", 3)
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(scratch))
    dump = tmp_path / "dump"
    dump.mkdir()
    (dump / "posts.json").write_text(json.dumps([_post("P1"), _post("P2")]))
    (dump / "comments.json").write_text(json.dumps(COMMENTS))

    result = import_path(dump, "m")

    made = {e.body.comment_id: e.body.depth for e in result.events if isinstance(e, E.CommentCreated)}
    assert made == DEPTHS
    skipped = result.report.file("comments.json").skipped
    got = {reason: {ex.split(" ")[1].rstrip(":;") for ex in t.examples} for reason, t in skipped.items()}
    counts = {reason: tally.count for reason, tally in skipped.items()}
    assert counts == {reason: len(ids) for reason, ids in REASONS.items()}
    for reason, ids in REASONS.items():  # up to three examples each, in file order
        assert got[reason] <= ids, reason
        assert len(got[reason]) == min(3, len(ids)), reason
    (first_copy,) = [e for e in result.events if isinstance(e, E.CommentCreated) and e.body.comment_id == "b"]
    assert first_copy.body.content == "comment b"
    agents = {e.actor for e in result.events if isinstance(e, E.AgentRegistered)}
    assert agents == {f"agent-{c}" for c in DEPTHS}
    assert list(scratch.iterdir()) == []  # the on-disk records are removed with the import


def test_a_reply_to_a_comment_that_made_no_event_is_skipped(tmp_path: Path) -> None:
    """A comment resolved into its thread whose event cannot be made (an id the event schema refuses
    after sanitising is not possible here, so: content the schema refuses) takes its replies along."""
    bad = _comment("a", "P1", None)
    bad["created_at"] = "0001-01-01T00:00:00+00:00"  # before the epoch: no valid event time
    rows = [bad, _comment("b", "P1", "a"), _comment("ok", "P1", None)]
    (tmp_path / "posts.json").write_text(json.dumps([_post("P1")]))
    (tmp_path / "comments.json").write_text(json.dumps(rows))
    result = import_path(tmp_path, "m")
    made = {e.body.comment_id for e in result.events if isinstance(e, E.CommentCreated)}
    skipped = result.report.file("comments.json").skipped
    assert made == {"ok"}, skipped
    assert skipped["parent skipped"].count == 1
    assert "b" in skipped["parent skipped"].examples[0]
