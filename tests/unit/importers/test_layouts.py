"""Importer against MoltBook's API drift and bad files: later layouts, JSON of another shape, exact error
positions, symbolic links, and the streamed reading of large files.

Expected values come from reading the payloads directly with json (or by hand for the byte positions),
never through the importer.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
from test_importers import DAILY, DATA, DETAIL, POSTS_RAW, VIYERCAL

import molt_society.importers.jsonstream as jsonstream
from molt_society.importers import import_path
from molt_society.schemas import events as E

pytestmark = pytest.mark.skipif(not DATA.is_dir(), reason=f"MoltBook samples not found at {DATA}")

CAMEL = {
    "follower_count": "followerCount",
    "following_count": "followingCount",
    "display_name": "displayName",
}


def _camel_author(author: dict[str, Any] | None) -> dict[str, Any] | None:
    if author is None:
        return None
    return {CAMEL.get(k, k): v for k, v in author.items()}


def _later(post: dict[str, Any], n: int) -> dict[str, Any]:
    """A post in the later layout: camelCase author fields, ``author_id`` and the later extra fields."""
    out = dict(post)
    out["author"] = _camel_author(post.get("author"))
    out["author_id"] = post["author"]["id"] if post.get("author") else None
    out["hot_score"] = 12.5 + n
    out["is_spam"] = n % 3 == 0
    out["labels"] = ["general"] if n % 2 else []
    out["verification_status"] = "verified"
    return out


def _later_comment(c: dict[str, Any]) -> dict[str, Any]:
    out = dict(c, author=_camel_author(c.get("author")), is_spam=False, labels=[])
    out["replies"] = [_later_comment(r) for r in c.get("replies") or []]
    return out


def test_later_layout_posts_are_all_imported(tmp_path: Path) -> None:
    docs = [json.loads(f.read_text()) for f in sorted(VIYERCAL.rglob("post_*.json"))]
    assert len(docs) == 20
    expected_posts: dict[str, str] = {}  # post id -> author id, read directly
    expected_comments: set[str] = set()
    for n, doc in enumerate(docs):
        post = _later(doc["post"], n)
        expected_posts[post["id"]] = post["author_id"]
        if n % 2:  # the crawler did not ask for comments: no comments key at all
            payload = {"success": True, "post": post, "context": doc.get("context")}
        else:
            payload = {
                "success": True,
                "post": post,
                "comments": [_later_comment(c) for c in doc["comments"]],
            }
            stack = list(doc["comments"])
            while stack:
                c = stack.pop()
                expected_comments.add(c["id"])
                stack.extend(c.get("replies") or [])
        (tmp_path / f"post_{n:02d}.json").write_text(json.dumps(payload))
    # and a listing of the same posts in the later layout, some fields camelCase
    listing = [_later(d["post"], n) for n, d in enumerate(docs)]
    for p in listing[:5]:
        p["createdAt"] = p.pop("created_at")
        p["commentCount"] = p.pop("comment_count")
    (tmp_path / "z_listing.json").write_text(
        json.dumps({"success": True, "posts": listing, "has_more": False})
    )

    result = import_path(tmp_path, "m")
    posts = {e.body.post_id: e.actor for e in result.events if isinstance(e, E.PostCreated)}
    assert posts == expected_posts  # every post, its author by id
    comments = {e.body.comment_id for e in result.events if isinstance(e, E.CommentCreated)}
    assert comments == expected_comments
    report = result.report
    assert all(f.status == "imported" for f in report.files)
    assert not any(r.startswith("post") or "shape" in r for r in report.skipped_by_reason())
    without = report.file("post_01.json")
    assert without.shape == "api_post_detail"
    assert without.read == {"posts": 1}
    assert without.events["post_created"] == 1
    ignored = report.ignored_fields()
    for name in ("post.hot_score", "post.is_spam", "post.labels", "post.verification_status"):
        assert ignored[name] == 40  # 20 post details + 20 listed copies
    assert ignored["post.author.followerCount"] == 40
    assert ignored["comment.is_spam"] == len(expected_comments)
    listed = report.file("z_listing.json")
    assert listed.read == {"posts": 20}
    assert listed.skipped["duplicate post id (same record)"].count == 20  # same posts, same content
    text = report.render()
    assert "fields not imported" in text
    assert "post.hot_score 40" in text


def test_valid_json_of_an_unexpected_shape_is_called_json(tmp_path: Path) -> None:
    (tmp_path / "number.json").write_text("42\n")
    (tmp_path / "string.txt").write_text('"a JSON string"')
    (tmp_path / "agents.json").write_text(json.dumps([{"name": "a", "karma": 1}, {"name": "b", "karma": 2}]))
    report = import_path(tmp_path, "m").report
    for name, what in (("number.json", "number"), ("string.txt", "string"), ("agents.json", "array of 2")):
        entry = report.file(name)
        assert entry.status == "skipped"
        reason = entry.skip_reason or ""
        assert "valid JSON of an unexpected shape" in reason, reason
        assert "neither JSON" not in reason
        assert what in reason
    assert "karma" in (report.file("agents.json").skip_reason or "")


def test_error_positions_are_exact(tmp_path: Path) -> None:
    # byte 34 is 0xff: line 2 starts at byte 13 ('{"id": "p1",\n' is 13 bytes); bytes 13..33 are 20
    # characters (the 'é' is 2 bytes), so the bad byte is the 21st character of line 2
    good = b'{"id": "p1",\n "title": "caf\xc3\xa9 lait\xff", "created_at": null}'
    assert good.index(b"\xff") == 34
    (tmp_path / "bad_byte.json").write_bytes(good)
    # with a BOM (3 bytes, not a character) the stray x is byte 3 + 10 = 13, line 1 column 11
    (tmp_path / "bom.json").write_bytes(b'\xef\xbb\xbf{"posts": x}')
    # a multi-byte character before the error: 'é' is 2 bytes but 1 character; "?" is byte 16, after
    # 15 characters: column 16
    (tmp_path / "accent.json").write_bytes('{"t": "é", "u":?}'.encode())
    # CSV: an undecodable byte on line 3, its 5th character, after a 22-byte header and a 32-byte row
    header = b"id,post_id,created_at\n"
    row = b"c1,p1,2026-01-30T17:05:00+00:00\n"
    assert len(header) == 22
    (tmp_path / "c.csv").write_bytes(header + row + b"c2,p\xfe1,2026-01-30T17:05:00+00:00\n")
    report = import_path(tmp_path, "m").report

    def err(name: str) -> str:
        (e,) = report.file(name).errors
        return e.position

    assert err("bad_byte.json") == "line 2 column 21 (byte 34)"
    assert "UTF-8" in report.file("bad_byte.json").errors[0].message
    assert err("bom.json") == "line 1 column 11 (byte 13)"
    assert err("accent.json") == "line 1 column 16 (byte 16)"
    assert err("c.csv") == f"line 3 column 5 (byte {len(header) + len(row) + 4})"
    assert report.file("c.csv").read == {"comments": 1}  # the row before the bad byte is kept


def test_a_symlink_out_of_the_folder_is_not_followed(tmp_path: Path) -> None:
    root, outside = tmp_path / "dump", tmp_path / "elsewhere"
    root.mkdir()
    outside.mkdir()
    (outside / "secret.json").write_bytes(DETAIL.read_bytes())
    (outside / "sub").mkdir()
    (outside / "sub" / "more.json").write_bytes(DETAIL.read_bytes())
    (root / "posts.json").write_bytes(POSTS_RAW.read_bytes())
    os.symlink(outside / "secret.json", root / "link.json")
    os.symlink(outside / "sub", root / "linked_folder")
    os.symlink(root / "posts.json", root / "alias.json")  # inside: read (its posts are duplicates)
    result = import_path(root, "m")
    report = result.report
    for name in ("link.json", "linked_folder"):
        entry = report.file(name)
        assert entry.status == "skipped"
        assert "outside the imported folder" in (entry.skip_reason or "")
        assert entry.records_read == 0
    assert not any(isinstance(e, E.CommentCreated) for e in result.events)  # DETAIL's comments not read
    assert report.file("alias.json").records_read == len(json.loads(POSTS_RAW.read_text()))
    assert "link.json" in report.render()


@pytest.mark.parametrize("path", [DETAIL, POSTS_RAW, DAILY, VIYERCAL])
def test_streamed_reading_gives_the_same_import(path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Files over IN_MEMORY_MAX are streamed item by item: the same events and report as in memory."""
    in_memory = import_path(path, "m")
    monkeypatch.setattr(jsonstream, "IN_MEMORY_MAX", -1)
    streamed = import_path(path, "m")
    assert streamed.events == in_memory.events
    assert streamed.report.to_dict() == in_memory.report.to_dict()


def test_a_cut_file_keeps_what_was_read_before_the_cut(tmp_path: Path) -> None:
    whole = json.loads(POSTS_RAW.read_text())[:100]
    data = (json.dumps(whole)[:-1] + ', {"id": "cut-here", "tit').encode()
    (tmp_path / "half.json").write_bytes(data)
    result = import_path(tmp_path, "m")
    entry = result.report.file("half.json")
    assert entry.status == "partial"
    assert entry.read == {"posts": len(whole)}
    assert {e.body.post_id for e in result.events if isinstance(e, E.PostCreated)} == {p["id"] for p in whole}
    (error,) = entry.errors
    assert error.position == f"line 1 column {len(data.decode()) + 1} (byte {len(data)})"
